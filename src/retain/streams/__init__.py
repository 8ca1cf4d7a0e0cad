"""The live tier: bound a Redis/Valkey stream to a declared window."""

from retain.streams.keys import DEFAULT_PREFIX, RawKey, Stream, StreamRef, stream_key
from retain.streams.trim import atrim, trim, xtrim_command

__all__ = [
    "DEFAULT_PREFIX",
    "RawKey",
    "Stream",
    "StreamRef",
    "atrim",
    "stream_key",
    "trim",
    "xtrim_command",
]
