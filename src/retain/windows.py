"""Trim windows: the part of a stream a trim must keep.

- :class:`MaxLen` keeps the ``count`` newest entries (XTRIM MAXLEN).
- :class:`MinId` keeps every entry minted at or after ``instant`` (XTRIM MINID).
- :class:`MaxAge` keeps what is younger than ``duration``; it is resolved to a
  :class:`MinId` against the caller's clock with :meth:`MaxAge.resolve`.
- :class:`MinStreamId` keeps every entry whose id is at or after a stream id
  (XTRIM MINID); the archive trims with it, just past its watermark.
- :class:`MaxBytes` keeps the newest entries that fit in a memory budget. Redis
  has no byte trim: each beat measures the stream (``MEMORY USAGE key SAMPLES n``
  and ``XLEN``) and :meth:`MaxBytes.to_maxlen` turns the budget into a length.
- :class:`Limits` combines several of them on one stream: an entry is kept only
  while it is inside every one (the strictest wins, as in Kafka and JetStream).

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

import re
from dataclasses import dataclass
from datetime import datetime, timedelta

from retain import _fields, durations
from retain._fields import Where
from retain.errors import InvalidStreamId, InvalidWindow
from retain.ids import StreamId, epoch_ms

__all__ = ["Limits", "MaxAge", "MaxBytes", "MaxLen", "MinId", "MinStreamId", "Window", "minid_floor", "parse_size",
           "require_aware"]


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


#: the units a byte budget may be written in: binary multiples, as Redis's own MEMORY USAGE counts
SIZE_UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
_SIZE = re.compile(r"\s*(\d+)\s*(B|KiB|MiB|GiB)\s*")


def parse_size(text: object) -> int:
    """Bytes from ``"64MiB"``: a whole number and one unit of B, KiB, MiB, GiB.

    Raises:
        InvalidWindow: anything else, naming what arrived and what is expected.
    """
    match = _SIZE.fullmatch(text) if isinstance(text, str) else None
    if match is None:
        raise InvalidWindow(f"a size must be a whole number and a unit of {', '.join(SIZE_UNITS)}, such as '64MiB' "
                            f"(got {text!r})")
    return int(match.group(1)) * SIZE_UNITS[match.group(2)]


def format_size(size: int) -> str:
    """The largest unit that writes ``size`` whole: ``67108864`` -> ``64MiB``."""
    for unit, factor in reversed(SIZE_UNITS.items()):
        if size and size % factor == 0:
            return f"{size // factor}{unit}"
    return f"{size}B"


@dataclass(frozen=True, init=False)
class MaxBytes:
    """Keep the newest entries that fit in ``budget`` bytes of server memory (an int > 0, or ``"64MiB"``).

    Each beat measures the stream with ``MEMORY USAGE key SAMPLES samples`` and
    ``XLEN`` and trims with the ``MAXLEN`` that :meth:`to_maxlen` gives. The
    error bound (docs/policy.md): after a beat, the stream's memory is within
    the budget plus one macro-node (a ``~`` trim keeps whole nodes: at most
    ``stream-node-max-bytes``, or one entry when an entry is larger) plus, when
    ``samples`` > 0, the sampling error: Redis averages the first ``samples``
    nodes (the oldest) and multiplies by the node count, so a stream whose old
    nodes are smaller than its new ones is under-estimated by the difference
    times the node count. ``samples=0`` (the default) reads every node: exact,
    at a cost linear in the node count (about 16,000 nodes for 64MiB).
    """

    budget: int
    samples: int = 0
    approx: bool = True

    def __init__(self, budget: int | str, samples: int = 0, approx: bool = True) -> None:
        if isinstance(budget, str):
            budget = parse_size(budget)
        _fields.whole_number(budget, "MaxBytes budget", Where("", InvalidWindow), minimum=1)
        _fields.whole_number(samples, "MaxBytes samples", Where("", InvalidWindow))
        _require_approx(approx)
        object.__setattr__(self, "budget", budget)
        object.__setattr__(self, "samples", samples)
        object.__setattr__(self, "approx", approx)

    def measure_command(self, key: str) -> tuple[str, ...]:
        """What a beat sends to measure the stream at ``key``: ``MEMORY USAGE key SAMPLES n``."""
        return ("MEMORY", "USAGE", key, "SAMPLES", str(self.samples))

    def to_maxlen(self, usage: int | None, length: int) -> MaxLen:
        """The length window this budget means for a stream of ``length`` entries using ``usage`` bytes.

        ``floor(budget * length / usage)``: the entries that fit at the stream's
        average cost per entry (its fixed overhead spread over them, so the bound
        errs on the safe side). A stream within its budget gets a count at or
        above its length (nothing to trim); a missing or empty one gets its length.
        """
        if usage is None or usage <= 0 or length <= 0:
            return MaxLen(max(length, 0), self.approx)
        return MaxLen(self.budget * length // usage, self.approx)

    def describe(self) -> str:
        """The window for people: ``MAX-BYTES ~ 64MiB``."""
        return f"MAX-BYTES {'~' if self.approx else '='} {format_size(self.budget)}"


#: a limit's name, as the policy file spells its field
LIMIT_NAMES: dict[type, str] = {MaxLen: "maxlen", MaxAge: "max_age", MinId: "min_id", MaxBytes: "max_bytes"}

Limit = MaxLen | MinId | MaxAge | MaxBytes


@dataclass(frozen=True, init=False)
class Limits:
    """Several limits on one stream: an entry stays only while it is inside every one.

    At most one of each kind (``MaxLen``, ``MaxAge``, ``MinId``, ``MaxBytes``),
    at least two (one limit is just that window). A beat sends at most two
    XTRIMs: ``MAXLEN`` with the smallest count of the length limits (a byte
    budget converted first), and ``MINID`` with the latest floor of the time limits.

    Example:
        >>> Limits(MaxLen(10_000), MaxAge("7d"), MaxBytes("64MiB")).describe()
        'MAXLEN ~ 10000 + MAX-AGE ~ 7d + MAX-BYTES ~ 64MiB'
    """

    limits: tuple[Limit, ...]

    def __init__(self, *limits: Limit) -> None:
        seen: set[type] = set()
        for limit in limits:
            if type(limit) not in LIMIT_NAMES:
                raise InvalidWindow(f"Limits takes MaxLen, MaxAge, MinId and MaxBytes (got {limit!r})")
            if type(limit) in seen:
                raise InvalidWindow(f"Limits takes one {type(limit).__name__} at most: the strictest is the one "
                                    f"to declare (got {limits!r})")
            seen.add(type(limit))
        if len(limits) < 2:
            raise InvalidWindow(f"Limits combines two limits or more; give one window as itself (got {limits!r})")
        object.__setattr__(self, "limits", tuple(limits))

    def describe(self) -> str:
        """The limits for people, joined by ``+``."""
        return " + ".join(limit.describe() for limit in self.limits)


def limit_name(limit: object) -> str:
    """How the policy file spells ``limit``'s field: ``maxlen``, ``max_age``, ``min_id``, ``max_bytes``."""
    return LIMIT_NAMES.get(type(limit), type(limit).__name__)
