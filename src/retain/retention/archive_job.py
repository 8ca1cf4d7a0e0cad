"""A beat's archive work: its archived streams folded in one commit, then trimmed past W, on a thread of its own.

Every archived stream the beat holds, at the beat's ``now``:
:func:`retain.archive.fold_then_trim_all` folds everything each window drops
into the archive in **one** Delta commit, then trims each with ``MINID`` just
past its W, so a trim only ever removes what is archived (INV-FOLD). If a
stream's fold fails, that stream is not trimmed this beat: its error is the
stream's failure (in ``failures`` and ``fold_failures``), and the others go
on; a commit that fails fails the streams it carried. Every step is safe to
re-run after a crash (INV-IDEMPOTENT): the next beat folds on from W.

The job runs on a :class:`~retain.retention._slot.JobSlot`, started before
the plain trims are sent. A beat on a runner waits for it no longer than its
next tick: a job still running then carries on beside the next beats (which
start no job of their own: one at a time, never two on one W), and the beat
that sees it end reports what it did. The plain streams are trimmed every
tick whatever the archive does (INV-ISOLATION). A job still running
``deadline`` seconds (10 by default) after it started is given up: its
streams fail with :class:`~retain.errors.ArchiveTimeout`, and it starts no
further step (no commit, no trim). A :meth:`sweep` called by hand waits for
its job up to the deadline.

With replicas each stream carries its shard's claim
(:class:`~retain.archive.Fence`): the job asks it before every step, and its
fencing token goes into the commit.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from retain._redis import REDIS_ERRORS, RedisLike
from retain.errors import ArchiveTimeout, RetainError
from retain.ids import StreamId
from retain.retention._slot import JobSlot
from retain.retention.bytes import Measured
from retain.retention.cuts import Size, candidates
from retain.retention.policy import UNLIMITED, StreamPolicy
from retain.windows import Limits, MaxAge, MaxBytes, MaxLen, MinId

if TYPE_CHECKING:
    # Only for annotations: the archive (pyarrow, deltalake) is loaded by a driver that archives.
    from retain.archive import Archive, Fence

__all__ = ["ArchiveJob", "ArchivedBeat", "one_window"]


@dataclass
class ArchivedBeat:
    """What a beat's archived streams came to, gathered stream by stream before the report is made."""

    folded_by: dict[str, int] = field(default_factory=dict)
    watermarks: dict[str, StreamId | None] = field(default_factory=dict)
    removed_by: dict[str, int] = field(default_factory=dict)
    lengths: dict[str, int] = field(default_factory=dict)
    failures: dict[str, RetainError] = field(default_factory=dict)
    fold_failures: dict[str, RetainError] = field(default_factory=dict)
    races_lost: dict[str, int] = field(default_factory=dict)
    #: streams whose archive job goes on past this beat: a later beat reports what it did
    archiving: set[str] = field(default_factory=set)

    @classmethod
    def all_failed(cls, entries: Sequence[StreamPolicy], error: RetainError) -> ArchivedBeat:
        """Every stream of ``entries`` failed with ``error`` before its fold."""
        beat = cls()
        for entry in entries:
            beat.failures[entry.key] = beat.fold_failures[entry.key] = error
        return beat

    def then(self, later: ArchivedBeat) -> ArchivedBeat:
        """This job's outcome followed by a later one's, in one report: what both folded and removed added up,
        the later W, length and failure of a stream where it has one."""
        merged = ArchivedBeat()
        for name in ("folded_by", "removed_by", "races_lost"):
            total: dict[str, int] = dict(getattr(self, name))
            for key, count in getattr(later, name).items():
                total[key] = total.get(key, 0) + count
            setattr(merged, name, total)
        merged.watermarks = self.watermarks | later.watermarks
        merged.lengths = self.lengths | later.lengths
        merged.failures = {key: error for key, error in self.failures.items() if key not in later.folded_by}
        merged.failures |= later.failures
        merged.fold_failures = {key: error for key, error in self.fold_failures.items() if key in merged.failures}
        merged.fold_failures |= later.fold_failures
        for key in merged.failures:
            merged.removed_by.pop(key, None)
        merged.archiving = set(later.archiving)
        return merged


