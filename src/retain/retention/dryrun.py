"""A dry run of one beat: per stream, its length, what the window keeps, what a trim would remove now.

Nothing is written. For an exact (``=``) window the count is exact: the entries
outside the window. An approximate (``~``) window removes whole macro-nodes
only, and no command shows where a stream's nodes begin, so the preview gives
the range the whole nodes must fall in: at most every entry outside the window,
at least that less one node (``stream-node-max-entries``, read from the server).
Probing a copy of the stream would give the exact figure, but a copy doubles
the stream's memory on the server for an instant, which a dry run must not risk.

An archived entry is previewed as its beat would run it, folding and trimming
nothing: the entries after the archive's watermark W up to the highest id the
window drops are what a fold would archive (none if fewer than
``fold_min_entries``), and the trim after it would remove what lies at or below
the new W: ``MINID`` just past it, with the same exact-or-range figure.

Example:
    >>> for row in preview(conn, policy, now=datetime.now(timezone.utc)):
    ...     print(row.describe())
    emq:{codemojex}:stream:activity  MAXLEN ~ 10000  length 25000  keeps 10000  a trim now removes 14901 to 15000 (whole nodes of at most 100 entries)
    emq:{codemojex}:stream:rounds  MAXLEN = 500  archived, W 1789171200000-0  length 900  keeps 500  a fold now archives 380, then a trim removes 400
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from types import MappingProxyType
from typing import TYPE_CHECKING

import redis.exceptions

from retain._redis import RedisLike, translate_errors
from retain.errors import RetainError
from retain.ids import StreamId
from retain.retention.cuts import Size, candidates, limits_of
from retain.retention.groups import GroupTrim, first_kept, plan_protected, taken_from_groups
from retain.retention.patterns import expand, scan
from retain.retention.policy import Policy, PolicyEntry, StreamPolicy, TrimCall, checked_archive, decide
from retain.windows import Limits, MaxAge, MaxBytes, MaxLen, MinId, MinStreamId, require_aware

if TYPE_CHECKING:
    # Only for annotations: the archive (pyarrow, deltalake) is loaded by a preview of an archived entry.
    from retain.archive import Archive, MaintenanceSettings

__all__ = ["StreamPreview", "approx_removes_at_least", "preview"]

#: entries read per XRANGE page when counting what lies before a MINID floor
PAGE = 10_000


@dataclass(frozen=True)
class StreamPreview:
    """What one stream's trim would do now, without doing it."""

    key: str
    #: the window as a beat would send it (an age resolved against ``now``); for several limits or a
    #: byte budget, the strictest one's (the declared window when nothing could be measured)
    window: MaxLen | MinId | MaxAge | MaxBytes | Limits
    length: int = 0
    #: entries outside the window: exactly what ``=`` removes, the most ``~`` can
    outside: int = 0
    #: the least a trim removes now: ``outside`` for ``=``, whole nodes for ``~``
    at_least: int = 0
    #: the reading of ``stream-node-max-entries`` behind ``at_least`` (None: unknown)
    node_entries: int | None = None
    #: the error reading the stream (or its archive) met (WRONGTYPE, ...); the figures are then zero
    error: RetainError | None = None
    #: True for an entry with ``archive=True``: the figures below apply, and the trim is the one after the fold
    archived: bool = False
    #: the archive's watermark W now (archived entries; None: nothing archived yet)
    watermark: StreamId | None = None
    #: entries a fold would archive now (archived entries)
    folds: int = 0
    #: what the archive's maintenance would do to the stream now: entries it would expire, files it would
    #: compact (archived entries, when the preview is given the maintenance settings)
    expires: int = 0
    compacts: int = 0
    #: for several limits or a byte budget: the policy file's name of the limit that cuts most now (None: none cuts)
    cut_by: str | None = None
    #: for several limits or a byte budget: limit name -> entries outside that limit alone
    outside_by: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    #: group -> what the trim now would take that the group has not been delivered or acknowledged
    groups: Mapping[str, GroupTrim] = field(default_factory=lambda: MappingProxyType({}))
    #: True for an entry with ``protect``: the figures are those of the trim capped by its groups
    protected: bool = False
    #: the pattern whose entry this stream got (None: an explicit entry)
    pattern: str | None = None

    @property
    def keeps(self) -> int:
        """Entries a trim now leaves in the stream (for an archived entry, also what is not archived)."""
        return self.length - self.outside

    def log_fields(self) -> dict[str, object]:
        """What a JSON line of the preview carries besides its text (``describe()``): the figures by name."""
        fields: dict[str, object] = {"stream": self.key, "window": self.window.describe()}
        if self.pattern is not None:
            fields["pattern"] = self.pattern
        if self.error is not None:
            return {**fields, "error": type(self.error).__name__, "message": str(self.error)}
        fields.update(length=self.length, keeps=self.keeps, outside=self.outside, at_least=self.at_least)
        if self.archived:
            fields.update(watermark=str(self.watermark) if self.watermark is not None else None, folds=self.folds,
                          expires=self.expires, compacts=self.compacts)
        if self.outside_by:
            fields.update(cut_by=self.cut_by, outside_by=dict(self.outside_by))
        if self.groups:
            fields["groups"] = {name: {"pending": taken.pending, "undelivered": taken.undelivered}
                                for name, taken in self.groups.items()}
        return fields

    def describe(self) -> str:
        """One line for people."""
        head = f"{self.key}  {self.window.describe()}"
        if self.archived:
            head += f"  archived, W {self.watermark or 'none'}"
        if self.pattern is not None:
            head += f"  (pattern {self.pattern})"
        if self.error is not None:
            return f"{head}  error: {self.error}"
        if self.at_least == self.outside:
            removes = f"{self.outside}"
        else:
            removes = f"{self.at_least} to {self.outside} (whole nodes of at most {self.node_entries} entries)"
        what = f"a fold now archives {self.folds}, then a trim removes" if self.archived else "a trim now removes"
        line = f"{head}  length {self.length}  keeps {self.keeps}  {what} {removes}"
        if self.expires or self.compacts:
            line += f"; maintenance would expire {self.expires} archived entries and compact {self.compacts} files"
        if self.outside_by:
            alone = ", ".join(f"{name} {count}" for name, count in self.outside_by.items())
            line += f"; cut by {self.cut_by or 'none'} (outside each limit alone: {alone})"
        if self.protected:
            line += "; protected for its groups within max_lag"
        for name, taken in self.groups.items():
            undelivered = "unknown" if taken.undelivered is None else taken.undelivered
            line += f"; group {name}: {taken.pending} pending, {undelivered} undelivered"
        return line


