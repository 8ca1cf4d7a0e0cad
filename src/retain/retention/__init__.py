"""Retention: declared windows re-applied on a beat of their own, archived streams folded before they trim.

What orchestrates the live tier and the archive: the policy and its pure
decision (:mod:`~retain.retention.policy`), the TOML policy file the daemon runs
(:mod:`~retain.retention.policyfile`), the driver and its sync and asyncio
runners (:mod:`~retain.retention.driver`), a dry run of one beat
(:mod:`~retain.retention.dryrun`), what an operator watches of each stream
(:mod:`~retain.retention.status`), one stream inspected under a policy
(:mod:`~retain.retention.inspect`), the driver's Prometheus metrics
(:mod:`~retain.retention.metrics`), and the daemon assembled from a policy file
(:mod:`~retain.retention.daemon`: ``run(DaemonConfig(load_policy("retain.toml")))`` is
``retain streams run retain.toml``).

Example:
    >>> driver = RetentionDriver(redis.Redis(), [(StreamRef("codemojex", "activity"), MaxLen(10_000))])
    >>> with driver:          # beats every second on a thread until the block ends
    ...     serve_the_game()

Imports: the vocabulary, :mod:`retain.streams` and :mod:`retain.archive`, and for the
daemon's endpoints alone :mod:`retain.ops` and :mod:`retain.wire`; nothing imports it
but the CLI and the demo. The archive (pyarrow, obstore) is imported
only where an archive is in use, so that a policy without archiving never loads it.
"""

from retain.beats import beat_delay
from retain.retention import daemon
from retain.retention.daemon import DaemonConfig, dry_run, run, run_once
from retain.retention.driver import AsyncRetentionDriver, RetentionDriver
from retain.retention.dryrun import StreamPreview, preview
from retain.retention.inspect import StreamReport, applying_entry, inspect_stream
from retain.retention.leases import Replicas
from retain.retention.metrics import DriverMetrics
from retain.retention.policy import Policy, PolicyEntry, StreamPolicy, TrimCall, decide
from retain.retention.policyfile import ArchiveSettings, PolicyFile, check_policy, load_policy, parse_policy
from retain.retention.report import ReplicaBeat, SweepReport
from retain.retention.status import StreamStatus, stream_status

__all__ = [
    "ArchiveSettings",
    "AsyncRetentionDriver",
    "DaemonConfig",
    "DriverMetrics",
    "Policy",
    "PolicyEntry",
    "PolicyFile",
    "ReplicaBeat",
    "Replicas",
    "RetentionDriver",
    "StreamPolicy",
    "StreamPreview",
    "StreamReport",
    "StreamStatus",
    "SweepReport",
    "TrimCall",
    "applying_entry",
    "beat_delay",
    "daemon",
    "check_policy",
    "decide",
    "dry_run",
    "inspect_stream",
    "load_policy",
    "parse_policy",
    "preview",
    "run",
    "run_once",
    "stream_status",
]
