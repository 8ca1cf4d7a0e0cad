"""Consumer groups and retention: what a trim takes from each group, and ``protect`` with ``max_lag``.

Retention runs on its own beat and never waits for a consumer (INV-DECOUPLED).
But an operator must see when a trim removes what a group has not consumed, so
every beat reads each stream's groups (``XINFO GROUPS``, in the same round trip
as its trim) and reports, per stream and group:

- **undelivered** trimmed: entries after the group's last-delivered id that the
  trim removed. Redis 7's ``lag`` (entries after the last-delivered id) and the
  length read before the trim give it: ``max(0, min(removed, lag - (length - removed)))``;
  exact unless entries were appended between the reads and the trim (they are
  the newest, never trimmed, so the count errs low by at most those). Redis 6.2
  gives no ``lag``: undelivered is not counted there.
- **pending** trimmed: entries delivered but not acknowledged whose stream entry
  is gone. A second round trip, only for the groups with pending entries on a
  stream that lost entries, counts the pending ids between the last id counted
  for that group and the stream's new first id (``XPENDING key group (low (first``).

``protect = "pending"`` or ``"undelivered"`` (opt-in per stream) caps the trim
at the oldest id some group still needs — its oldest pending entry, or the
first entry after its last-delivered id — but never keeps more than
``max_lag`` (a duration or a count, required with ``protect``): a dead group
buys time, never unbounded memory. The protected streams of a beat are read,
decided and trimmed one by one (:func:`protected_floor` is the pure part).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from retain import _fields
from retain._fields import Where
from retain._redis import RedisLike
from retain.errors import InvalidPolicy, InvalidStreamId
from retain.ids import StreamId
from retain.windows import MaxLen, minid_floor

__all__ = ["GroupState", "GroupTrim", "PROTECT_MODES", "Protect", "ProtectedPlan", "parse_groups", "plan_protected",
           "protected_floor", "trim_protected", "undelivered_trimmed"]

PROTECT_MODES = ("pending", "undelivered")


@dataclass(frozen=True, init=False)
class Protect:
    """Cap a stream's trim at what its groups still need, within ``max_lag``.

    ``mode``: ``"pending"`` keeps every entry a group has not acknowledged (its
    pending entries and those not yet delivered); ``"undelivered"`` keeps those
    not yet delivered. ``max_lag``: the most the protection keeps, a duration
    (``"1h"``, a timedelta: entries younger than that) or a count (the newest N).

    Raises:
        InvalidPolicy: an unknown mode, or a missing or malformed ``max_lag``.
    """

    mode: Literal["pending", "undelivered"]
    max_lag: timedelta | int

    def __init__(self, mode: str, max_lag: timedelta | int | str | None) -> None:
        if mode not in PROTECT_MODES:
            raise InvalidPolicy(f"protect must be 'pending' or 'undelivered' (got {mode!r})")
        if max_lag is None:
            raise InvalidPolicy("protect needs max_lag, a duration such as '1h' or a count such as 100000: "
                                "without it a dead group would keep the stream growing for ever")
        where = Where("", InvalidPolicy)
        if isinstance(max_lag, str):
            max_lag = _fields.duration(max_lag, "max_lag", where)
        elif isinstance(max_lag, timedelta):
            if max_lag <= timedelta(0):
                raise InvalidPolicy(f"max_lag must be a positive duration (got {max_lag})")
        else:
            max_lag = _fields.whole_number(max_lag, "max_lag", where, minimum=1)
        object.__setattr__(self, "mode", mode)
        object.__setattr__(self, "max_lag", max_lag)


@dataclass(frozen=True)
class GroupState:
    """One consumer group of a stream, as ``XINFO GROUPS`` (and ``XPENDING``) show it."""

    name: str
    last_delivered: StreamId
    pending: int
    #: entries after ``last_delivered`` (Redis 7); None when the server does not know (Redis 6.2, or after XDEL)
    lag: int | None = None
    #: the oldest pending id (None: nothing pending, or not read)
    oldest_pending: StreamId | None = None


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def parse_groups(answer: Any) -> tuple[GroupState, ...]:
    """The groups in an ``XINFO GROUPS`` answer: a list of maps, or of flat name/value lists (RESP2 unparsed)."""
    groups = []
    for item in answer or ():
        if not isinstance(item, Mapping):
            item = dict(zip(item[::2], item[1::2], strict=False))
        fields = {_text(name): value for name, value in item.items()}
        lag = fields.get("lag")
        try:
            delivered = StreamId.parse(_text(fields.get("last-delivered-id", "0-0")))
        except InvalidStreamId:
            delivered = StreamId(0, 0)
        groups.append(GroupState(_text(fields["name"]), delivered, int(fields.get("pending") or 0),
                                 None if lag is None else int(lag)))
    return tuple(groups)


def undelivered_trimmed(group: GroupState, length_before: int, removed: int) -> int | None:
    """Entries after the group's last-delivered id that a trim of ``removed`` (of ``length_before``) took.

    The undelivered entries are the newest ``lag``; a trim takes the oldest. None without a lag.
    """
    if group.lag is None:
        return None
    return max(0, min(removed, group.lag - (length_before - removed)))


def needed_from(groups: Iterable[GroupState], mode: str) -> StreamId | None:
    """The oldest id some group still needs under ``mode``; None when no group needs anything (or there is none)."""
    needed: list[StreamId] = []
    for group in groups:
        if mode == "pending" and group.pending and group.oldest_pending is not None:
            needed.append(group.oldest_pending)
        if group.lag != 0:  # 0: all delivered; None (unknown) protects from the last-delivered id on
            needed.append(group.last_delivered.successor())
    return min(needed) if needed else None


def lag_floor(protect: Protect, now: datetime, newest: Sequence[StreamId]) -> StreamId | None:
    """The oldest id ``max_lag`` lets the protection keep: ``now - duration``, or the ``count``-th newest id.

    ``newest``: the stream's newest ids, newest first, at least ``count`` of them
    when the stream has that many (for a count). None: max_lag keeps everything.
    """
    if isinstance(protect.max_lag, timedelta):
        return StreamId.parse(minid_floor(now - protect.max_lag))
    if len(newest) < protect.max_lag:
        return None
    return newest[protect.max_lag - 1]


def protected_floor(limit_floor: StreamId | None, needed: StreamId | None, lag: StreamId | None) -> StreamId | None:
    """The MINID floor a protected trim sends: the limits' floor, capped at what a group needs, never below max_lag.

    ``limit_floor``: the first id the limits keep (None: they remove nothing).
    ``needed``: the oldest id a group needs (None: none). ``lag``: the first id
    max_lag keeps (None: all). Everything below the result goes; the result is
    at most ``limit_floor`` (a protected trim never removes more than its limits).
    """
    if limit_floor is None:
        return None
    if needed is None or needed >= limit_floor:
        return limit_floor
    floor = needed if lag is None else max(needed, lag)
    return min(floor, limit_floor)


#: the error XINFO GROUPS answers for a key that does not exist: a missing stream has no groups
NO_SUCH_KEY = "no such key"


def groups_or_none(answer: Any) -> tuple[GroupState, ...]:
    """The groups in an ``XINFO GROUPS`` answer; none for a missing key (the server answers an error)."""
    if isinstance(answer, BaseException):
        if NO_SUCH_KEY in str(answer).lower():
            return ()
        raise answer
    return parse_groups(answer)


@dataclass(frozen=True)
class Seen:
    """What a beat learnt of one stream's groups: read before its trim, and what the trim removed."""

    groups: tuple[GroupState, ...]
    length_before: int
    removed: int


