"""A driver's beat in the archive: many streams folded as one-stream folds would be, in one commit, then trimmed.

A beat of 1,000 archived streams makes a handful of round trips and one Delta
commit, not 1,000 of each. :func:`fold_then_trim_all` takes its streams through
five phases together; each phase is a function from the streams as the last
one left them (frozen records) to those it carries on and those that failed
there, by key:

1. :func:`_observe` -- ``XINFO STREAM`` of each and their trim marks, in one
   pipeline (the gap check's counters and the length), then W and its ordinal
   from one snapshot;
   a stream the gap check refuses fails here (:mod:`retain.archive.gap`);
2. :func:`_bound` -- the entries after W, one ``XRANGE`` each in one pipeline;
   where one answer held every entry after W the boundary comes from it, else
   one command each finds it, in one more pipeline
   (:mod:`retain.streams.boundary`: no other client can move it into the window);
3. :func:`_store` -- what waits after W up to the boundary, as data files
   stored on threads (the small ones encoded together); a stream with fewer
   than ``min_entries`` waiting stores none;
4. :func:`_commit` -- the counters read again (an XDEL during the reads
   leaves W's ordinal unknown), then one commit of every stream's files and W,
   and of each claim's fencing token; streams a rival folded first go back through 3 from
   the rival's W; those whose claim is stale fail alone;
5. :func:`_trim` -- each stream trimmed just past its new W, and the new Ws
   left as trim marks, in one pipeline.

Before each step on a stream the beat asks ``cancelled`` (the driver's
deadline) and the stream's :class:`~retain.archive.table.Fence` (its replica's
lease): a beat the driver gave up on, or a stream whose lease was lost, starts
no further step. Every step is safe to crash after (INV-IDEMPOTENT), as for one
stream (:mod:`retain.archive.fold`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor, Future
from contextlib import ExitStack
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from retain._nodes import send_all
from retain._redis import RedisLike, as_retain_error, translate_errors
from retain.archive._pipeline import Workers, raw_reader, read_file
from retain.archive.files import EncodedFile, FileWriter, encode_runs
from retain.archive.fold import (
    DEFAULT_COUNT,
    DEFAULT_SEGMENT_ENTRIES,
    FoldResult,
    FoldTrimOutcome,
    FoldTrimResult,
    check_sizes,
)
from retain.archive.gap import LiveInfo, gap, live_infos, mark_commands, next_ordinal
from retain.archive.plan import plan_fold_trim
from retain.archive.table import Advance, Archive, ArchivedFile, Fence
from retain.clock import utc_now
from retain.errors import (
    ArchiveConflict,
    ArchiveFenced,
    ArchiveTimeout,
    ArchiveUnavailable,
    LeaseLost,
    RetainError,
    UnarchivableEntry,
)
from retain.ids import StreamId
from retain.streams.boundary import BoundaryRead, boundary_read
from retain.streams.keys import Stream, key_of
from retain.streams.trim import check_limit, xtrim_command
from retain.windows import MaxAge, MaxLen, MinId, MinStreamId, Window, require_aware

__all__ = ["COMMIT_ATTEMPTS", "fold_then_trim_all"]

log = logging.getLogger(__name__)

#: commits a beat tries when rivals keep winning, before its streams count as failed this beat
COMMIT_ATTEMPTS = 5

#: what failed in a phase: stream key -> its error
Failed = dict[str, RetainError]


@dataclass(frozen=True)
class _Sizes:
    count: int
    segment_entries: int
    min_entries: int


@dataclass(frozen=True)
class _Target:
    """A stream the caller asked for, and the claim it holds on it (None: no replicas)."""

    stream: Stream
    key: str
    window: Window
    fence: Fence | None


@dataclass(frozen=True)
class _Observed:
    """Phase 1: the live stream's counters (read before W) and W with its ordinal."""

    target: _Target
    info: LiveInfo | None
    before: StreamId | None
    ordinal: int

    @property
    def key(self) -> str:
        return self.target.key


