"""What a stream holds now, as an operator asks it: length, first and last id, memory, its consumer groups.

What ``redis-cli`` gives piece by piece (``XINFO STREAM``, ``XINFO GROUPS``,
``MEMORY USAGE``), read in one place and returned as a frozen
:class:`StreamInfo`; :func:`list_streams` finds the streams whose key matches a
glob (``SCAN ... MATCH ... TYPE stream``, every master of a cluster). Reads
only, never a write. What a policy says of the stream (its window, W, fold lag)
is the layer above: :func:`retain.retention.inspect.inspect_stream`.

Example:
    >>> info = stream_info(conn, "emq:{codemojex}:stream:activity", now=utc_now())
    >>> info.length, info.first_age_s, [(g.name, g.pending, g.lag) for g in info.groups]
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from retain._redis import RedisLike, translate_errors
from retain.errors import InvalidStreamName, ServerError, WrongTypeError
from retain.ids import StreamId
from retain.streams.keys import RawKey

__all__ = ["SCAN_COUNT", "GroupInfo", "StreamInfo", "list_streams", "stream_info", "stream_keys"]

#: keys SCAN looks at per call, here and in a pattern's rescan: a million keys are about a thousand round trips
SCAN_COUNT = 1000


@dataclass(frozen=True)
class GroupInfo:
    """One consumer group: its consumers, entries delivered but not acknowledged, entries not yet delivered."""

    name: str
    consumers: int
    #: entries delivered to a consumer and not acknowledged (the PEL)
    pending: int
    #: entries not yet delivered to the group (None: the server cannot tell, Redis < 7 or after an XDEL)
    lag: int | None
    last_delivered: str

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "consumers": self.consumers, "pending": self.pending, "lag": self.lag,
                "last_delivered": self.last_delivered}


@dataclass(frozen=True)
class StreamInfo:
    """A stream at ``at``: its length, first and last entry ids (None: empty), bytes in memory, groups."""

    key: str
    at: datetime
    length: int
    first: StreamId | None
    last: StreamId | None
    #: MEMORY USAGE (None: the server refused it, e.g. an ACL without the command)
    memory: int | None
    groups: tuple[GroupInfo, ...] = ()

    @property
    def first_age_s(self) -> float | None:
        """Seconds from the first entry's id time to ``at`` (None: empty)."""
        return None if self.first is None else _age(self.first, self.at)

    @property
    def last_age_s(self) -> float | None:
        """Seconds from the last entry's id time to ``at`` (None: empty)."""
        return None if self.last is None else _age(self.last, self.at)

    def as_dict(self) -> dict[str, Any]:
        """The figures as JSON-ready values (ids as text, ages in seconds)."""
        return {"key": self.key, "at": self.at.isoformat(), "length": self.length,
                "first": None if self.first is None else str(self.first), "first_age_s": self.first_age_s,
                "last": None if self.last is None else str(self.last), "last_age_s": self.last_age_s,
                "memory_bytes": self.memory, "groups": [group.as_dict() for group in self.groups]}


def _age(stream_id: StreamId, at: datetime) -> float:
    return max(0.0, round(at.timestamp() - stream_id.ms / 1000, 3))


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _field(answer: dict[Any, Any], name: str) -> Any:
    """A field of an XINFO answer, whether the client decodes responses or not."""
    return answer.get(name, answer.get(name.encode()))


def list_streams(conn: RedisLike, pattern: str = "*") -> list[str]:
    """The keys of the streams matching the glob ``pattern``, sorted (keys of other types are skipped, and keys
    :func:`stream_keys` leaves out)."""
    with translate_errors():
        return sorted(set(stream_keys(conn.scan_iter(match=pattern, count=SCAN_COUNT, _type="stream"))))


def stream_keys(answer: Iterable[Any]) -> list[str]:
    """The keys a scan found, as text; a key that is not UTF-8 or not a usable raw key is left out."""
    found = []
    for key in answer:
        try:
            text = key.decode() if isinstance(key, bytes) else str(key)
            RawKey(text)
        except (UnicodeDecodeError, InvalidStreamName):
            continue
        found.append(text)
    return found


def stream_info(conn: RedisLike, key: str, *, now: datetime) -> StreamInfo:
    """What the stream at ``key`` holds at ``now``.

    Raises:
        WrongTypeError: the key holds something other than a stream.
        ServerError: no key ``key``.
        ServerUnavailable, AuthenticationError: as any read.
    """
    with translate_errors(key):
        kind = _text(conn.execute_command("TYPE", key))
        if kind == "none":
            raise ServerError(f"no stream at {key!r}: the key does not exist", server_message="", key=key)
        if kind != "stream":
            raise WrongTypeError(f"{key!r} holds a {kind}, not a stream", server_message="", key=key)
        stream = conn.execute_command("XINFO STREAM", key)
        groups = conn.execute_command("XINFO GROUPS", key)
    try:
        with translate_errors(key):
            memory: int | None = int(conn.execute_command("MEMORY USAGE", key) or 0)
    except ServerError:  # a user without MEMORY still sees the rest
        memory = None
    first, last = _field(stream, "first-entry"), _field(stream, "last-entry")
    return StreamInfo(key, now, int(_field(stream, "length")),
                      StreamId.parse(_text(first[0])) if first else None,
                      StreamId.parse(_text(last[0])) if last else None, memory,
                      tuple(_group(group) for group in groups))


def _group(answer: dict[Any, Any]) -> GroupInfo:
    lag = _field(answer, "lag")
    return GroupInfo(_text(_field(answer, "name")), int(_field(answer, "consumers")), int(_field(answer, "pending")),
                     None if lag is None else int(lag), _text(_field(answer, "last-delivered-id")))