@dataclass(frozen=True)
class GroupTrim:
    """What one beat's trim took from one group: entries it had not been delivered, or had not acknowledged."""

    #: entries after the group's last-delivered id the trim removed (None: unknown, Redis 6.2)
    undelivered: int | None
    #: pending entries (delivered, not acknowledged) whose stream entry the trim removed
    pending: int = 0

    @property
    def total(self) -> int:
        """Unconsumed entries trimmed: undelivered and pending."""
        return (self.undelivered or 0) + self.pending


class PendingCounter:
    """Counts, beat after beat, the pending entries of each group whose stream entry is gone.

    A pending id below the stream's first id is gone. Each beat counts those
    between the first id the last count saw (inclusive) and the stream's first
    id now (exclusive), so an id is counted once. The first beat of a driver
    counts from the start of the list: what earlier trims took shows then.
    """

    def __init__(self) -> None:
        self._low: dict[tuple[str, str], str] = {}

    def first_step(self, seen: Mapping[str, Seen]) -> list[tuple[str, ...]]:
        """The streams that lost entries while a group had pending ones: read each one's first id."""
        return [("XRANGE", key, "-", "+", "COUNT", "1") for key in self._affected(seen)]

    def second_step(self, seen: Mapping[str, Seen], answers: Sequence[Any]) -> list[tuple[str, ...]]:
        """Per affected group, ``XPENDING key group <low> (<first> COUNT <pending>``."""
        commands: list[tuple[str, ...]] = []
        self._firsts: dict[str, str] = {}
        for key, answer in zip(self._affected(seen), answers, strict=False):
            if isinstance(answer, BaseException):
                continue
            first = _text(answer[0][0]) if answer else None
            high = f"({first}" if first is not None else "+"
            self._firsts[key] = first if first is not None else "+"
            for group in seen[key].groups:
                if group.pending:
                    low = self._low.get((key, group.name), "-")
                    commands.append(("XPENDING", key, group.name, low, high, str(group.pending)))
        return commands

    def finish(self, seen: Mapping[str, Seen], commands: Sequence[tuple[str, ...]],
               answers: Sequence[Any]) -> dict[tuple[str, str], GroupTrim]:
        """What each group lost this beat: undelivered from the lag, pending from the second step's answers."""
        pending: dict[tuple[str, str], int] = {}
        for command, answer in zip(commands, answers, strict=True):
            key, name = command[1], command[2]
            if isinstance(answer, BaseException):
                continue
            pending[(key, name)] = len(answer)
            if self._firsts.get(key, "+") != "+":
                self._low[(key, name)] = self._firsts[key]
        found: dict[tuple[str, str], GroupTrim] = {}
        for key, item in seen.items():
            if not item.removed:
                continue
            for group in item.groups:
                trim = GroupTrim(undelivered_trimmed(group, item.length_before, item.removed),
                                 pending.get((key, group.name), 0))
                if trim.total:
                    found[(key, group.name)] = trim
        return found

    @staticmethod
    def _affected(seen: Mapping[str, Seen]) -> list[str]:
        return [key for key, item in seen.items() if item.removed and any(group.pending for group in item.groups)]