@dataclass(frozen=True)
class _Bounded:
    """Phase 2: the highest id the window drops (None: nothing), and every entry after W up to it when one
    answer held them all."""

    observed: _Observed
    boundary: StreamId | None
    tail: tuple[Any, ...] | None = None

    @property
    def key(self) -> str:
        return self.observed.key


@dataclass(frozen=True)
class _Stored:
    """Phase 3: data files stored after W (``before``) up to the boundary, not yet committed."""

    bounded: _Bounded
    before: StreamId | None
    ordinal: int
    files: tuple[ArchivedFile, ...] = ()
    entries: int = 0
    #: W once the commit is in (``before`` when nothing is stored)
    after: StreamId | None = None
    #: entries waiting after W up to the boundary, left live: fewer than min_entries
    left: int = 0
    #: times a rival folded the stream first, so it was read again from the rival's W
    races: int = 0

    @property
    def key(self) -> str:
        return self.bounded.key

    @property
    def target(self) -> _Target:
        return self.bounded.observed.target

    def advance(self, later: LiveInfo | None) -> Advance:
        """The commit's change for this stream; ``later``: its counters read again after the fold's reads."""
        assert self.after is not None
        return Advance(self.key, self.before, self.after, self.files,
                       next_ordinal(self.bounded.observed.info, later, self.before, self.ordinal, self.entries),
                       self.target.fence)


class _Stop:
    """The caller's ``cancelled`` question, remembered once it answered True."""

    def __init__(self, cancelled: Callable[[], bool] | None) -> None:
        self.cancelled, self.stopped = cancelled, False

    def now(self) -> bool:
        if not self.stopped and self.cancelled is not None:
            self.stopped = bool(self.cancelled())
        return self.stopped

    def error(self, step: str) -> ArchiveTimeout:
        return ArchiveTimeout(f"not {step} this beat: the beat's deadline for the archive passed first")


def _lease_lost(target: _Target, step: str) -> LeaseLost | None:
    """The error of a stream whose claim ran out before ``step``; None while it holds (or has none)."""
    if target.fence is None or target.fence.valid():
        return None
    return LeaseLost(f"not {step} this beat: this replica's lease of {target.key}'s shard "
                     f"({target.fence.app_id}) ran out first; its new holder folds and trims it")