class ArchiveJob:
    """The archive work of a driver's beats, one job at a time (see the module docstring).

    ``deadline``: seconds a beat waits for its job. ``fold_min_entries``: fewer entries than this waiting
    are left live for a later, larger file. ``measure_lengths``: read each stream's length after its trim.
    """

    def __init__(self, archive: Archive, *, deadline: float, fold_min_entries: int, measure_lengths: bool) -> None:
        self.archive, self.deadline = archive, deadline
        self.fold_min_entries, self.measure_lengths = fold_min_entries, measure_lengths
        self._slot: JobSlot[ArchivedBeat] = JobSlot("retention-archive")
        #: the job in flight: its future, when it started (monotonic), its streams; None between jobs
        self._job: tuple[Future[ArchivedBeat], float, tuple[StreamPolicy, ...]] | None = None
        #: called, from the job's thread, when a job that outlived its beat ends (a runner's poke)
        self.on_late_end: Callable[[], None] = lambda: None
        self._late = False

    @property
    def busy(self) -> bool:
        """True while a job still runs: the current beat's, a late one, or one a beat gave up on."""
        return self._slot.busy

    def start(self, conn: RedisLike, now: datetime, entries: Sequence[StreamPolicy], measured: Measured | None = None,
              fences: Mapping[str, Fence] | None = None) -> Future[ArchivedBeat] | ArchivedBeat:
        """Start the job of a beat on the slot: a Future of what it comes to, or at once what the beat is when
        there is nothing to do, or the job of an earlier beat still runs (its streams are still being
        archived; past its deadline, it is given up and they fail)."""
        if not entries:
            return ArchivedBeat()
        if self._job is not None:
            future, started, running = self._job
            if not future.done():
                if time.monotonic() - started >= self.deadline:
                    return self.give_up()
                return ArchivedBeat(archiving={entry.key for entry in running})
        if self._slot.busy:  # a job given up on, still stuck: it starts no step, but no other may start yet
            return ArchivedBeat.all_failed(entries, ArchiveTimeout(
                "not folded this beat: the archive work of an earlier beat, which passed its deadline of "
                f"{self.deadline:g} s, is still running (one at a time, so that two never race on W)"))
        future = self._slot.start(lambda cancelled: self.run(conn, now, entries, cancelled, measured, fences))
        self._job, self._late = (future, time.monotonic(), tuple(entries)), False
        future.add_done_callback(self._ended)
        return future

    def _ended(self, future: Future[ArchivedBeat]) -> None:
        if self._late:
            self.on_late_end()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the job in flight, and for one given up on that still runs, ``timeout`` seconds at most
        (the deadline when None): a driver that stops lets its archive work end rather than leave it in the
        middle of a store's call as the process exits. True when none runs any more."""
        return self._slot.wait(self.deadline if timeout is None else timeout)

    def finished(self) -> ArchivedBeat | None:
        """What the job in flight did, once it has ended (then it is no longer in flight); None while it runs
        or when there is none. A job that raised (a bug, an injected crash) raises here."""
        if self._job is None or not self._job[0].done():
            return None
        future = self._job[0]
        self._job = None
        return future.result()

    def overdue(self) -> bool:
        """True when the job in flight has run longer than the deadline."""
        return self._job is not None and time.monotonic() - self._job[1] >= self.deadline

    def remaining(self) -> float:
        """Seconds until the job in flight passes the deadline (0 with none)."""
        return 0.0 if self._job is None else max(0.0, self.deadline - (time.monotonic() - self._job[1]))

    def give_up(self) -> ArchivedBeat:
        """What a beat reports of a job that passed the deadline: each of its streams failed with
        :class:`~retain.errors.ArchiveTimeout`; the job is told to start no further step."""
        running = self._job[2] if self._job is not None else ()
        self._slot.give_up()
        self._job = None
        return ArchivedBeat.all_failed(running, ArchiveTimeout(
            f"not folded this beat: the archive did not finish within the deadline of {self.deadline:g} s "
            "(the policy file's [archive] deadline); the stream stays untrimmed until a fold goes through"))

    def still_running(self) -> ArchivedBeat:
        """What a beat reports of a job that goes on past it: its streams are being archived. When it ends,
        :attr:`on_late_end` is called (the next beat need not wait for its tick to start the next job)."""
        self._late = True
        if self._job is not None and self._job[0].done():
            self.on_late_end()  # it ended as the beat gave up waiting
        running = self._job[2] if self._job is not None else ()
        return ArchivedBeat(archiving={entry.key for entry in running})

    def run(self, conn: RedisLike, now: datetime, entries: Sequence[StreamPolicy],
            cancelled: Callable[[], bool] = lambda: False, measured: Measured | None = None,
            fences: Mapping[str, Fence] | None = None) -> ArchivedBeat:
        """Fold every stream of ``entries`` at ``now`` in one commit, then trim each past its W (blocking).

        Once ``cancelled()`` answers True (the beat passed its deadline) it starts no further step. A
        stream's :class:`~retain.errors.RetainError` is that stream's failure (see
        :func:`retain.archive.fold_then_trim_all`); anything else is a bug, or a crash injected by a test,
        and ends the beat.
        """
        # Lazy for start-up cost only: pyarrow and deltalake load once a beat has an archived stream.
        from retain.archive import fold_then_trim_all
        from retain.archive.fold import DEFAULT_SEGMENT_ENTRIES

        beat = ArchivedBeat()
        # A fold refuses min_entries above segment_entries: files grow to hold a larger batch.
        segment_entries = max(DEFAULT_SEGMENT_ENTRIES, self.fold_min_entries)
        targets = []
        for entry in entries:
            try:
                window = one_window(conn, entry, now, measured)
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
            outcomes = fold_then_trim_all(conn, targets, self.archive, now, segment_entries=segment_entries,
                                          min_entries=self.fold_min_entries, limit=UNLIMITED, cancelled=cancelled,
                                          fences=fences)
        except RetainError as error:  # the archive refused the beat whole (a format-1 archive)
            return ArchivedBeat.all_failed(entries, error)
        for outcome in outcomes:
            key = outcome.stream
            if outcome.error is not None:
                beat.failures[key] = outcome.error
                if not outcome.trimming:
                    beat.fold_failures[key] = outcome.error
                continue
            assert outcome.result is not None
            fold = outcome.result.fold
            beat.folded_by[key] = fold.entries
            beat.watermarks[key] = fold.watermark
            beat.removed_by[key] = outcome.result.removed
            if fold.races_lost:
                beat.races_lost[key] = fold.races_lost
            if self.measure_lengths:
                try:
                    beat.lengths[key] = int(conn.xlen(key))
                except REDIS_ERRORS:
                    pass  # as in the pipeline: a length that could not be read is left out
        return beat


def one_window(conn: RedisLike, entry: StreamPolicy, now: datetime,
               measured: Measured | None) -> MaxLen | MinId | MaxAge | None:
    """The one window an archived entry folds and trims to this beat; None when it cuts nothing.

    A fold takes one window. Of several limits, the strictest is the one whose
    boundary (the highest id it drops, :func:`retain.archive.fold_boundary`) is
    highest: everything up to it lies outside some limit. A byte budget becomes
    the length its measured size means. Each boundary is read in one command
    (:mod:`retain.streams.boundary`), so none lies inside its limit's window.

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
    from retain.archive import fold_boundary

    def boundary(window: MaxLen | MinId) -> tuple[bool, StreamId]:
        found_id = fold_boundary(conn, entry.stream, window, now)
        return (found_id is not None, found_id or StreamId(0, 0))

    return max((cut.window for cut in found), key=boundary)