def first_kept(conn: RedisLike, key: str, window: Any, length: int) -> StreamId | None:
    """The MINID floor that keeps what ``window`` (MaxLen or MinId) keeps of ``key``; None when it removes nothing.

    For a MaxLen, the id just above its boundary, read in one command that no other client can split
    (:mod:`retain.streams.boundary`); ``length`` is what the caller last saw, and only picks the cheaper form.
    """
    from retain.streams.boundary import first_kept as floor_past
    from retain.streams.boundary import read_boundary
    from retain.windows import MaxLen

    if isinstance(window, MaxLen):
        return floor_past(read_boundary(conn, key, window.count, length))
    return StreamId.parse(window.floor)


@dataclass(frozen=True)
class ProtectedPlan:
    """What a protected stream's trim would be now: the MINID floor (None: remove nothing) and what it read."""

    floor: StreamId | None
    groups: tuple[GroupState, ...]
    length: int
    approx: bool


def plan_protected(conn: RedisLike, entry: Any, now: datetime, size: Any) -> ProtectedPlan:
    """Read ``entry``'s groups and where its limits and max_lag fall: the floor its trim sends, no write.

    ``XINFO GROUPS``, ``XPENDING`` per group with pending entries (``protect =
    "pending"``), ``XLEN``, and the reads that place the limits and max_lag.

    Raises:
        WrongTypeError, ServerError, ServerUnavailable: from Redis.
    """
    from retain._redis import translate_errors
    from retain.retention.cuts import candidates

    key, protect = entry.key, entry.protect
    with translate_errors(key):
        try:
            groups = parse_groups(conn.execute_command("XINFO", "GROUPS", key))
        except Exception as exc:  # a missing key has no groups; anything else goes on as the stream's error
            groups = groups_or_none(exc)
        if protect.mode == "pending":
            groups = tuple(_with_oldest_pending(conn, key, group) for group in groups)
        length = int(conn.xlen(key))
        floors = [first_kept(conn, key, cut.window, length) for cut in candidates(entry.window, now, size)]
        limit_floor = max((floor for floor in floors if floor is not None), default=None)
        lag = (lag_floor(protect, now, ()) if isinstance(protect.max_lag, timedelta)
               else first_kept(conn, key, MaxLen(protect.max_lag), length))
    floor = protected_floor(limit_floor, needed_from(groups, protect.mode), lag)
    approx = any(getattr(limit, "approx", True) for limit in _limits(entry.window))
    return ProtectedPlan(floor, groups, length, approx)