def fold_then_trim_all(conn: RedisLike, targets: Sequence[tuple[Stream, Window]], archive: Archive,
                       now: datetime | None = None, *, count: int = DEFAULT_COUNT,
                       segment_entries: int = DEFAULT_SEGMENT_ENTRIES, min_entries: int = 1,
                       limit: int | None = None, cancelled: Callable[[], bool] | None = None,
                       fences: Mapping[str, Fence] | None = None) -> tuple[FoldTrimOutcome, ...]:
    """Fold every stream of ``targets`` as :func:`~retain.archive.fold.fold_then_trim` would, in **one**
    commit, then trim each.

    Each stream: its boundary, W (all from one snapshot), what waits between
    them read into data files; then one commit advances every stream's W (one
    app transaction pair per stream); then each stream is trimmed just past
    its new W. A stream's error is its own: it is left out of the commit and
    not trimmed (``FoldTrimOutcome.error``); once the store is unavailable the
    streams after it fail at once with that error instead of each waiting out
    the store's retries. A failed commit fails every stream it carried. When a
    rival commits some of the same streams first, those are read again from
    the rival's W and the commit is tried again (INV-FENCE).

    ``cancelled`` (the retention driver's deadline) is asked before each
    stream is read, before the commit and before the trims: once it answers
    True no further step starts, and every stream not yet done fails with
    :class:`~retain.errors.ArchiveTimeout`. A call the driver gave up on
    therefore never trims after its beat (files already stored stay unlisted
    by any commit; vacuum removes them).

    ``fences`` (stream key -> :class:`~retain.archive.table.Fence`): the
    claims of a replica that shares the streams with others. Each commit
    carries their tokens, and the table refuses one below a token it holds
    (:class:`~retain.errors.ArchiveFenced`, that stream's failure). A stream
    whose fence stops being valid fails with :class:`~retain.errors.LeaseLost`
    before its next step.

    Raises:
        InvalidInput, InvalidWindow: a size, limit or window refused before any I/O.
        ArchiveNeedsMigration: a format-1 archive.
        anything that is not a RetainError (a bug, a crash) ends the call.
    """
    check_sizes(count, segment_entries, min_entries)
    check_limit(limit)
    if now is None and any(isinstance(window, MaxAge) for _, window in targets):
        now = utc_now()
    for stream, window in targets:
        xtrim_command(stream, window, now)  # every stream and window checked before any I/O
    stop = _Stop(cancelled)
    archive.check_writable()
    sizes = _Sizes(count, segment_entries, min_entries)
    asked = [_Target(stream, key_of(stream), window, (fences or {}).get(key_of(stream))) for stream, window in targets]
    failed: Failed = {}
    observed = _collect(failed, _observe(conn, archive, asked))
    reader = raw_reader(conn)
    bounded = _collect(failed, _bound(conn, reader, observed, now, min(count, segment_entries)))
    with ExitStack() as stack:
        workers = Workers(stack)
        stored = _collect(failed, _store(reader, bounded, archive, sizes, workers, stop))
        committed = _collect(failed, _commit(reader, stored, archive, sizes, workers, stop))
    done = _collect(failed, _trim(conn, committed, archive, sizes.min_entries, limit, stop))
    outcomes = {outcome.stream: outcome for outcome in done}
    return tuple(outcomes.get(target.key) or _failure(target.key, failed[target.key]) for target in asked)


def _collect(failed: Failed, phase: tuple[list[Any], Failed]) -> list[Any]:
    """A phase's streams that carry on; its failures noted in ``failed``."""
    carried, failures = phase
    failed.update(failures)
    return carried


def _failure(key: str, error: RetainError) -> FoldTrimOutcome:
    return FoldTrimOutcome(key, error=error)


# -- 1. observe ---------------------------------------------------------------------------------------------------


def _observe(conn: RedisLike, archive: Archive, targets: Sequence[_Target]) -> tuple[list[_Observed], Failed]:
    """Each stream's live counters, in one pipeline, then W and its ordinal from one snapshot; the gap check."""
    failed: Failed = {}
    try:
        infos = live_infos(conn, [target.key for target in targets], table_id=archive.table_id, failed=failed)
    except RetainError as error:
        return [], {target.key: error for target in targets}
    positions = archive.positions(target.stream for target in targets if target.key not in failed)
    observed = []
    for target in targets:
        if target.key in failed:
            continue  # its node did not answer
        before, ordinal = positions[target.key]
        missing = gap(target.key, infos.get(target.key), before, ordinal)
        if missing is not None:
            failed[target.key] = missing
        else:
            observed.append(_Observed(target, infos.get(target.key), before, ordinal))
    return observed, failed


# -- 2. bound -----------------------------------------------------------------------------------------------------


def _bound(conn: RedisLike, reader: Any, items: Sequence[_Observed], now: datetime | None,
           count: int) -> tuple[list[_Bounded], Failed]:
    """Each stream's boundary; with every entry after W when one XRANGE (all in one pipeline) held them."""
    tails = _read_tails(reader, items, now, count)
    failed: Failed = {}
    bounded: list[_Bounded] = []
    long_way: list[_Observed] = []
    for item in items:
        found = tails.get(item.key)
        if found is not None:
            bounded.append(found)
        else:
            long_way.append(item)
    more, failures = _boundaries(conn, long_way, now)
    failed.update(failures)
    by_key = {found.key: found for found in bounded + more}
    return [by_key[item.key] for item in items if item.key in by_key], failed


