"""The public API of each package is pinned: changing it is a decision, not an accident."""

import retain
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
    """retain.streams exports the key layout, the trim verb, the policy and the retention driver."""
    assert sorted(retain.streams.__all__) == sorted([
        "DEFAULT_PREFIX", "RawKey", "Stream", "StreamRef", "atrim", "stream_key", "trim", "xtrim_command",
        "AsyncRetentionDriver", "DriverMetrics", "Policy", "PolicyEntry", "PolicyFile", "RetentionDriver",
        "StreamPolicy", "StreamPreview", "SweepReport", "TrimCall", "beat_delay", "decide", "load_policy",
        "parse_policy", "preview", "utc_now",
    ])


def test_servers():
    """retain.servers exports the embedded servers."""
    assert sorted(retain.servers.__all__) == sorted([
        "RedisCluster", "RedisServer", "ServerStartError", "find_redis_server", "free_port",
    ])


def test_every_name_resolves():
    """Every exported name exists."""
    for module in (retain, retain.streams, retain.servers):
        for name in module.__all__:
            assert hasattr(module, name), f"{module.__name__}.{name}"