def trim_protected(conn: RedisLike, entry: Any, now: datetime, size: Any) -> tuple[int, Seen]:
    """Read ``entry``'s groups, then trim it to its limits capped by what they need, within max_lag.

    Blocking, one stream: the reads of :func:`plan_protected`, then one
    ``XTRIM MINID``. Returns what it removed and what it saw.

    Raises:
        WrongTypeError, ServerError, ServerUnavailable: from Redis, as the stream's failure.
    """
    from retain._redis import translate_errors

    plan = plan_protected(conn, entry, now, size)
    removed = 0
    if plan.floor is not None:
        command: tuple[str, ...] = ("XTRIM", entry.key, "MINID", "~" if plan.approx else "=", str(plan.floor))
        with translate_errors(entry.key):
            removed = int(conn.execute_command(*(command + (("LIMIT", "0") if plan.approx else ()))))
    return removed, Seen(plan.groups, plan.length, removed)


def _limits(window: Any) -> tuple[Any, ...]:
    from retain.retention.cuts import limits_of

    return limits_of(window)


def _with_oldest_pending(conn: RedisLike, key: str, group: GroupState) -> GroupState:
    if not group.pending:
        return group
    summary = conn.execute_command("XPENDING", key, group.name)
    oldest = summary[1] if isinstance(summary, (list, tuple)) else summary.get("min")
    if oldest is None:
        return group
    return GroupState(group.name, group.last_delivered, group.pending, group.lag, StreamId.parse(_text(oldest)))


def taken_from_groups(conn: RedisLike, key: str, length: int, outside: int,
                      kept_from: StreamId | None) -> dict[str, GroupTrim]:
    """What a trim of the ``outside`` oldest entries (keeping ids from ``kept_from``) would take from each group.

    For a dry run: reads ``XINFO GROUPS``, the stream's first id and, per group
    with pending entries, those between the first id and ``kept_from``.
    """
    try:
        groups = parse_groups(conn.execute_command("XINFO", "GROUPS", key))
    except Exception as exc:
        groups = groups_or_none(exc)
    found: dict[str, GroupTrim] = {}
    first = conn.xrange(key, "-", "+", count=1)
    for group in groups:
        pending = 0
        if group.pending and outside and first and kept_from is not None:
            low = _text(first[0][0])
            pending = len(conn.xpending_range(key, group.name, low, f"({kept_from}", group.pending))
        found[group.name] = GroupTrim(undelivered_trimmed(group, length, outside), pending)
    return found