def _window_at(window: Window, now: datetime | None) -> Window:
    return window.resolve(require_aware(now, "now")) if isinstance(window, MaxAge) else window


def _read_tails(reader: Any, items: Sequence[_Observed], now: datetime | None, count: int) -> dict[str, _Bounded]:
    """XRANGE after W (up to ``count`` entries) of each stream, in one pipeline; where that is every entry
    after W, the boundary comes from it too and the fold needs no other read.

    A MaxLen(n) window drops all but the n newest entries: if the reply holds every entry after W, the
    boundary is its (n+1)-th newest when it has more than n, else it lies at or below W and is asked for
    the long way. An age or id window's boundary is known without I/O: the reply stops there. One
    command's answer is one instant of the stream: no other client's trim can move the boundary it gives.
    """
    asked: list[tuple[_Observed, Window]] = []
    commands: list[tuple[str, ...]] = []
    for item in items:
        window = _window_at(item.target.window, now)
        high = "+"
        if isinstance(window, (MinId, MinStreamId)):
            floor = StreamId.parse(window.floor)
            if floor == StreamId(0, 0):
                continue  # drops nothing: the long way says so
            high = str(floor.predecessor())
        low = "-" if item.before is None else "(" + str(item.before)
        asked.append((item, window))
        commands.append(("XRANGE", item.key, low, high, "COUNT", str(count)))
    found: dict[str, _Bounded] = {}
    for (item, window), answer in zip(asked, _send_all(reader, commands), strict=False):
        if isinstance(answer, RetainError) or len(answer) >= count:
            continue  # the long way: its error reported there, or more waits than one reply holds
        if isinstance(window, MaxLen):
            if len(answer) <= window.count:
                continue  # the boundary is at or below W
            cut = len(answer) - window.count
            found[item.key] = _Bounded(item, StreamId.parse(answer[cut - 1][0]), tuple(answer[:cut]))
        elif isinstance(window, (MinId, MinStreamId)):
            found[item.key] = _Bounded(item, StreamId.parse(window.floor).predecessor(), tuple(answer))
    return found


def _boundaries(conn: RedisLike, items: Sequence[_Observed], now: datetime | None) -> tuple[list[_Bounded], Failed]:
    """Each stream's boundary the long way: no I/O for an age or id floor; for a MaxLen, one command each
    (retain.streams.boundary) in one pipeline, the length XINFO gave only picking the cheaper form."""
    bounded: list[_Bounded] = []
    asked: list[tuple[_Observed, BoundaryRead]] = []
    for item in items:
        window = _window_at(item.target.window, now)
        if isinstance(window, (MinId, MinStreamId)):
            bounded.append(_Bounded(item, StreamId.parse(window.floor).predecessor()))
            continue
        assert isinstance(window, MaxLen)
        read = boundary_read(item.key, window.count, item.info.length if item.info is not None else None)
        if read is None:
            bounded.append(_Bounded(item, None))
        else:
            asked.append((item, read))
    failed: Failed = {}
    for (item, read), answer in zip(asked, _send_all(conn, [read.command for _, read in asked]), strict=False):
        try:
            bounded.append(_Bounded(item, read.boundary(answer)))
        except RetainError as error:
            failed[item.key] = error
    return bounded, failed


# -- 3. store -----------------------------------------------------------------------------------------------------


