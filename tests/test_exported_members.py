"""The public API of each package is pinned: changing it is a decision, not an accident."""

import importlib
import pkgutil
import subprocess
import sys

import pytest

import retain
import retain.archive
import retain.docd
import retain.errors
import retain.logd
import retain.retention
import retain.servers
import retain.streams
import retain.wire


def test_retain():
    """retain exports the vocabulary and the error tree, and (on first use) the verbs and each part's entry."""
    assert sorted(retain.__all__) == sorted([
        "AuthenticationError", "InvalidDuration", "InvalidInput", "InvalidPolicy", "InvalidStreamName", "InvalidWindow",
        "Limits", "MaxAge", "MaxBytes", "MaxLen", "MinId", "RetainError", "ServerError", "ServerUnavailable", "Window",
        "WrongTypeError", "minid_floor",
        "trim", "atrim", "StreamRef", "RawKey", "RetentionDriver", "AsyncRetentionDriver", "StreamPolicy", "Archive",
        "fold_then_trim", "read", "Store", "Client",
    ])


def test_importing_retain_loads_no_part():
    """``import retain`` loads the vocabulary only; ``from retain import Archive`` then loads the archive (and
    pyarrow), and is the archive's own class."""
    script = ("import sys, retain\n"
              "loaded = sorted(m for m in sys.modules if m.startswith(('retain.', 'pyarrow', 'redis', 'deltalake')))\n"
              "print(' '.join(loaded))\n"
              "from retain import Archive, RetentionDriver, Store, trim\n"
              "import retain.archive, retain.logd, retain.retention, retain.streams\n"
              "print(Archive is retain.archive.Archive and Store is retain.logd.Store and trim is retain.streams.trim "
              "and RetentionDriver is retain.retention.RetentionDriver)\n")
    lines = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout.split("\n")
    assert set(lines[0].split()) <= {"retain.errors", "retain.windows", "retain.durations", "retain.ids",
                                     "retain._fields"}, lines[0]
    assert lines[1] == "True"
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        retain.nothing  # noqa: B018


def every_module() -> list[str]:
    return sorted(found.name for found in pkgutil.walk_packages(retain.__path__, "retain."))


@pytest.mark.parametrize("name", every_module())
def test_all_names_only_what_exists(name):
    """Every module's ``__all__`` names only what the module holds (a name in ``__all__`` that nothing defines
    passes every import and fails the first ``from … import *``)."""
    module = importlib.import_module(name)
    missing = [exported for exported in getattr(module, "__all__", ()) if not hasattr(module, exported)]
    assert not missing, f"{name}.__all__ names {missing}, which it does not define"


def test_streams():
    """retain.streams exports the key layout, the trim verb and what a stream holds now, nothing else."""
    assert sorted(retain.streams.__all__) == sorted([
        "DEFAULT_PREFIX", "GroupInfo", "RawKey", "Stream", "StreamInfo", "StreamRef", "atrim", "key_of",
        "list_streams", "stream_info", "stream_key", "trim", "xtrim_command",
    ])


def test_retention():
    """retain.retention exports the policy (and its file), the retention driver and how replicas share it, the
    dry run, a stream inspected under a policy, the file's check and the metrics, and the daemon as a library call
    (run, run_once, dry_run of a DaemonConfig)."""
    assert sorted(retain.retention.__all__) == sorted([
        "ArchiveSettings", "AsyncRetentionDriver", "DriverMetrics", "Policy", "PolicyEntry", "PolicyFile",
        "ReplicaBeat", "Replicas", "RetentionDriver", "StreamPolicy", "StreamPreview", "StreamReport",
        "StreamStatus", "SweepReport", "TrimCall",
        "applying_entry", "beat_delay", "check_policy", "decide", "inspect_stream", "load_policy", "parse_policy",
        "preview", "stream_status", "DaemonConfig", "daemon", "dry_run", "run", "run_once",
    ])


def test_servers():
    """retain.servers exports the embedded servers."""
    assert sorted(retain.servers.__all__) == sorted([
        "PostgresServer", "RedisCluster", "RedisServer", "SeaweedServer", "SentinelServer", "ServerStartError",
        "ValkeyServer", "find_postgres_bin", "find_redis_server", "find_valkey_server", "find_weed", "free_port",
    ])


