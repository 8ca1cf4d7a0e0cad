"""The live tier: bound a Redis/Valkey stream to a declared window, once or on a beat of its own."""

from retain.streams.driver import AsyncRetentionDriver, RetentionDriver, SweepReport, beat_delay
from retain.streams.keys import DEFAULT_PREFIX, RawKey, Stream, StreamRef, stream_key
from retain.streams.metrics import DriverMetrics
from retain.streams.policy import Policy, PolicyEntry, StreamPolicy, TrimCall, decide
from retain.streams.policyfile import ArchiveSettings, PolicyFile, load_policy, parse_policy
from retain.streams.dryrun import StreamPreview, preview
from retain.streams.trim import atrim, trim, xtrim_command

__all__ = [
    "DEFAULT_PREFIX",
    "ArchiveSettings",
    "AsyncRetentionDriver",
    "DriverMetrics",
    "Policy",
    "PolicyEntry",
    "PolicyFile",
    "RawKey",
    "RetentionDriver",
    "Stream",
    "StreamPolicy",
    "StreamPreview",
    "StreamRef",
    "SweepReport",
    "TrimCall",
    "atrim",
    "beat_delay",
    "decide",
    "load_policy",
    "parse_policy",
    "preview",
    "stream_key",
    "trim",
    "xtrim_command",
]