class _Storer:
    """A beat's data files stored a few at a time on threads (the store's I/O releases the GIL): a beat of
    1,000 streams writes 1,000 small files, and one after the other that took seconds on a local disk and
    longer on S3. Once a put finds the store unavailable, the streams not yet stored fail at once rather
    than each waiting out the store's retries again."""

    def __init__(self, archive: Archive, pool: Executor) -> None:
        self.archive, self.pool = archive, pool
        self.unavailable: ArchiveUnavailable | None = None
        self.puts: dict[str, list[Future[ArchivedFile]]] = {}

    def put(self, target: _Target, encoded: EncodedFile) -> None:
        if self.unavailable is not None:
            raise self.unavailable
        future = self.pool.submit(self.archive.put_file, target.stream, encoded)
        key = target.key

        def watch(done: Future[ArchivedFile]) -> None:
            if done.cancelled():
                return
            error = done.exception()
            if isinstance(error, ArchiveUnavailable) and self.unavailable is None:
                self.unavailable = _unavailable_to(key, error)

        future.add_done_callback(watch)
        self.puts.setdefault(key, []).append(future)

    def files(self, key: str) -> tuple[ArchivedFile, ...]:
        """The stored files of ``key`` in id order, once every put is done; the first error of one is raised."""
        futures = self.puts.pop(key, [])
        return tuple(sorted((future.result() for future in futures), key=lambda file: file.first))


def _unavailable_to(key: str, error: BaseException) -> ArchiveUnavailable:
    unavailable = ArchiveUnavailable(f"not folded this beat: the archive was unavailable to {key} ({error})")
    unavailable.__cause__ = error
    return unavailable


def _store(reader: Any, items: Sequence[_Bounded], archive: Archive, sizes: _Sizes, workers: Workers,
           stop: _Stop) -> tuple[list[_Stored], Failed]:
    """What waits after W up to each boundary, stored as files (one commit for them all to come)."""
    storer = _Storer(archive, workers.putter)
    encoded = _encode_tails(items, sizes.min_entries, workers.encoder, archive.format)
    failed: Failed = {}
    planned: list[_Stored] = []
    unavailable: ArchiveUnavailable | None = None
    for item in items:
        unavailable = unavailable or storer.unavailable
        refused = unavailable or (stop.error("read") if stop.now() else None) or _lease_lost(item.observed.target,
                                                                                          "read")
        if refused is not None:
            failed[item.key] = refused
            continue
        try:
            planned.append(_store_one(reader, item, item.observed.before, item.observed.ordinal, archive, sizes,
                                      workers, storer, encoded.get(item.key)))
        except RetainError as error:
            failed[item.key] = error
            if isinstance(error, ArchiveUnavailable):
                # The streams after this one would each wait out the store's retries again: they fail at once.
                unavailable = _unavailable_to(item.key, error)
    return _stored_files(planned, storer, failed)


def _stored_files(planned: Sequence[_Stored], storer: _Storer, failed: Failed) -> tuple[list[_Stored], Failed]:
    """Each stream with its files once every put is done; a put's error is that stream's."""
    stored: list[_Stored] = []
    for item in planned:
        try:
            files = storer.files(item.key)
        except RetainError as error:
            failed[item.key] = error
            continue
        stored.append(replace(item, files=files))
    return stored, failed


def _folds(boundary: StreamId, before: StreamId | None, waiting: int, min_entries: int) -> bool:
    """Whether the entries waiting after W make a file now, or are too few and wait for a later, larger one."""
    return plan_fold_trim(boundary, before, waiting, min_entries=min_entries).fold is not None


def _encode_tails(items: Sequence[_Bounded], min_entries: int, encoder: Executor,
                  table_format: int) -> dict[str, EncodedFile]:
    """The file of every stream whose tail folds, encoded together (:func:`encode_runs`: a beat of many
    small folds pays the fixed costs once); when some entry cannot be stored, none: each stream's file is
    then made on its own, so that the error is that stream's alone."""
    folding = [item for item in items if item.tail and item.boundary is not None
               and _folds(item.boundary, item.observed.before, len(item.tail), min_entries)]
    try:
        files = encode_runs([(item.key, item.tail) for item in folding if item.tail], encoder,
                            table_format=table_format)
    except UnarchivableEntry:
        return {}
    return {item.key: file for item, file in zip(folding, files, strict=False)}


