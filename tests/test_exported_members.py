"""The public API of each package is pinned: changing it is a decision, not an accident."""

import retain
import retain.archive
import retain.servers
import retain.streams


def test_retain():
    """retain exports the vocabulary and the error tree."""
    assert sorted(retain.__all__) == sorted([
        "InvalidDuration", "InvalidInput", "InvalidPolicy", "InvalidStreamName", "InvalidWindow",
        "MaxAge", "MaxLen", "MinId", "RetainError", "ServerError", "ServerUnavailable", "Window",
        "WrongTypeError", "minid_floor",
    ])


def test_streams():
    """retain.streams exports the key layout and the trim verb."""
    assert sorted(retain.streams.__all__) == sorted([
        "DEFAULT_PREFIX", "RawKey", "Stream", "StreamRef", "atrim", "stream_key", "trim", "xtrim_command",
    ])


def test_servers():
    """retain.servers exports the embedded servers."""
    assert sorted(retain.servers.__all__) == sorted([
        "RedisCluster", "RedisServer", "SeaweedServer", "ServerStartError", "find_redis_server", "find_weed",
        "free_port",
    ])


def test_archive():
    """retain.archive exports the store, fold before trim, the merge-read and the archive errors."""
    assert sorted(retain.archive.__all__) == sorted([
        "FORMAT_VERSION", "Archive", "ArchiveAccessDenied", "ArchiveCorrupt", "ArchiveError", "ArchiveObjectExists",
        "ArchiveObjectMissing", "ArchiveUnavailable", "FoldProgress", "FoldResult", "FoldTrimResult",
        "InvalidArchive", "InvalidStreamId", "Manifest", "SegmentInfo", "StreamId", "UnarchivableEntry", "fold",
        "fold_boundary", "fold_then_trim", "read", "trim_past",
    ])


def test_every_name_resolves():
    """Every exported name exists."""
    for module in (retain, retain.streams, retain.servers, retain.archive):
        for name in module.__all__:
            assert hasattr(module, name), f"{module.__name__}.{name}"
