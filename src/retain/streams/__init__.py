"""The live tier: where a Redis/Valkey stream lives, and the trim verb that bounds it to a window.

The key layout (:mod:`retain.streams.keys`), one XTRIM, pure decision and
sync/asyncio sends (:mod:`retain.streams.trim`), and what a stream holds now
as an operator asks it (:mod:`retain.streams.inspect`). What re-applies
windows on a beat, folds into the archive first, previews a beat or reads a
policy file is the layer above: :mod:`retain.retention`.

Imports: the vocabulary only (:mod:`retain.errors`, :mod:`retain.windows`,
:mod:`retain.durations`, :mod:`retain.ids`, :mod:`retain.clock`,
:mod:`retain._redis`, :mod:`retain._fields`); never :mod:`retain.archive` nor
:mod:`retain.retention`, which import it.
"""

from retain.streams.inspect import GroupInfo, StreamInfo, list_streams, stream_info
from retain.streams.keys import DEFAULT_PREFIX, RawKey, Stream, StreamRef, key_of, stream_key
from retain.streams.trim import atrim, trim, xtrim_command

__all__ = [
    "DEFAULT_PREFIX",
    "GroupInfo",
    "RawKey",
    "Stream",
    "StreamInfo",
    "StreamRef",
    "atrim",
    "key_of",
    "list_streams",
    "stream_info",
    "stream_key",
    "trim",
    "xtrim_command",
]