def _store_one(reader: Any, item: _Bounded, before: StreamId | None, ordinal: int, archive: Archive,
               sizes: _Sizes, workers: Workers, storer: _Storer, encoded: EncodedFile | None = None,
               races: int = 0) -> _Stored:
    """Put what waits after ``before`` up to the boundary as files, as a one-stream fold would (its puts stay
    on the storer until :meth:`_Storer.files`)."""
    nothing = _Stored(item, before, ordinal, after=before, races=races)
    boundary = item.boundary
    if boundary is None or (before is not None and before >= boundary):
        return nothing
    target = item.observed.target
    # The tail was read after the W of phase 1: good only from there (a re-read after a rival's commit
    # goes the long way).
    if item.tail is not None and before == item.observed.before:
        if encoded is None:
            if not _folds(boundary, before, len(item.tail), sizes.min_entries):
                return replace(nothing, left=len(item.tail))  # too few waiting: left for a later, larger file
            writer = FileWriter(item.key, table_format=archive.format)
            writer.add(item.tail)
            encoded = writer.finish()
        storer.put(target, encoded)
        return replace(nothing, entries=encoded.count, after=encoded.last)
    low = before.successor() if before is not None else StreamId(0, 0)
    entries, after = 0, before
    while True:
        writer, exhausted = read_file(reader, item.key, low, boundary, count=sizes.count,
                                      limit=sizes.segment_entries, workers=workers, table_format=archive.format)
        if not writer.count:
            break
        if exhausted and not entries and not _folds(boundary, before, writer.count, sizes.min_entries):
            writer.abandon()
            return replace(nothing, left=writer.count)  # too few waiting: left for a later, larger file
        file = writer.finish()
        storer.put(target, file)
        entries, after = entries + file.count, file.last
        if exhausted:
            break
        low = file.last.successor()
    return replace(nothing, entries=entries, after=after)


# -- 4. commit ----------------------------------------------------------------------------------------------------


def _commit(reader: Any, items: Sequence[_Stored], archive: Archive, sizes: _Sizes, workers: Workers,
            stop: _Stop) -> tuple[list[_Stored], Failed]:
    """Commit every stream's files and W at once; when a rival wins, read the streams it moved again from its
    W and retry; a stream whose claim is stale, or ran out, fails alone."""
    failed: Failed = {}
    items = list(items)
    for attempt in range(COMMIT_ATTEMPTS):
        if stop.now():
            return [], failed | {item.key: stop.error("committed") for item in items}
        for item in items:
            lost = _lease_lost(item.target, "committed")
            if lost is not None:
                failed[item.key] = lost
        items = [item for item in items if item.key not in failed]
        moving = [item for item in items if item.files]
        if not moving:
            return items, failed
        try:
            later = live_infos(reader, [item.key for item in moving], failed=failed)
        except RetainError as error:
            later, failed = {}, failed | {item.key: error for item in moving}
        items = [item for item in items if item.key not in failed]
        moving = [item for item in moving if item.key not in failed]
        if not moving:
            return items, failed
        try:
            archive.commit([item.advance(later.get(item.key)) for item in moving])
            return items, failed
        except ArchiveFenced as fenced:
            refused = set(fenced.streams)
            failed.update({item.key: fenced for item in moving if item.key in refused})
            items = [item for item in items if item.key not in refused]
        except ArchiveConflict as conflict:
            if attempt == COMMIT_ATTEMPTS - 1:
                return [item for item in items if not item.files], failed | {item.key: conflict for item in moving}
            items, refolded = _reread_moved(reader, items, moving, archive, sizes, workers)
            failed.update(refolded)
        except RetainError as error:
            return [item for item in items if not item.files], failed | {item.key: error for item in moving}
    return items, failed


