"""Stream ids as numbers: parse, order, step, the bounds of a read, and instants as epoch milliseconds.

A Redis stream id is ``"<ms>-<seq>"``, two unsigned 64-bit integers, the
first the Unix time in milliseconds it was minted at. As text they do not
sort (``"9-0" > "10-0"``), so retain compares them as :class:`StreamId`
pairs; the archive stores them as two int64 columns. This is the one place
that parses an id and turns an instant into its millisecond (:func:`epoch_ms`).

Example:
    >>> StreamId.parse("1789171200000-7").successor()
    StreamId(ms=1789171200000, seq=8)
    >>> str(upper_bound("1789171200000"))
    '1789171200000-18446744073709551615'
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from retain.errors import InvalidInput, InvalidStreamId

__all__ = ["MAX_PART", "StreamId", "epoch_ms", "lower_bound", "upper_bound"]

MAX_PART = 2**64 - 1
_FULL = re.compile(r"(0|[1-9][0-9]{0,19})-(0|[1-9][0-9]{0,19})")
_MS_ONLY = re.compile(r"0|[1-9][0-9]{0,19}")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, order=True)
class StreamId:
    """One stream id, ordered as the server orders them: by ``ms``, then ``seq``."""

    ms: int
    seq: int

    def __post_init__(self) -> None:
        for name, part in (("ms", self.ms), ("seq", self.seq)):
            if isinstance(part, bool) or not isinstance(part, int) or not 0 <= part <= MAX_PART:
                raise InvalidStreamId(f"a stream id's {name} must be an int from 0 to 2^64-1 (got {part!r})")

    @classmethod
    def parse(cls, text: str | bytes) -> StreamId:
        """The id ``"<ms>-<seq>"`` (str or bytes, as redis-py returns it)."""
        if isinstance(text, bytes):
            text = text.decode("ascii", "replace")
        found = _FULL.fullmatch(text) if isinstance(text, str) else None
        if found is None:
            raise InvalidStreamId(f"a stream id must be '<ms>-<seq>' such as '1789171200000-0' (got {text!r})")
        return cls(int(found[1]), int(found[2]))

    def successor(self) -> StreamId:
        """The smallest id after this one; the ids after ``18446744073709551615-18446744073709551615`` are none."""
        if self.seq < MAX_PART:
            return StreamId(self.ms, self.seq + 1)
        if self.ms < MAX_PART:
            return StreamId(self.ms + 1, 0)
        raise InvalidStreamId("the largest stream id has no successor")

    def predecessor(self) -> StreamId | None:
        """The largest id before this one, or None before ``0-0``."""
        if self.seq > 0:
            return StreamId(self.ms, self.seq - 1)
        if self.ms > 0:
            return StreamId(self.ms - 1, MAX_PART)
        return None

    def __str__(self) -> str:
        return f"{self.ms}-{self.seq}"


def lower_bound(value: str | datetime | StreamId | None) -> StreamId:
    """The first id a read from ``value`` includes, as XRANGE reads its start.

    None and ``"-"`` are the very first id; ``"<ms>"`` is ``<ms>-0``; a
    timezone-aware datetime is the first id minted in its millisecond.
    """
    if value is None or value == "-":
        return StreamId(0, 0)
    if isinstance(value, datetime):
        return StreamId(epoch_ms(value, "a read start"), 0)
    return _parse_bound(value, seq_if_missing=0)


def upper_bound(value: str | datetime | StreamId | None) -> StreamId:
    """The last id a read up to ``value`` includes, as XRANGE reads its end.

    None and ``"+"`` are the very last id; ``"<ms>"`` is ``<ms>-<2^64-1>``; a
    timezone-aware datetime is the last id minted in its millisecond.
    """
    if value is None or value == "+":
        return StreamId(MAX_PART, MAX_PART)
    if isinstance(value, datetime):
        return StreamId(epoch_ms(value, "a read end"), MAX_PART)
    return _parse_bound(value, seq_if_missing=MAX_PART)


def epoch_ms(instant: datetime, what: str, error: type[InvalidInput] = InvalidStreamId) -> int:
    """The Unix millisecond ``instant`` falls in: the ``<ms>`` of the ids minted then.

    ``what`` names the value in the refusal; ``error`` is the class the caller's part raises.

    Raises:
        error: ``instant`` is not a timezone-aware datetime, or precedes 1970-01-01T00:00:00Z.
    """
    if not isinstance(instant, datetime):
        raise error(f"{what} must be a timezone-aware datetime (got {instant!r})")
    if instant.tzinfo is None or instant.utcoffset() is None:
        raise error(f"{what} must be timezone-aware, e.g. datetime.now(timezone.utc) (got {instant!r})")
    if instant < _EPOCH:
        raise error(f"{what} must not precede 1970-01-01T00:00:00Z (got {instant.isoformat()})")
    # Integer arithmetic on the timedelta: float seconds would round some milliseconds away.
    return (instant - _EPOCH) // timedelta(milliseconds=1)


def _parse_bound(value: object, *, seq_if_missing: int) -> StreamId:
    if isinstance(value, StreamId):
        return value
    if isinstance(value, str) and _MS_ONLY.fullmatch(value) and int(value) <= MAX_PART:
        return StreamId(int(value), seq_if_missing)
    if isinstance(value, (str, bytes)):
        return StreamId.parse(value)
    raise InvalidStreamId(f"a read bound must be a stream id, '<ms>', a timezone-aware datetime or None "
                          f"(got {value!r})")
