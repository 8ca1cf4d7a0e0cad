"""Trim windows: the part of a stream a trim must keep.

- :class:`MaxLen` keeps the ``count`` newest entries (XTRIM MAXLEN).
- :class:`MinId` keeps every entry minted at or after ``instant`` (XTRIM MINID).
- :class:`MaxAge` keeps what is younger than ``duration``; it is resolved to a
  :class:`MinId` against the caller's clock with :meth:`MaxAge.resolve`.
- :class:`MinStreamId` keeps every entry whose id is at or after a stream id
  (XTRIM MINID); the archive trims with it, just past its watermark.

``approx=True`` (the default) trims with ``~``: the server removes whole
macro-nodes only, so it may keep a few extra entries but can never reach inside
the window. ``approx=False`` trims with ``=``, exactly to the edge.

Every window is a frozen value checked at construction: a window that exists
is a window that can be sent.

Example:
    >>> MaxAge("7d").resolve(datetime(2026, 9, 12, tzinfo=timezone.utc))
    MinId(instant=datetime.datetime(2026, 9, 5, 0, 0, tzinfo=datetime.timezone.utc), approx=True)
    >>> minid_floor(datetime(2026, 9, 12, tzinfo=timezone.utc))
    '1789171200000-0'
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from retain import _fields, durations
from retain._fields import Where
from retain.errors import InvalidStreamId, InvalidWindow
from retain.ids import StreamId, epoch_ms

__all__ = ["MaxAge", "MaxLen", "MinId", "MinStreamId", "Window", "minid_floor", "require_aware"]


def require_aware(value: object, what: str) -> datetime:
    """Return ``value`` if it is a timezone-aware datetime, else raise :class:`InvalidWindow`."""
    if not isinstance(value, datetime):
        raise InvalidWindow(f"{what} must be a timezone-aware datetime (got {value!r})")
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidWindow(f"{what} must be timezone-aware, e.g. datetime.now(timezone.utc) (got {value!r})")
    return value


def minid_floor(instant: datetime) -> str:
    """The smallest stream id minted at ``instant``: ``"<unix ms>-0"``.

    Raises:
        InvalidWindow: for a naive datetime or one before the Unix epoch.
    """
    return f"{epoch_ms(instant, 'a MINID instant', InvalidWindow)}-0"


def _is_stream_id(text: str) -> bool:
    try:
        StreamId.parse(text)
    except InvalidStreamId:
        return False
    return True


def _require_approx(approx: object) -> None:
    if not isinstance(approx, bool):
        raise InvalidWindow(f"approx must be True ('~') or False ('=') (got {approx!r})")


@dataclass(frozen=True)
class MaxLen:
    """Keep the ``count`` newest entries; ``count`` is an int from 0 to 2^63-1 (a bool is not an int)."""

    count: int
    approx: bool = True

    def __post_init__(self) -> None:
        _fields.count(self.count, "MaxLen count", Where("", InvalidWindow))
        _require_approx(self.approx)

    def describe(self) -> str:
        """The XTRIM arguments this window sends, for people: ``MAXLEN ~ 1000``."""
        return f"MAXLEN {'~' if self.approx else '='} {self.count}"


@dataclass(frozen=True)
class MinId:
    """Keep every entry minted at or after ``instant`` (timezone-aware, not before 1970)."""

    instant: datetime
    approx: bool = True

    def __post_init__(self) -> None:
        minid_floor(self.instant)
        _require_approx(self.approx)

    @property
    def floor(self) -> str:
        """The MINID sent to the server: ``"<unix ms>-0"``."""
        return minid_floor(self.instant)

    def describe(self) -> str:
        """The XTRIM arguments this window sends, for people: ``MINID ~ 1789...-0``."""
        return f"MINID {'~' if self.approx else '='} {self.floor} ({self.instant.isoformat()})"


@dataclass(frozen=True, init=False)
class MaxAge:
    """Keep entries younger than ``duration``: a positive timedelta, or a string such as ``"7d"``
    (:mod:`retain.durations`), held as the timedelta it means."""

    duration: timedelta
    approx: bool = True

    def __init__(self, duration: timedelta | str, approx: bool = True) -> None:
        if isinstance(duration, str):
            duration = durations.parse(duration)
        elif not isinstance(duration, timedelta):
            raise InvalidWindow(f"MaxAge duration must be a timedelta or a string such as '7d' (got {duration!r})")
        if duration <= timedelta(0):
            raise InvalidWindow(f"MaxAge duration must be positive (got {duration})")
        _require_approx(approx)
        object.__setattr__(self, "duration", duration)
        object.__setattr__(self, "approx", approx)

    def resolve(self, now: datetime) -> MinId:
        """The :class:`MinId` this age means at ``now`` (timezone-aware)."""
        require_aware(now, "now")
        try:
            return MinId(now - self.duration, self.approx)
        except OverflowError:
            raise InvalidWindow(f"MaxAge {self.duration} reaches before year 1 from now={now.isoformat()}") from None

    def describe(self) -> str:
        """The window for people: ``MAX-AGE ~ 7d``."""
        whole = not self.duration.microseconds
        written = durations.format(self.duration) if whole else str(self.duration)
        return f"MAX-AGE {'~' if self.approx else '='} {written}"


@dataclass(frozen=True)
class MinStreamId:
    """Keep every entry whose id is at or after ``floor``, a full stream id ``"<ms>-<seq>"``.

    The archive trims with it, just past its watermark, so that a trim can only
    remove what is archived; :class:`MinId` is the same XTRIM from a time.
    """

    floor: str
    approx: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.floor, str) or not _is_stream_id(self.floor):
            raise InvalidWindow(f"a MINID floor must be a stream id '<ms>-<seq>', each part 0 to 2^64-1 "
                                f"(got {self.floor!r})")
        _require_approx(self.approx)

    def describe(self) -> str:
        """The XTRIM arguments this window sends, for people: ``MINID ~ 1789...-1``."""
        return f"MINID {'~' if self.approx else '='} {self.floor}"


Window = MaxLen | MinId | MaxAge | MinStreamId