def _reread_moved(reader: Any, items: Sequence[_Stored], moving: Sequence[_Stored], archive: Archive,
                  sizes: _Sizes, workers: Workers) -> tuple[list[_Stored], Failed]:
    """The streams a rival folded first, read again from the rival's W (their files stay unlisted); and those
    whose files were written for the table's format before ``retain archive migrate`` changed it."""
    positions = archive.positions(item.target.stream for item in moving)
    storer = _Storer(archive, workers.putter)
    moved: list[_Stored] = []
    failed: Failed = {}
    for item in moving:
        before, ordinal = positions[item.key]
        if before == item.before and all(file.format == archive.format for file in item.files):
            continue
        try:
            moved.append(_store_one(reader, item.bounded, before, ordinal, archive, sizes, workers, storer,
                                    races=item.races + 1))
        except RetainError as error:
            failed[item.key] = error
    refolded, failed = _stored_files(moved, storer, failed)
    by_key = {item.key: item for item in refolded}
    return [by_key.get(item.key, item) for item in items if item.key not in failed], failed


# -- 5. trim ------------------------------------------------------------------------------------------------------


def _trim(conn: RedisLike, items: Sequence[_Stored], archive: Archive, min_entries: int, limit: int | None,
          stop: _Stop) -> tuple[list[FoldTrimOutcome], Failed]:
    """Each stream's outcome; the trims of those that fold let go, in one pipeline (one answer each).

    Everything here comes after the fold went through: an error is the outcome's, marked ``trimming``.
    """
    if stop.now():
        return [FoldTrimOutcome(item.key, error=stop.error("trimmed"), trimming=True) for item in items], {}
    version = archive.version if items else -1
    outcomes: list[FoldTrimOutcome] = []
    trims: list[tuple[_Stored, FoldResult, MinStreamId]] = []
    for item in items:
        boundary = item.bounded.boundary
        folded = FoldResult(item.key, item.entries if item.files else 0, len(item.files), item.after, version,
                            item.races, item.left)
        plan = None if boundary is None else plan_fold_trim(boundary, item.after, item.left,
                                                            min_entries=min_entries,
                                                            approx=item.target.window.approx)
        lost = _lease_lost(item.target, "trimmed")
        if plan is None or plan.trim is None:
            outcomes.append(FoldTrimOutcome(item.key, FoldTrimResult(folded, boundary, None, 0)))
        elif lost is not None:
            outcomes.append(FoldTrimOutcome(item.key, error=lost, trimming=True))
        else:
            trims.append((item, folded, plan.trim))
    commands = [xtrim_command(item.target.stream, window, limit=limit) for item, _, window in trims]
    # W is committed: it becomes the streams' trim mark (retain.archive.gap), in the trims' round trip
    marks = mark_commands(archive.table_id if items else None,
                          {item.key: item.after for item in items if item.files and item.after is not None})
    answers = _send_all(conn, commands + marks)
    for answer in answers[len(commands):]:
        if isinstance(answer, RetainError):
            log.warning("the archive's trim marks could not be written (%s): the gap check goes without", answer)
    for (item, folded, window), answer in zip(trims, answers, strict=False):
        if isinstance(answer, RetainError):
            outcomes.append(FoldTrimOutcome(item.key, error=answer, trimming=True))
        else:
            outcomes.append(FoldTrimOutcome(item.key, FoldTrimResult(folded, item.bounded.boundary, window,
                                                                     int(answer))))
    return outcomes, {}


def _send_all(conn: RedisLike, commands: Sequence[tuple[str, ...]]) -> list[Any]:
    """Every command in one pipeline (on a cluster one per node): each one's answer, or the RetainError it met
    (a lost connection: all of its node's)."""
    if not commands:
        return []
    try:
        with translate_errors():
            answers = send_all(conn, commands)  # on a cluster, a node's outage fails its own streams only
    except RetainError as error:
        return [error] * len(commands)
    return [as_retain_error(answer, command[1]) if isinstance(answer, BaseException) else answer
            for command, answer in zip(commands, answers, strict=False)]
