"""The retention driver: a declared policy re-applied on its own beat.

Bounded memory is a safety property; a consumer being up is a liveness fact.
The driver keeps them apart: it trims the declared streams on a beat of its
own, so a stream nobody reads is bounded all the same. It never writes to
consumer groups; it reads them (``XINFO GROUPS``, and ``XLEN`` before the trim,
in the same round trip) to report what a trim took that a group had not
consumed (:mod:`retain.retention.groups`). For a plain entry it writes only
XTRIM (and reads XLEN after it when asked to measure); an archived entry's
stream is also read, to fold it; a byte budget is measured first
(:mod:`retain.retention.bytes`); a protected entry is trimmed on its own after
reading its groups.

One beat is one :meth:`~RetentionDriver.sweep`:

1. ``now = clock()``; ``calls = decide(policy, now)`` — pure (:mod:`retain.retention.policy`):
   the XTRIMs of the plain entries;
2. every call goes into one pipeline: one round trip on a standalone server
   (a standalone ``redis.Redis`` gets one write of the packed commands on a
   pooled connection; see :func:`~retain.retention.roundtrip.send_direct`). On a
   :class:`redis.cluster.RedisCluster`, redis-py's ``ClusterPipeline`` groups the
   commands by the node owning each key's slot and writes one pipeline per node
   before reading any answer (redis-py 5 to 8, sync and asyncio alike); that is
   the per-node grouping this module relies on rather than re-implements. It also
   follows MOVED/ASK by re-sending those commands one at a time;
3. each answer is read back separately: a WRONGTYPE on one key is that stream's
   failure, logged and counted in the :class:`SweepReport`, and the others proceed.
   When the whole pipeline fails (the connection dropped), every stream of the
   beat reports :class:`~retain.errors.ServerUnavailable`. A sweep never raises
   for a stream's failure; the next beat re-applies the idempotent window;
4. then the archived entries (``StreamPolicy(..., archive=True)``), all at the
   same ``now``: :func:`retain.archive.fold_then_trim_all` folds everything each
   window drops into the driver's archive in **one** Delta commit (one app
   transaction pair per stream: a beat's archive cost does not grow with the
   number of archived streams), then trims each with ``MINID`` just past its W,
   so a trim only ever removes what is archived (INV-FOLD). If a stream's fold
   fails, that stream is not trimmed this beat: its error is the stream's
   failure (in ``failures`` and ``fold_failures``), logged, and the others go
   on; a commit that fails fails the streams it carried. Every step is safe to
   re-run after a crash (INV-IDEMPOTENT): the next beat folds on from W.
   This archive work runs on a thread of its own (:mod:`retain.retention._slot`),
   started before the plain trims are sent, and the beat waits for it at most
   ``archive_deadline`` seconds (10 by default): a frozen object store then
   fails the archived streams for the beat with :class:`~retain.errors.ArchiveTimeout`
   and never the plain ones (INV-ISOLATION). The job the beat gave up on starts
   no further step (no commit, no trim) and, while it still runs, the next beats
   start none of their own: one archive job at a time, never two on one W;
5. every ``maintenance.every`` (5 minutes by default), the beat then maintains
   the archive (:func:`retain.archive.maintain`: compaction, expiry, checkpoint,
   log cleanup, vacuum), so that a fold costs the same in a year as today; its
   report is the beat's ``maintenance``. That beat takes longer.

Runners, opt-in and owner-started (importing retain starts nothing):

- :class:`RetentionDriver` for synchronous code: ``with driver:`` or
  ``start()``/``stop()`` beat on a daemon thread; ``run()`` beats in the caller's
  thread until ``stop()``;
- :class:`AsyncRetentionDriver` for asyncio: ``async with driver:``,
  ``await driver.run()``, ``await start()``/``await stop()``.

Both beat on :mod:`retain.beats`: a beat starts every ``tick`` seconds (right
after the previous one if that ran longer). A sweep that raises never kills the
beat: it is logged and the beat goes on. After a beat that lost the connection
(or raised), the wait doubles from ``tick`` up to ``max_backoff``; the first
healthy beat resets it. Keep the client's own retries low (the daemon uses
one): the driver's backoff is the retry policy.

Example:
    >>> driver = RetentionDriver(redis.Redis(), [(StreamRef("codemojex", "activity"), MaxLen(10_000))])
    >>> with driver:          # beats every second on a thread until the block ends
    ...     serve_the_game()
    >>> archived = RetentionDriver(redis.Redis(), [StreamPolicy(StreamRef("codemojex", "activity"),
    ...                                                         MaxLen(10_000), archive=True)],
    ...                            archive=Archive("file:///var/lib/retain"))
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import redis.exceptions

from retain import _fields
from retain._fields import Where
from retain._redis import REDIS_ERRORS, as_retain_error
from retain.beats import AsyncBeat, Beat, Cadence
from retain.clock import utc_now
from retain.errors import ArchiveTimeout, InvalidPolicy, RetainError, ServerUnavailable
from retain.ids import StreamId
from retain.retention._slot import JobSlot
from retain.retention.bytes import Measured, measure_commands, read_sizes
from retain.retention.groups import GroupTrim, PendingCounter, Seen, groups_or_none, trim_protected
from retain.retention.limits import Size, candidates
from retain.retention.patterns import ascan, expand, scan
from retain.retention.policy import (
    UNLIMITED,
    Policy,
    PolicyEntry,
    StreamPolicy,
    TrimCall,
    checked_archive,
    checked_maintenance,
    decide,
)
from retain.retention.roundtrip import collector_paused, pipeline_options, send_direct, send_pipeline
from retain.windows import Limits, MaxAge, MaxBytes, MaxLen, MinId

if TYPE_CHECKING:
    # Only for annotations: the archive (pyarrow, deltalake) is loaded by a driver that archives.
    from retain.archive import Archive, MaintenanceReport, MaintenanceSettings

__all__ = ["AsyncRetentionDriver", "RetentionDriver", "SweepReport"]

log = logging.getLogger(__name__)

DEFAULT_TICK = 1.0
DEFAULT_MAX_BACKOFF = 30.0
#: seconds a beat waits for its archive work (fold, commit, trims, maintenance) before it reports those
#: streams failed for the beat and goes on; the policy file's ``[archive] deadline``
DEFAULT_ARCHIVE_DEADLINE = 10.0
#: at most this many failing streams are logged one by one per beat; the rest are counted
LOGGED_FAILURES = 10



def _empty() -> Mapping[Any, Any]:
    return MappingProxyType({})


@dataclass(frozen=True)
class SweepReport:
    """What one beat did.

    ``removed_by`` has an entry for every stream whose trim went through (an
    archived stream's after its fold), ``failures`` for every one that did not;
    together they cover every stream of the policy. ``folded_by`` and
    ``watermarks`` cover the archived streams whose fold went through.
    """

    #: the clock instant the beat was decided at
    at: datetime
    #: entries removed in all
    removed: int
    #: streams whose trim went through (a failed one is not counted; an archived
    #: stream counts once its fold went through, even with nothing to trim)
    calls: int
    #: stream key -> entries removed
    removed_by: Mapping[str, int]
    #: stream key -> the error its trim (or an archived stream's fold) met
    failures: Mapping[str, RetainError]
    #: stream key -> length right after its trim; empty unless the driver measures
    lengths: Mapping[str, int] = field(default_factory=_empty)
    #: seconds from sending the beat's first command to its last answer, folds included
    elapsed: float = 0.0
    #: archived stream key -> entries this beat folded into the archive (0 included)
    folded_by: Mapping[str, int] = field(default_factory=_empty)
    #: archived stream key -> the archive's watermark W after this beat (None: nothing archived yet)
    watermarks: Mapping[str, StreamId | None] = field(default_factory=_empty)
    #: archived stream key -> the error its fold met, so it was not trimmed this beat (also in ``failures``)
    fold_failures: Mapping[str, RetainError] = field(default_factory=_empty)
    #: the archive's maintenance, on the beats it was due (compaction, expiry, checkpoint, log cleanup, vacuum)
    maintenance: MaintenanceReport | None = None
    #: (stream key, group) -> what this beat's trim took that the group had not consumed (non-zero ones only;
    #: see :mod:`retain.retention.groups`)
    unconsumed: Mapping[tuple[str, str], GroupTrim] = field(default_factory=_empty)

    @property
    def folded(self) -> int:
        """Entries folded into the archive in all."""
        return sum(self.folded_by.values())

    @property
    def ok(self) -> bool:
        """True when every trim of the beat was applied."""
        return not self.failures

    @property
    def lost_connection(self) -> bool:
        """True when some trim failed because the server could not be reached."""
        return any(isinstance(error, ServerUnavailable) for error in self.failures.values())

    def summary(self) -> str:
        """One line for a log, such as ``beat at <instant>: removed 120 entries in 3 trims, 1 failed, 1.2 ms``.

        With archived streams it also says ``folded 80 entries`` after the trims.
        """
        failed = f", {len(self.failures)} failed" if self.failures else ""
        folded = f", folded {_count(self.folded, 'entry', 'entries')}" if self.folded_by or self.fold_failures else ""
        removed, calls = _count(self.removed, "entry", "entries"), _count(self.calls, "trim", "trims")
        return (f"beat at {self.at.isoformat(timespec='milliseconds')}: removed {removed} in {calls}{folded}{failed}, "
                f"{self.elapsed * 1e3:.1f} ms")


def _count(number: int, one: str, many: str) -> str:
    return f"{number} {one if number == 1 else many}"


@dataclass
class _Folded:
    """The fold part of an archive job, set before its maintenance starts (a beat that gives up on the
    maintenance still reports the fold)."""

    beat: _ArchivedBeat | None = None


@dataclass
class _ArchivedBeat:
    """What a beat's archived streams came to, gathered stream by stream before the report is made."""

    folded_by: dict[str, int] = field(default_factory=dict)
    watermarks: dict[str, StreamId | None] = field(default_factory=dict)
    removed_by: dict[str, int] = field(default_factory=dict)
    lengths: dict[str, int] = field(default_factory=dict)
    failures: dict[str, RetainError] = field(default_factory=dict)
    fold_failures: dict[str, RetainError] = field(default_factory=dict)
    maintenance: MaintenanceReport | None = None


@dataclass
class _Layout:
    """A beat's commands and how their answers are laid out (see ``_Driver._layout``)."""

    commands: list[tuple[str, ...]]
    #: per command: the same every beat (its wire form may be kept)
    fixed: list[bool]
    #: the streams, in the order of their commands
    keys: list[str]
    #: one trim a stream: each stream's answers are ``step`` in a row, in the same places
    uniform: bool
    all_fixed: bool
    step: int


@dataclass
class _PlainBeat:
    """What a beat's plain and protected streams came to, before the report is made."""

    removed_by: dict[str, int] = field(default_factory=dict)
    failures: dict[str, RetainError] = field(default_factory=dict)
    lengths: dict[str, int] = field(default_factory=dict)
    #: stream key -> its groups, read before the trim, and what the trim removed (streams with groups only)
    seen: dict[str, Seen] = field(default_factory=dict)


class _Driver:
    """What both twins share: the policy, the clock, the decision, reading answers, the beat's bookkeeping."""

    def __init__(self, conn: Any, policy: Policy | Iterable[PolicyEntry], *, archive: Archive | None,
                 maintenance: MaintenanceSettings | None, fold_min_entries: int, tick: float,
                 clock: Callable[[], datetime], max_backoff: float, measure_lengths: bool,
                 on_report: Callable[[SweepReport], None] | None, archive_deadline: float,
                 track_groups: bool = True) -> None:
        self.conn = conn
        #: the policy as declared, patterns included
        self.declared = Policy.of(policy)
        #: the policy a beat applies: the declared entries, and what the patterns matched at the last rescan
        self.policy = Policy(self.declared.entries) if self.declared.patterns else self.declared
        self._scanned_at: datetime | None = None
        self.archive = checked_archive(self.declared, archive)
        self.maintenance = checked_maintenance(self.declared, self.archive, maintenance)
        self._maintained_at: datetime | None = None
        options = Where("", InvalidPolicy)
        self.fold_min_entries = _fields.count(fold_min_entries, "fold_min_entries", options, minimum=1)
        self.tick = _fields.seconds(tick, "tick", options)
        self.max_backoff = _fields.seconds(max_backoff, "max_backoff", options)
        self.archive_deadline = _fields.seconds(archive_deadline, "archive_deadline", options, example="10.0",
                                                duration_example="10s")
        self._slot: JobSlot[_ArchivedBeat] = JobSlot("retention-archive")
        self._folded = _Folded()
        if not callable(clock):
            raise InvalidPolicy(f"clock must be a callable returning an aware datetime (got {clock!r})")
        self.clock = clock
        self.measure_lengths = bool(measure_lengths)
        self.track_groups = bool(track_groups)
        self._pending = PendingCounter()
        self._layout_of: Sequence[TrimCall] | None = None
        self._last_layout: _Layout | None = None
        self.on_report = on_report
        self._cadence = Cadence(self.tick, self.max_backoff)  # the runner's; replaced by it

    @property
    def beats(self) -> int:
        """Beats the runners have completed (a raising beat counts); a caller may reset it."""
        return self._cadence.beats

    @beats.setter
    def beats(self, count: int) -> None:
        self._cadence.beats = count

    @property
    def archiving(self) -> bool:
        """True while an archive job still runs: the current beat's, or one a beat gave up on at its deadline."""
        return self._slot.busy

    @property
    def delay(self) -> float:
        """Seconds from one beat's start to the next, as the runner now waits: ``tick``, or longer in trouble."""
        return self._cadence.delay

    def _rescan_due(self, now: datetime) -> bool:
        """True when the patterns' streams are to be found again: at the first beat, then every ``rescan``."""
        patterns = self.declared.patterns
        if not patterns:
            return False
        every = min(pattern.rescan for pattern in patterns)
        return self._scanned_at is None or not timedelta(0) <= now - self._scanned_at < every

    def _rescanned(self, now: datetime, found: Mapping[str, Sequence[str]] | RetainError) -> None:
        """Apply a rescan: the policy of the explicit entries and what each pattern matched (a failed scan keeps
        the last one, and is tried again at the next rescan)."""
        self._scanned_at = now
        if isinstance(found, RetainError):
            log.warning("scanning for the patterns' streams failed; the last streams found are kept: %s", found)
            return
        self.policy = Policy(expand(self.declared.entries, self.declared.patterns, found))

    def _plan(self, now: datetime, measured: Measured | None) -> tuple[TrimCall, ...]:
        return decide(self.policy, now, measured.sizes if measured is not None else None)

    def _layout(self, calls: Sequence[TrimCall]) -> _Layout:
        """A beat's commands, per command whether it is the same every beat, and where each answer goes.

        Per stream, before its first trim when tracking groups: ``XINFO GROUPS``
        and ``XLEN`` (the length before). Then each trim, followed by ``XLEN``
        (the length after) when measuring lengths. The layout of the same
        calls (a policy without age windows or budgets decides the same tuple
        every beat) is made once.
        """
        if calls is self._layout_of and self._last_layout is not None:
            return self._last_layout
        commands: list[tuple[str, ...]] = []
        fixed: list[bool] = []
        keys: list[str] = []
        per_key = 0
        last = None
        for call in calls:
            key = call.key
            if key != last:
                keys.append(key)
                if self.track_groups:
                    commands += [("XINFO", "GROUPS", key), ("XLEN", key)]
                    fixed += [True, True]
            else:
                per_key = 2
            last = key
            commands.append(call.command)
            fixed.append(call.window is call.entry.window)
            if self.measure_lengths:
                commands.append(("XLEN", key))
                fixed.append(True)
        layout = _Layout(commands, fixed, keys, uniform=per_key == 0, all_fixed=all(fixed),
                         step=(2 if self.track_groups else 0) + 1 + (1 if self.measure_lengths else 0))
        self._layout_of, self._last_layout = calls, layout
        return layout

    def _commands(self, calls: Sequence[TrimCall]) -> list[tuple[str, ...]]:
        return self._layout(calls).commands

    def _read(self, calls: Sequence[TrimCall], answers: Sequence[Any] | BaseException) -> _PlainBeat:
        """The plain trims' answers, in one pass: what each stream lost, its failure, its length, its groups.

        With one trim a stream and no error among the answers (the common beat),
        each kind of answer is a slice of the list, read at C speed; otherwise
        stream by stream.
        """
        layout = self._layout(calls)
        if isinstance(answers, BaseException):
            answers = [answers] * len(layout.commands)
        # The types of the answers, a handful, say whether any is an error: at C speed, not one check an answer.
        if layout.uniform and not any(issubclass(kind, BaseException) for kind in set(map(type, answers))):
            return self._read_uniform(layout, answers)
        beat = _PlainBeat()
        groups: dict[str, Any] = {}
        before: dict[str, int] = {}
        index = 0
        for call in calls:
            key = call.key
            if self.track_groups and key not in before and key not in groups:
                groups[key], length = answers[index], answers[index + 1]
                before[key] = -1 if isinstance(length, BaseException) else int(length)
                index += 2
            answer = answers[index]
            index += 1
            if isinstance(answer, BaseException):
                beat.failures[key] = as_retain_error(answer, key)
            elif key not in beat.failures:
                beat.removed_by[key] = beat.removed_by.get(key, 0) + int(answer)
            if self.measure_lengths:
                if not isinstance(answers[index], BaseException):
                    beat.lengths[key] = int(answers[index])
                index += 1
        for key in beat.failures:
            beat.removed_by.pop(key, None)
        self._seen(beat, groups, before)
        return beat

    def _read_uniform(self, layout: _Layout, answers: Sequence[Any]) -> _PlainBeat:
        """One trim a stream, no error: every kind of answer is a slice of ``answers``."""
        step, keys = layout.step, layout.keys
        offset = 2 if self.track_groups else 0
        beat = _PlainBeat(removed_by=dict(zip(keys, answers[offset::step])))
        if self.measure_lengths:
            beat.lengths = dict(zip(keys, answers[offset + 1::step]))
        if self.track_groups:
            found = answers[0::step]
            with_groups = [index for index, answer in enumerate(found) if answer]
            if with_groups:
                lengths = answers[1::step]
                self._seen(beat, {keys[index]: found[index] for index in with_groups},
                           {keys[index]: int(lengths[index]) for index in with_groups})
        return beat

    @staticmethod
    def _seen(beat: _PlainBeat, groups: Mapping[str, Any], before: Mapping[str, int]) -> None:
        """Note, per stream with groups whose trim went through, its groups and what the trim removed."""
        for key, answer in groups.items():
            try:
                found = groups_or_none(answer)
            except BaseException:  # the stream's trim reports its own error (WRONGTYPE, ...)
                continue
            if found and key in beat.removed_by and before[key] >= 0:
                beat.seen[key] = Seen(found, before[key], beat.removed_by[key])

    def _protect(self, conn: Any, now: datetime, measured: Measured | None, beat: _PlainBeat) -> None:
        """Trim each protected stream on its own, after reading its groups (blocking; see :mod:`retain.retention.groups`)."""
        for entry in self.policy.protected:
            key = entry.key
            if measured is not None and key in measured.failures:
                continue  # the measure's error is the stream's failure
            size = measured.sizes.get(key) if measured is not None else None
            try:
                removed, seen = trim_protected(conn, entry, now, size)
            except RetainError as error:
                beat.failures[key] = error
                continue
            beat.removed_by[key] = removed
            if seen.groups:
                beat.seen[key] = seen

    def _archive_beat(self, conn: Any, now: datetime,
                      measured: Measured | None = None) -> Future[_ArchivedBeat] | _ArchivedBeat:
        """Start this beat's archive job on the slot: a Future of what it comes to, or at once what the beat is
        when there is nothing to do or the job of an earlier beat still runs."""
        if not self.policy.archived or self.archive is None:  # checked_archive gave one to a policy that archives
            return _ArchivedBeat()
        if self._slot.busy:
            return self._failed(ArchiveTimeout(
                "not folded this beat: the archive work of an earlier beat, which passed its deadline of "
                f"{self.archive_deadline:g} s, is still running (one at a time, so that two never race on W)"))
        self._folded = _Folded()
        folded = self._folded
        return self._slot.start(lambda cancelled: self._fold_archived(conn, now, cancelled, folded, measured))

    def _gave_up(self) -> _ArchivedBeat:
        """What a beat whose archive job passed the deadline reports: the fold, if it was done (maintenance
        still running), else every archived stream failed with :class:`~retain.errors.ArchiveTimeout`."""
        self._slot.give_up()
        done = self._folded.beat
        if done is not None:
            log.warning("maintenance of the archive passed the beat's deadline of %g s; it goes on in the "
                        "background, and folds wait for it", self.archive_deadline)
            return done
        return self._failed(ArchiveTimeout(
            f"not folded this beat: the archive did not finish within the deadline of {self.archive_deadline:g} s "
            "(the policy file's [archive] deadline); the stream stays untrimmed until a fold goes through"))

    def _failed(self, error: RetainError) -> _ArchivedBeat:
        beat = _ArchivedBeat()
        for entry in self.policy.archived:
            beat.failures[entry.key] = beat.fold_failures[entry.key] = error
        return beat

    def _fold_archived(self, conn: Any, now: datetime, cancelled: Callable[[], bool] = lambda: False,
                       folded: _Folded | None = None, measured: Measured | None = None) -> _ArchivedBeat:
        """Fold every archived stream at ``now`` in one commit, then trim each past its W; then maintain if due.

        Blocking: it runs on the driver's :class:`~retain.retention._slot.JobSlot`, and once
        ``cancelled()`` answers True (the beat passed its deadline) it starts no further step.
        A stream's :class:`~retain.errors.RetainError` is that stream's failure (see
        :func:`retain.archive.fold_then_trim_all`); anything else is a bug, or
        a crash injected by a test, and ends the beat.
        """
        beat = _ArchivedBeat()
        archive = self.archive
        if not self.policy.archived or archive is None:
            return beat
        # Lazy for start-up cost only: pyarrow and deltalake load once a beat has an archived stream.
        from retain.archive.beat import fold_then_trim_all
        from retain.archive.fold import DEFAULT_SEGMENT_ENTRIES

        # A fold refuses min_entries above segment_entries: files grow to hold a larger batch.
        segment_entries = max(DEFAULT_SEGMENT_ENTRIES, self.fold_min_entries)
        targets = []
        for entry in self.policy.archived:
            try:
                window = _one_window(conn, entry, now, measured)
            except RetainError as error:
                beat.failures[entry.key] = beat.fold_failures[entry.key] = error
                continue
            if window is not None:
                targets.append((entry.stream, window))
            elif measured is not None and entry.key in measured.failures:
                beat.failures[entry.key] = beat.fold_failures[entry.key] = measured.failures[entry.key]
            else:  # only a byte budget, and nothing to measure: nothing to fold or trim
                beat.folded_by[entry.key] = beat.removed_by[entry.key] = 0
        try:
            outcomes = fold_then_trim_all(conn, targets,
                                          archive, now, segment_entries=segment_entries,
                                          min_entries=self.fold_min_entries, limit=UNLIMITED, cancelled=cancelled)
        except RetainError as error:  # the archive refused the beat whole (a format-1 archive)
            return self._failed(error)
        for outcome in outcomes:
            key = outcome.stream
            if outcome.error is not None:
                beat.failures[key] = outcome.error
                if not outcome.trimming:
                    beat.fold_failures[key] = outcome.error
                continue
            assert outcome.result is not None
            beat.folded_by[key] = outcome.result.fold.entries
            beat.watermarks[key] = outcome.result.fold.watermark
            beat.removed_by[key] = outcome.result.removed
            if self.measure_lengths:
                try:
                    beat.lengths[key] = int(conn.xlen(key))
                except REDIS_ERRORS:
                    pass  # as in the pipeline: a length that could not be read is left out
        if folded is not None:
            folded.beat = beat
        if not cancelled():
            beat.maintenance = self._maintain_if_due(now)
        return beat

    def _maintain_if_due(self, now: datetime) -> MaintenanceReport | None:
        """Maintain the archive when :attr:`maintenance`'s ``every`` has passed since the last time (or the start)."""
        settings = self.maintenance
        if settings is None or settings.every is None:
            return None
        if self._maintained_at is None:
            self._maintained_at = now  # the first maintenance comes one period after the driver's first beat
            return None
        if now - self._maintained_at < settings.every:
            return None
        self._maintained_at = now
        try:
            return self.maintain(now)
        except RetainError as error:
            log.warning("maintenance of the archive failed; it is tried again in %s: %s", settings.every, error)
            return None

    def maintain(self, now: datetime | None = None) -> MaintenanceReport | None:
        """Maintain the driver's archive now (compaction, expiry, checkpoint, log cleanup, vacuum); None without one.

        Raises:
            ArchiveError: the store or the table failed.
        """
        if self.archive is None or self.maintenance is None:
            return None
        from retain.archive.maintenance import maintain

        report = maintain(self.archive, self.maintenance, now=now if now is not None else self.clock())
        log.info("%s", report.summary())
        return report

    def _report(self, now: datetime, plain: _PlainBeat, elapsed: float, archived: _ArchivedBeat | None = None,
                measured: Measured | None = None,
                unconsumed: Mapping[tuple[str, str], GroupTrim] | None = None) -> SweepReport:
        """The beat's report: the plain and protected streams (``plain``), the archived ones, the measures' failures.

        A stream with two calls (several limits) sums what both removed; either
        failing fails the stream. ``unconsumed``: what the trims took from groups.
        """
        archived = archived if archived is not None else _ArchivedBeat()
        removed_by, failures, lengths = plain.removed_by, plain.failures, plain.lengths
        if measured is not None:
            failures.update(measured.failures)
            for entry in self.policy.measured:  # a budget with nothing to measure (no stream yet) trims nothing
                if not entry.archive and entry.key not in failures:
                    removed_by.setdefault(entry.key, 0)
        for key in failures:
            removed_by.pop(key, None)
        removed_by.update(archived.removed_by)
        failures.update(archived.failures)
        lengths.update(archived.lengths)
        report = SweepReport(at=now, removed=sum(removed_by.values()), calls=len(removed_by),
                             removed_by=MappingProxyType(removed_by), failures=MappingProxyType(failures),
                             lengths=MappingProxyType(lengths), elapsed=elapsed,
                             folded_by=MappingProxyType(archived.folded_by),
                             watermarks=MappingProxyType(archived.watermarks),
                             fold_failures=MappingProxyType(archived.fold_failures),
                             maintenance=archived.maintenance,
                             unconsumed=MappingProxyType(dict(unconsumed or {})))
        _log_failures(report)
        return report

    def _observed(self, report: SweepReport) -> bool:
        """Hand a runner's beat to ``on_report``; True when the beat lost the connection (the runner backs off)."""
        if self.on_report is not None:
            try:
                self.on_report(report)
            except Exception:
                log.exception("on_report raised; the beat goes on")
        return report.lost_connection


def _log_failures(report: SweepReport) -> None:
    for number, (key, error) in enumerate(report.failures.items()):
        if number == LOGGED_FAILURES:
            log.warning("... and %d more streams failed in this beat", len(report.failures) - LOGGED_FAILURES)
            break
        # the fields a JSON log line carries beside its text (retain.logs)
        fields = {"stream": key, "error": type(error).__name__, "kind": "fold" if key in report.fold_failures
                  else "trim"}
        if key in report.fold_failures:
            log.warning("fold of %s failed, so it is not trimmed this beat: %s", key, error, extra=fields)
        else:
            log.warning("trim of %s failed: %s", key, error, extra=fields)


class RetentionDriver(_Driver):
    """Re-applies a policy on its own beat, for a ``redis.Redis`` or ``redis.cluster.RedisCluster``.

    Arguments:
        conn: the client to send trims on (and to fold archived streams with); the caller owns and closes it.
        policy: a :class:`~retain.retention.policy.Policy`, or a list of ``(stream, window)``
            pairs and :class:`~retain.retention.policy.StreamPolicy` entries.
        archive: the :class:`retain.archive.Archive` that entries with ``archive=True``
            fold into before they are trimmed; required when the policy has such an entry.
        maintenance: how the archive is maintained (:class:`retain.archive.MaintenanceSettings`;
            None: its defaults): every ``maintenance.every`` a beat also compacts, expires,
            checkpoints, cleans the log and vacuums (``every=None``: never by itself).
        fold_min_entries: with fewer entries than this waiting to be folded, a beat
            folds none of a stream (and trims only what is archived already), so
            that a beat every second does not leave a trail of tiny files.
        tick: seconds between the starts of two beats.
        clock: returns the current time as an aware datetime; age windows resolve against it.
        max_backoff: the longest wait between beats while the server is unreachable.
        measure_lengths: also read each stream's length after its trim (same round trip).
        on_report: called by the runners with each beat's :class:`SweepReport`.
        track_groups: read each stream's consumer groups and length before its trim (same round
            trip) to report what a trim takes that a group has not consumed (``SweepReport.unconsumed``);
            False saves those two reads per stream.
        archive_deadline: seconds (or a duration such as ``"10s"``) a beat waits for its archive work;
            past it the archived streams fail the beat with :class:`~retain.errors.ArchiveTimeout`
            while the plain ones are trimmed all the same, and the late job starts no further step
            (no commit, no trim). Until it ends, the next beats report those streams as still busy.

    Raises:
        InvalidPolicy: a malformed policy, tick, backoff, clock or fold option; an
            archived entry with no archive given; before any I/O.
    """

    def __init__(self, conn: Any, policy: Policy | Iterable[PolicyEntry], *, archive: Archive | None = None,
                 maintenance: MaintenanceSettings | None = None, fold_min_entries: int = 1,
                 tick: float = DEFAULT_TICK, clock: Callable[[], datetime] = utc_now,
                 max_backoff: float = DEFAULT_MAX_BACKOFF, measure_lengths: bool = False,
                 on_report: Callable[[SweepReport], None] | None = None,
                 archive_deadline: float = DEFAULT_ARCHIVE_DEADLINE, track_groups: bool = True) -> None:
        super().__init__(conn, policy, archive=archive, maintenance=maintenance, fold_min_entries=fold_min_entries,
                         tick=tick, clock=clock, max_backoff=max_backoff, measure_lengths=measure_lengths,
                         on_report=on_report, archive_deadline=archive_deadline, track_groups=track_groups)
        self._runner = self._cadence = Beat(lambda: self._observed(self.sweep()), tick=self.tick,
                                            max_backoff=self.max_backoff, name="retention-driver")
        # The wire form of every command that is the same each beat, packed once for this client.
        self._packed: dict[tuple[str, ...], bytes] = {}
        self._packed_for: Any = None
        self._blob: tuple[_Layout, bytes] | None = None

    def sweep(self) -> SweepReport:
        """Apply one beat at the clock's instant; never raises for a stream's failure.

        The plain entries' trims go in one pipeline; then each archived entry is
        folded and trimmed past W (see the module docstring).

        Raises:
            InvalidWindow: the clock returned a naive datetime (a bug in the caller's clock).
        """
        now = self.clock()
        started = time.monotonic()
        if self._rescan_due(now):
            self._rescanned(now, self._scan())
        measured = read_sizes(self.policy.measured, self._pipeline(measure_commands(self.policy.measured))) \
            if self.policy.measured else None
        calls = self._plan(now, measured)
        job = self._archive_beat(self.conn, now, measured)  # on its own thread, beside the plain trims
        with collector_paused():
            plain = self._read(calls, self._send(calls) if calls else [])
        self._protect(self.conn, now, measured, plain)
        unconsumed = self._unconsumed(plain.seen) if plain.seen else None
        if not isinstance(job, Future):
            archived = job
        else:
            try:
                archived = job.result(timeout=max(0.0, self.archive_deadline - (time.monotonic() - started)))
            except FutureTimeout:
                archived = self._gave_up()
        return self._report(now, plain, time.monotonic() - started, archived, measured, unconsumed)

    def _scan(self) -> dict[str, list[str]] | RetainError:
        """The keys each pattern matches now, or the error scanning met."""
        try:
            return {pattern.pattern: scan(self.conn, pattern) for pattern in self.declared.patterns}
        except RetainError as error:
            return error

    def _unconsumed(self, seen: Mapping[str, Seen]) -> dict[tuple[str, str], GroupTrim]:
        """What the trims took from each group; up to two more round trips when a group with pending entries lost some."""
        first = self._pending.first_step(seen)
        answers = self._pipeline(first) if first else []
        second = self._pending.second_step(seen, answers if isinstance(answers, list) else [])
        more = self._pipeline(second) if second else []
        return self._pending.finish(seen, second, more if isinstance(more, list) else [])

    def _pipeline(self, commands: Sequence[tuple[str, ...]]) -> list[Any] | BaseException:
        """``commands`` in one round trip (packed afresh): each answer, or the error that failed them all."""
        try:
            if isinstance(self.conn, redis.Redis):
                def pack(connection: Any) -> bytes:
                    return b"".join(b"".join(connection.pack_command(*command)) for command in commands)
                return send_direct(self.conn, len(commands), pack)
            return send_pipeline(self.conn, commands)
        except REDIS_ERRORS as exc:
            return exc

    def _send(self, calls: Sequence[TrimCall]) -> list[Any] | BaseException:
        """The plain trims in one pipeline: each command's answer, or the error that failed them all."""
        try:
            if isinstance(self.conn, redis.Redis):
                layout = self._layout(calls)
                return send_direct(self.conn, len(layout.commands), self._packer(layout))
            return send_pipeline(self.conn, self._commands(calls))
        except REDIS_ERRORS as exc:
            return exc

    def _packer(self, layout: _Layout) -> Callable[[Any], bytes]:
        """Packs a beat's commands on a connection, reusing the bytes of those that never change.

        Packing is most of a beat's client time, and a length or fixed-instant
        window sends the same bytes every beat: those are packed once per client,
        and a beat whose every command is fixed (the same layout as the last)
        sends the whole packed beat kept from then. An age window's command
        changes every beat and is packed afresh, never kept.
        """
        if self._packed_for is not self.conn:
            self._packed, self._packed_for, self._blob = {}, self.conn, None
        cache = self._packed
        commands, fixed = layout.commands, layout.fixed

        def pack(connection: Any) -> bytes:
            if self._blob is not None and self._blob[0] is layout:
                return self._blob[1]
            parts = []
            for command, same in zip(commands, fixed):
                packed = cache.get(command)
                if packed is None:
                    packed = b"".join(connection.pack_command(*command))
                    if same:
                        cache[command] = packed
                parts.append(packed)
            whole = b"".join(parts)
            if layout.all_fixed:
                self._blob = (layout, whole)
            return whole

        return pack

    def run(self) -> None:
        """Beat in this thread until :meth:`stop` is called; a beat in progress is finished first."""
        self._runner.run()

    def start(self) -> RetentionDriver:
        """Beat on a daemon thread until :meth:`stop`; calling it while running is refused."""
        self._runner.start()
        return self

    def stop(self, timeout: float | None = None) -> None:
        """Ask the beat to end after the beat in progress; wait for the thread :meth:`start` made."""
        self._runner.stop(timeout)

    @property
    def running(self) -> bool:
        """True while the thread started by :meth:`start` is alive."""
        return self._runner.running

    def __enter__(self) -> RetentionDriver:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class AsyncRetentionDriver(_Driver):
    """The asyncio twin of :class:`RetentionDriver`, for ``redis.asyncio`` clients (standalone or cluster).

    Takes the same arguments, and ``fold_conn``; ``sweep``, ``run``, ``start`` and ``stop`` are coroutines.
    Archived streams are folded by the same blocking code as the sync driver's,
    on a worker thread (``asyncio.to_thread``) so the event loop never waits on
    the archive: that needs ``fold_conn``, a synchronous ``redis.Redis`` (or
    ``RedisCluster``) for the same server, which the caller owns and closes.

    Raises:
        InvalidPolicy: as :class:`RetentionDriver`; also an archived entry with no ``fold_conn``.
    """

    def __init__(self, conn: Any, policy: Policy | Iterable[PolicyEntry], *, archive: Archive | None = None,
                 maintenance: MaintenanceSettings | None = None, fold_conn: Any = None, fold_min_entries: int = 1,
                 tick: float = DEFAULT_TICK, clock: Callable[[], datetime] = utc_now,
                 max_backoff: float = DEFAULT_MAX_BACKOFF, measure_lengths: bool = False,
                 on_report: Callable[[SweepReport], None] | None = None,
                 archive_deadline: float = DEFAULT_ARCHIVE_DEADLINE, track_groups: bool = True) -> None:
        super().__init__(conn, policy, archive=archive, maintenance=maintenance, fold_min_entries=fold_min_entries,
                         tick=tick, clock=clock, max_backoff=max_backoff, measure_lengths=measure_lengths,
                         on_report=on_report, archive_deadline=archive_deadline, track_groups=track_groups)
        needs_thread = any(pattern.archive or pattern.protect for pattern in self.declared.patterns)
        if (self.policy.archived or self.policy.protected or needs_thread) and fold_conn is None:
            raise InvalidPolicy("an AsyncRetentionDriver folds archived streams and trims protected ones on a worker "
                                "thread with a synchronous client: pass fold_conn=redis.Redis(...) (or a "
                                "RedisCluster) for the same server")
        self.fold_conn = fold_conn
        self._runner = self._cadence = AsyncBeat(self._observed_sweep, tick=self.tick,
                                                 max_backoff=self.max_backoff, name="retention-driver")

    async def sweep(self) -> SweepReport:
        """Apply one beat at the clock's instant; never raises for a stream's failure.

        The plain entries' trims go in one pipeline on the event loop; then the
        archived entries are folded and trimmed on a worker thread.
        """
        now = self.clock()
        started = time.monotonic()
        if self._rescan_due(now):
            try:
                found: dict[str, list[str]] | RetainError = {
                    pattern.pattern: await ascan(self.conn, pattern) for pattern in self.declared.patterns}
            except RetainError as error:
                found = error
            self._rescanned(now, found)
        measured = None
        if self.policy.measured:
            measured = read_sizes(self.policy.measured, await self._pipeline(measure_commands(self.policy.measured)))
        calls = self._plan(now, measured)
        job = self._archive_beat(self.fold_conn, now, measured)  # on its own thread, beside the plain trims
        plain = self._read(calls, await self._send(calls) if calls else [])
        if self.policy.protected:
            await asyncio.to_thread(self._protect, self.fold_conn, now, measured, plain)
        unconsumed = await self._unconsumed(plain.seen) if plain.seen else None
        if not isinstance(job, Future):
            archived = job
        else:
            remaining = max(0.0, self.archive_deadline - (time.monotonic() - started))
            try:
                archived = await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(job)), remaining)
            except asyncio.TimeoutError:
                archived = self._gave_up()
        return self._report(now, plain, time.monotonic() - started, archived, measured, unconsumed)

    async def _unconsumed(self, seen: Mapping[str, Seen]) -> dict[tuple[str, str], GroupTrim]:
        """What the trims took from each group (see the sync twin)."""
        first = self._pending.first_step(seen)
        answers = await self._pipeline(first) if first else []
        second = self._pending.second_step(seen, answers if isinstance(answers, list) else [])
        more = await self._pipeline(second) if second else []
        return self._pending.finish(seen, second, more if isinstance(more, list) else [])

    async def _send(self, calls: Sequence[TrimCall]) -> list[Any] | BaseException:
        """The plain trims in one pipeline: each command's answer, or the error that failed them all."""
        return await self._pipeline(self._commands(calls))

    async def _pipeline(self, commands: Sequence[tuple[str, ...]]) -> list[Any] | BaseException:
        """``commands`` in one pipeline: each command's answer, or the error that failed them all."""
        pipe = self.conn.pipeline(transaction=False)
        try:
            for command in commands:
                pipe.execute_command(*command, **pipeline_options(command))
            answers: list[Any] = await pipe.execute(raise_on_error=False)
            return answers
        except REDIS_ERRORS as exc:
            return exc
        finally:
            await pipe.reset()

    async def _observed_sweep(self) -> bool:
        return self._observed(await self.sweep())

    async def run(self) -> None:
        """Beat in this task until :meth:`stop` is called; a beat in progress is finished first."""
        await self._runner.run()

    async def start(self) -> AsyncRetentionDriver:
        """Beat in a background task until :meth:`stop`; calling it while running is refused."""
        await self._runner.start()
        return self

    async def stop(self) -> None:
        """Ask the beat to end after the beat in progress; wait for the task :meth:`start` made."""
        await self._runner.stop()

    @property
    def running(self) -> bool:
        """True while the task started by :meth:`start` is alive."""
        return self._runner.running

    async def __aenter__(self) -> AsyncRetentionDriver:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


def _one_window(conn: Any, entry: StreamPolicy, now: datetime,
                measured: Measured | None) -> MaxLen | MinId | MaxAge | None:
    """The one window an archived entry folds and trims to this beat; None when it cuts nothing.

    A fold takes one window. Of several limits, the strictest is the one whose
    boundary (the highest id it drops, :func:`retain.archive.fold_boundary`) is
    highest: everything up to it lies outside some limit. A byte budget becomes
    the length its measured size means.

    Raises:
        RetainError: reading a boundary failed (WRONGTYPE, a lost connection).
    """
    window = entry.window
    if not isinstance(window, (Limits, MaxBytes)):
        return window
    sizes: dict[str, Size] = measured.sizes if measured is not None else {}
    found = candidates(window, now, sizes.get(entry.key))
    if len(found) <= 1:
        return found[0].window if found else None
    from retain.archive.fold import fold_boundary

    def boundary(window: MaxLen | MinId) -> tuple[bool, StreamId]:
        found_id = fold_boundary(conn, entry.stream, window, now)
        return (found_id is not None, found_id or StreamId(0, 0))

    return max((cut.window for cut in found), key=boundary)