def approx_removes_at_least(window: MaxLen | MinId | MinStreamId, outside: int, node_entries: int | None) -> int:
    """The least a ``~`` trim removes when ``outside`` entries lie outside ``window``.

    A ``~`` trim removes head nodes while the whole node lies outside the window:
    for MAXLEN it stops at the first node whose removal would leave fewer than
    ``count``, so fewer than one node's entries (at most ``node_entries - 1``) stay
    outside; for MINID it keeps the node holding the floor, whose entries before
    the floor number at most ``node_entries`` (one less unless its last entry was
    deleted). With no entry limit (0) or an unknown one, the least is 0.
    """
    if not window.approx:
        return outside
    if not node_entries or node_entries <= 0:
        return 0
    may_stay = node_entries - 1 if isinstance(window, MaxLen) else node_entries
    return max(0, outside - may_stay)


def preview(conn: RedisLike, policy: Policy | Iterable[PolicyEntry], *, now: datetime, archive: Archive | None = None,
            fold_min_entries: int = 1, maintenance: MaintenanceSettings | None = None) -> tuple[StreamPreview, ...]:
    """Read, never write: what each stream's trim (an archived one's fold, then trim) in one beat at ``now`` would do.

    Reads ``XLEN`` per stream, pages through ``XRANGE`` below a MINID floor to
    count what lies there, and ``CONFIG GET stream-node-max-entries`` once (a
    server that refuses CONFIG gives a lower bound of 0 for ``~``). For an
    archived entry it also reads W from ``archive`` and counts the entries on
    either side of it; ``fold_min_entries`` is the driver's; with
    ``maintenance``, what the archive's maintenance would expire and compact
    in the stream now. A stream whose reads fail carries the error; the others
    are still previewed. Rows come in policy order. A pattern's streams are
    found with the same scan a driver makes (``SCAN … MATCH … TYPE stream``) and
    previewed after the explicit entries, each row naming its pattern.

    Raises:
        InvalidPolicy, InvalidWindow: a malformed policy or a naive ``now``, or an
            archived entry with no ``archive``; before any I/O.
    """
    policy = Policy.of(policy)
    require_aware(now, "now")
    archive = checked_archive(policy, archive)
    origin: dict[str, str] = {}  # a key a pattern supplied -> the pattern
    if policy.patterns:
        found = {pattern.pattern: scan(conn, pattern) for pattern in policy.patterns}
        explicit = {entry.key for entry in policy.entries}
        for pattern in policy.patterns:
            for key in found[pattern.pattern]:
                if key not in explicit:
                    origin.setdefault(key, pattern.pattern)
        policy = Policy(expand(policy.entries, policy.patterns, found))
    rows = _rows(conn, policy, now, archive, fold_min_entries, maintenance)
    return tuple(replace(row, pattern=origin[row.key]) if row.key in origin else row for row in rows)


