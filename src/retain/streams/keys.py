"""Where a stream lives: the key layout, in one place.

A stream of queue ``q`` named ``n`` lives at ``emq:{q}:stream:n``. The braces
are a Redis Cluster hash tag: every stream of one queue hashes to one slot, so
one pipeline serves a whole queue even on a cluster.

Queue names, stream names and prefixes are 1 to 128 characters from
``A-Z a-z 0-9 _ - . :`` (the stream name may also contain ``/``). Anything
else — empty, braces (they would break the hash tag), whitespace, control
characters, other punctuation — is refused before any I/O, naming the
character. Streams that predate this layout are addressed with :class:`RawKey`.

Example:
    >>> StreamRef("codemojex", "activity").key
    'emq:{codemojex}:stream:activity'
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from retain.errors import InvalidStreamName

__all__ = ["DEFAULT_PREFIX", "KEY_TEMPLATE", "RawKey", "StreamRef", "Stream", "key_of", "stream_key"]

DEFAULT_PREFIX = "emq"
KEY_TEMPLATE = "{prefix}:{{{queue}}}:stream:{name}"
MAX_NAME_LENGTH = 128
MAX_RAW_KEY_LENGTH = 1024

_QUEUE_CHARS = re.compile(r"[A-Za-z0-9_.:\-]+")
_NAME_CHARS = re.compile(r"[A-Za-z0-9_.:/\-]+")


def _check(value: object, what: str, allowed: re.Pattern[str], described: str) -> None:
    if not isinstance(value, str):
        raise InvalidStreamName(f"{what} must be a string (got {value!r})")
    if not value or len(value) > MAX_NAME_LENGTH:
        raise InvalidStreamName(f"{what} must be 1 to {MAX_NAME_LENGTH} characters (got {value!r})")
    if allowed.fullmatch(value) is None:
        bad = next(ch for ch in value if allowed.fullmatch(ch) is None)
        raise InvalidStreamName(f"{what} {value!r} contains {bad!r}: allowed are {described}")


def stream_key(queue: str, name: str, prefix: str = DEFAULT_PREFIX) -> str:
    """The Redis key of stream ``name`` in ``queue``, after validating all three parts."""
    _check(prefix, "prefix", _QUEUE_CHARS, "A-Z a-z 0-9 _ - . :")
    _check(queue, "queue", _QUEUE_CHARS, "A-Z a-z 0-9 _ - . :")
    _check(name, "stream name", _NAME_CHARS, "A-Z a-z 0-9 _ - . : /")
    return KEY_TEMPLATE.format(prefix=prefix, queue=queue, name=name)


@dataclass(frozen=True)
class StreamRef:
    """A stream in the retain layout: ``<prefix>:{<queue>}:stream:<name>``."""

    queue: str
    name: str
    prefix: str = DEFAULT_PREFIX
    #: the Redis key, rendered (and so validated) once at construction
    key: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", stream_key(self.queue, self.name, self.prefix))

    def __str__(self) -> str:
        return self.key


@dataclass(frozen=True)
class RawKey:
    """A stream addressed by its literal key, for streams created outside the layout."""

    key: str

    def __post_init__(self) -> None:
        if not isinstance(self.key, str):
            raise InvalidStreamName(f"a raw stream key must be a string (got {self.key!r})")
        if not self.key or len(self.key) > MAX_RAW_KEY_LENGTH:
            raise InvalidStreamName(f"a raw stream key must be 1 to {MAX_RAW_KEY_LENGTH} characters (got {self.key!r})")
        bad = next((ch for ch in self.key if ch.isspace() or not ch.isprintable()), None)
        if bad is not None:
            raise InvalidStreamName(f"raw stream key {self.key!r} contains {bad!r}: whitespace and control characters are refused")

    def __str__(self) -> str:
        return self.key


Stream = StreamRef | RawKey


def key_of(stream: object) -> str:
    """The Redis key of ``stream``, a :class:`StreamRef` or :class:`RawKey` (both validated at construction).

    What every verb that takes a stream calls first, so that anything else is
    refused before any I/O, in one wording.

    Raises:
        InvalidStreamName: ``stream`` is neither a StreamRef nor a RawKey.
    """
    if not isinstance(stream, (StreamRef, RawKey)):
        raise InvalidStreamName(f"stream must be a StreamRef or RawKey (got {stream!r})")
    return stream.key