def test_archive():
    """retain.archive exports the table and its columns, the plan of fold before trim and the folds, the
    merge-reads, maintenance and expiry, the query, the migration and the archive errors."""
    assert sorted(retain.archive.__all__) == sorted([
        "FILE_SCHEMA", "FORMAT_VERSION", "TABLE_SCHEMA", "Archive", "ArchiveAccessDenied", "ArchiveConflict",
        "ArchiveCorrupt", "ArchiveFenced", "Fence", "ArchiveError", "ArchiveGap", "ArchiveNeedsMigration", "ArchiveObjectExists", "ArchiveObjectMissing",
        "ArchiveTimeout", "ArchiveUnavailable", "ArchivedFile", "Damage", "VerifyReport", "verify", "FoldProgress", "FoldResult", "FoldTrimOutcome", "FoldTrimPlan",
        "FoldTrimResult", "InvalidArchive", "InvalidStreamId", "MaintenanceReport", "MaintenanceSettings",
        "MigrationReport", "StreamId", "StreamMaintenance", "StreamState", "UnarchivableEntry", "catch_up", "fold",
        "fold_boundary", "fold_then_trim", "fold_then_trim_all", "maintain", "migrate", "plan_compaction",
        "plan_expiry", "plan_fold_trim", "preview_maintenance", "query", "read", "read_arrow", "trim_past",
        "read_log", "relayout", "RelayoutReport", "vacuum_replaced",
    ])


def test_logd():
    """retain.logd exports the store, its sessions and results, the wire's clients and server, the tags,
    the retain request: its rules, the pure selection, the pass and its results; and a SQLite store's backup."""
    assert sorted(retain.logd.__all__) == sorted([
        "AsyncClient", "AutoId", "Backend", "Client", "Compaction", "Delta", "Listing", "LogdKey", "LogdServer",
        "Or", "Path", "Raw", "Read", "Schema", "ScopeInfo", "PostgresBackend", "ServerThread", "Session", "Settings",
        "SqliteBackend", "Store", "Tier", "Written", "parse",
        "RetainRequest", "RetainResult", "RetainRule", "RuleResult", "Selection", "parse_retain", "run_retain",
        "select", "Backup", "Restore", "backup", "restore", "ScheduleConfig", "run_scheduled", "send_once", "ServeConfig", "serve",
    ])


def test_logd_errors():
    """The logd branch of the error tree: each wire code has its class."""
    assert {name: cls.code for name, cls in vars(retain.errors).items()
            if isinstance(cls, type) and issubclass(cls, retain.errors.LogdError)} == {
        "LogdError": "storage_error", "InvalidRequest": "invalid_request", "InvalidPath": "invalid_request",
        "InvalidDocument": "invalid_request", "InvalidRetain": "invalid_retain",
        "PreconditionFailed": "precondition_failed",
        "SchemaViolation": "schema_violation", "StorageError": "storage_error",
        "ReadBudgetExceeded": "storage_error", "Unsupported": "unsupported", "NotFound": "not_found",
        "Compacted": "compacted", "OwnerUnavailable": "unavailable", "Unavailable": "unavailable", "StorageUnavailable": "unavailable",
        "Unauthenticated": "unauthenticated", "Forbidden": "forbidden", "LimitExceeded": "limit_exceeded",
        "StoreDamaged": "storage_error",
    }


def test_docd():
    """retain.docd exports the mount table, the pure router and its plans, its server and the controller kit,
    and how to run them."""
    assert sorted(retain.docd.__all__) == sorted([
        "LOGD", "UNSUPPORTED", "Controller", "DocdServer", "Fanout", "Forward", "Mount", "MountTable", "Owner",
        "OwnerRequest", "Owners", "RuleRoute", "SessionChange", "ThreadedServer", "answer_forward",
        "answer_retain", "controller_verbs", "delta_from", "fan_out", "load_mounts", "parse_mounts", "render_answer",
        "route", "DocdConfig", "serve",
    ])


def test_wire():
    """retain.wire exports what a user of logd or docd meets -- the documents and their tags, the bounds, who may
    do what and TLS, running a server -- and keeps its machinery (framing, the connection loop, the servers, the
    offload pool) in its modules."""
    assert sorted(retain.wire.__all__) == sorted([
        "Format", "TAG_NAMES", "AutoId", "LogdKey", "Or", "Raw", "dump", "dump_braced", "load", "split_documents",
        "WireLimits", "StreamTimeouts", "HttpTimeouts", "ByteBudget",
        "PERMISSIONS", "Token", "Tokens", "check_author", "refuse_open", "refuse_clear",
        "ClientTls", "client_context", "server_context", "Server", "ThreadedServer",
    ])


def test_every_name_resolves():
    """Every exported name exists."""
    for module in (retain, retain.streams, retain.retention, retain.servers, retain.logd, retain.errors,
                   retain.archive, retain.docd, retain.wire):
        for name in module.__all__:
            assert hasattr(module, name), f"{module.__name__}.{name}"