def _rows(conn: RedisLike, policy: Policy, now: datetime, archive: Archive | None, fold_min_entries: int,
          maintenance: MaintenanceSettings | None) -> tuple[StreamPreview, ...]:
    calls = decide(policy, now)  # checks now; a budget cuts nothing without sizes, so these are the single windows
    archive = checked_archive(policy, archive)
    node_entries = _node_entries(conn) if any(_approx(entry.window) for entry in policy.entries) else None
    rows = {call.key: _one(conn, call, node_entries) for call in calls if _single(call.entry)}
    for entry in policy.entries:
        if entry.protect is not None:
            rows[entry.key] = _one_protected(conn, entry, now, node_entries)
        elif not _single(entry) and not entry.archive:
            rows[entry.key] = _one_limits(conn, entry, now, node_entries)
    for entry in policy.archived:
        assert archive is not None  # checked_archive refuses archived entries without one
        if not _single(entry):
            rows[entry.key] = _one_limits(conn, entry, now, node_entries, archive, fold_min_entries, maintenance)
            continue
        window = entry.window.resolve(now) if isinstance(entry.window, MaxAge) else entry.window
        assert isinstance(window, (MaxLen, MinId))
        rows[entry.key] = _one_archived(conn, entry, window, archive, node_entries, fold_min_entries, now,
                                        maintenance)
    return tuple(rows[entry.key] for entry in policy.entries)


def _single(entry: StreamPolicy) -> bool:
    """True for an entry with one window that needs no measure: MaxLen, MinId or MaxAge."""
    return isinstance(entry.window, (MaxLen, MinId, MaxAge))


def _approx(window: object) -> bool:
    return any(limit.approx for limit in limits_of(window))


def _measured_size(conn: RedisLike, entry: StreamPolicy) -> Size | None:
    """The stream's memory and length, read as a beat reads them, when the entry has a byte budget; else None."""
    if entry.budget is None:
        return None
    usage = conn.execute_command(*entry.budget.measure_command(entry.key))
    return Size(None if usage is None else int(usage), int(conn.xlen(entry.key)))


def _one_limits(conn: RedisLike, entry: StreamPolicy, now: datetime, node_entries: int | None,
                archive: Archive | None = None, fold_min_entries: int = 1,
                maintenance: MaintenanceSettings | None = None) -> StreamPreview:
    """Several limits, or a byte budget: what each limit alone would cut, and which cuts most.

    Every limit cuts from the head, so together they remove what the strictest
    alone removes. An archived entry is then previewed with that limit's window.
    """
    def figures() -> StreamPreview:
        size = _measured_size(conn, entry)
        length = size.length if size is not None else int(conn.xlen(entry.key))
        found = candidates(entry.window, now, size)
        outside_by = {cut.limit: _outside(conn, entry.key, cut.window, length) for cut in found}
        strictest = max(found, key=lambda cut: outside_by[cut.limit], default=None)
        cut_by = strictest.limit if strictest is not None and outside_by[strictest.limit] else None
        if strictest is None:
            return StreamPreview(entry.key, entry.window, length, 0, 0, node_entries, archived=entry.archive,
                                 outside_by=MappingProxyType(outside_by))
        if archive is not None:
            row = _one_archived(conn, entry, strictest.window, archive, node_entries, fold_min_entries, now,
                                maintenance)
            return replace(row, cut_by=cut_by, outside_by=MappingProxyType(outside_by))
        outside = outside_by[strictest.limit]
        at_least = max(approx_removes_at_least(cut.window, outside_by[cut.limit], node_entries) for cut in found)
        groups = taken_from_groups(conn, entry.key, length, outside,
                                   first_kept(conn, entry.key, strictest.window, length))
        return StreamPreview(entry.key, strictest.window, length, outside, at_least, node_entries, cut_by=cut_by,
                             outside_by=MappingProxyType(outside_by), groups=MappingProxyType(groups))

    return _read(entry.key, figures,
                 lambda error: StreamPreview(entry.key, entry.window, error=error, archived=entry.archive))


def _one_protected(conn: RedisLike, entry: StreamPolicy, now: datetime, node_entries: int | None) -> StreamPreview:
    """A protected stream: the trim its limits, its groups and max_lag come to now."""
    def figures() -> StreamPreview:
        size = _measured_size(conn, entry)
        plan = plan_protected(conn, entry, now, size)
        outside = 0 if plan.floor is None else _count(conn, entry.key, "-", f"({plan.floor}")
        at_least = outside if not plan.approx else (
            max(0, outside - node_entries) if node_entries else 0)
        groups = taken_from_groups(conn, entry.key, plan.length, outside, plan.floor)
        return StreamPreview(entry.key, entry.window, plan.length, outside, at_least, node_entries,
                             groups=MappingProxyType(groups), protected=True)

    return _read(entry.key, figures, lambda error: StreamPreview(entry.key, entry.window, error=error, protected=True))


def _outside(conn: RedisLike, key: str, window: MaxLen | MinId, length: int) -> int:
    """Entries of a stream of ``length`` outside ``window``."""
    if isinstance(window, MaxLen):
        return max(0, length - window.count)
    return _count(conn, key, "-", f"({window.floor}")


def _one(conn: RedisLike, call: TrimCall, node_entries: int | None) -> StreamPreview:
    def figures() -> StreamPreview:
        length = int(conn.xlen(call.key))
        if isinstance(call.window, MaxLen):
            outside = max(0, length - call.window.count)
        else:
            outside = _count(conn, call.key, "-", f"({call.window.floor}")
        at_least = approx_removes_at_least(call.window, outside, node_entries)
        groups = taken_from_groups(conn, call.key, length, outside, first_kept(conn, call.key, call.window, length))
        return StreamPreview(call.key, call.window, length, outside, at_least, node_entries,
                             groups=MappingProxyType(groups))

    return _read(call.key, figures, lambda error: StreamPreview(call.key, call.window, error=error))


def _one_archived(conn: RedisLike, entry: StreamPolicy, window: MaxLen | MinId, archive: Archive,
                  node_entries: int | None, fold_min_entries: int, now: datetime, maintenance: MaintenanceSettings | None) -> StreamPreview:
    """What ``fold_then_trim`` would do now: the plan it makes, from the same reads, with the entries counted."""
    # Lazy for start-up cost only: pyarrow and deltalake load when a policy has an archived entry.
    from retain.archive import fold_boundary, plan_fold_trim, preview_maintenance

    def figures() -> StreamPreview:
        watermark = archive.watermark(entry.stream)
        length = int(conn.xlen(entry.key))
        boundary = fold_boundary(conn, entry.stream, window)
        waiting = 0
        if boundary is not None and (watermark is None or watermark < boundary):
            after = str(watermark.successor()) if watermark is not None else "-"
            waiting = _count(conn, entry.key, after, str(boundary))
        plan = plan_fold_trim(boundary, watermark, waiting, min_entries=fold_min_entries, approx=window.approx)
        # The trim removes every entry below its floor: those the fold takes (just counted), and below them
        # the archived ones still live.
        if plan.trim is None:
            outside = 0
        elif plan.fold is not None:
            outside = plan.folds + (_count(conn, entry.key, "-", str(watermark)) if watermark is not None else 0)
        else:
            outside = _count(conn, entry.key, "-", f"({plan.trim.floor}")
        at_least = 0 if plan.trim is None else approx_removes_at_least(plan.trim, outside, node_entries)
        upkeep = preview_maintenance(archive, entry.key, maintenance, now=now) if maintenance is not None else None
        return StreamPreview(entry.key, window, length, outside, at_least, node_entries, archived=True,
                             watermark=watermark, folds=plan.folds, expires=upkeep.expired if upkeep else 0,
                             compacts=upkeep.compacted if upkeep else 0)

    return _read(entry.key, figures, lambda error: StreamPreview(entry.key, window, error=error, archived=True))


def _read(key: str, figures: Callable[[], StreamPreview],
          failed: Callable[[RetainError], StreamPreview]) -> StreamPreview:
    """``figures()``, or ``failed(error)`` when its reads fail: one stream's error never stops the preview."""
    try:
        with translate_errors(key):
            return figures()
    except RetainError as error:
        return failed(error)


def _count(conn: RedisLike, key: str, low: str, high: str) -> int:
    """How many entries have an id from ``low`` to ``high`` (XRANGE bounds), read a page at a time."""
    counted = 0
    while True:
        page = conn.xrange(key, min=low, max=high, count=PAGE)
        counted += len(page)
        if len(page) < PAGE:
            return counted
        last = page[-1][0]
        low = "(" + (last.decode() if isinstance(last, bytes) else last)


def _node_entries(conn: RedisLike) -> int | None:
    try:
        answer = conn.config_get("stream-node-max-entries")
    except redis.exceptions.RedisError:
        return None  # managed services often refuse CONFIG
    value = next(iter(answer.values()), None) if isinstance(answer, dict) else None
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None
