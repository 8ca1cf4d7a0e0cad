"""Fold before trim: copy what a window will drop into the table, then trim just past W.

- :func:`fold` reads the entries of one stream after the watermark W up to a
  boundary, in XRANGE chunks, writes them as data files and advances W with
  a Delta commit per file (an app transaction per stream holds W). A rival
  who committed W first wins the step; the loser re-reads and continues from
  the new W (INV-FENCE).
- :func:`fold_boundary` says the highest id a window will drop.
- :func:`fold_then_trim` folds one stream up to it, then trims just past W as
  :func:`~retain.archive.plan.plan_fold_trim` plans, so a trim never removes an
  entry that is not already durable in the archive (INV-FOLD).
- :func:`fold_then_trim_all` does that for many streams with **one** commit:
  a driver's beat, whose archive cost then does not grow with the number of
  archived streams times the commit latency.

Every step is safe to crash after (INV-IDEMPOTENT): a file without its commit
is listed by no commit, so no reader sees it (vacuum removes it later); a
commit without its trim leaves the entries live and archived, and the
merge-read keeps only one copy; a trim is idempotent.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from retain import _fields
from retain._fields import Where
from retain._redis import as_retain_error, translate_errors
from retain.archive._pipeline import Chunks, paused_gc, raw_reader
from retain.archive.files import EncodedFile, FileWriter, encode_runs
from retain.archive.gap import LiveInfo, gap, live_info, live_infos, next_ordinal
from retain.archive.plan import plan_fold_trim
from retain.archive.table import Advance, Archive, ArchivedFile
from retain.clock import utc_now
from retain.errors import (ArchiveConflict, ArchiveTimeout, ArchiveUnavailable, InvalidInput, InvalidWindow,
                           RetainError, UnarchivableEntry)
from retain.ids import StreamId, upper_bound
from retain.streams.boundary import BoundaryRead, boundary_read, read_boundary
from retain.streams.keys import Stream, key_of
from retain.streams.trim import check_limit, trim, xtrim_command
from retain.windows import MaxAge, MaxLen, MinId, MinStreamId, Window, require_aware

__all__ = [
    "FoldProgress",
    "FoldResult",
    "FoldTrimOutcome",
    "FoldTrimResult",
    "fold",
    "fold_boundary",
    "fold_then_trim",
    "fold_then_trim_all",
]

DEFAULT_COUNT = 1_000
DEFAULT_SEGMENT_ENTRIES = 100_000
#: commits a beat tries when rivals keep winning, before its streams count as failed this beat
COMMIT_ATTEMPTS = 5
#: data files a beat stores at once (fold_then_trim_all)
PUT_THREADS = 8


@dataclass(frozen=True)
class FoldResult:
    """What one fold did: entries and data files it archived, and W after it."""

    stream: str
    #: entries this call archived (in files its commits listed)
    entries: int
    #: data files this call wrote and committed
    files: int
    #: W after the call: the highest archived id, None if nothing is archived
    watermark: StreamId | None
    #: the table's version after the call (-1: no table yet)
    version: int
    #: times a rival folder committed W first, so this call re-read and went on
    races_lost: int = 0
    #: entries after W up to the boundary that this call read and left live: fewer than min_entries waited
    left: int = 0


@dataclass(frozen=True)
class FoldProgress:
    """One step of a fold, as passed to its ``progress`` callback.

    ``kind`` is ``"read"`` (an XRANGE chunk was read), ``"file"`` (a data file
    is stored, not yet committed), ``"commit"`` (the commit listing it is
    written: W advanced), ``"race"`` (a rival committed W first) or ``"trim"``
    (from :func:`fold_then_trim`, just before its XTRIM).
    """

    kind: str
    #: entries archived so far by this call
    entries: int
    #: entries read into the file being built, not yet archived
    pending: int
    watermark: StreamId | None


@dataclass(frozen=True)
class FoldTrimResult:
    """What :func:`fold_then_trim` did for one stream."""

    fold: FoldResult
    #: the highest id the window drops (None: it drops nothing)
    boundary: StreamId | None
    #: the trim sent (MINID just past min(W, boundary)), or None if nothing could be trimmed
    trim: MinStreamId | None
    #: entries the trim removed
    removed: int


@dataclass(frozen=True)
class FoldTrimOutcome:
    """One stream of :func:`fold_then_trim_all`: what it did, or the error it met and where."""

    stream: str
    result: FoldTrimResult | None = None
    error: RetainError | None = None
    #: True when ``error`` came from the trim, after the fold went through
    trimming: bool = False


Progress = Callable[[FoldProgress], None]
T = TypeVar("T")


def _check_sizes(count: object, segment_entries: object, min_entries: object) -> None:
    where = Where("", InvalidInput)
    sizes = [_fields.whole_number(value, name, where, minimum=1) for name, value in
             (("count", count), ("segment_entries", segment_entries), ("min_entries", min_entries))]
    if sizes[2] > sizes[1]:
        raise InvalidInput(f"min_entries must not exceed segment_entries ({min_entries} > {segment_entries})")


def _last_id(conn: Any, key: str) -> StreamId | None:
    with translate_errors(key):
        newest = conn.xrevrange(key, "+", "-", count=1)
    return StreamId.parse(newest[0][0]) if newest else None


class _Workers:
    """How a fold runs (see :mod:`retain.archive._pipeline`): the GC paused, the next XRANGE asked for ahead,
    row groups encoded on a thread of their own, which starts with its first task (a small fold, one row
    group, starts none)."""

    prefetch = True

    def __init__(self, stack: ExitStack) -> None:
        stack.enter_context(paused_gc())
        self.encoder: Executor | None = stack.enter_context(_Lazy("retain-fold-encode"))
        self.storer = _Storer(stack.enter_context(_Lazy("retain-fold-put", PUT_THREADS)))


class _Storer:
    """A beat's data files stored a few at a time on threads (the store's I/O releases the GIL): a beat of
    1,000 streams writes 1,000 small files, and one after the other that took seconds on a local disk and
    longer on S3. The commit waits for them all (:meth:`wait`). Once a put finds the store unavailable, the
    streams not yet stored fail at once rather than each waiting out the store's retries again."""

    def __init__(self, pool: Executor) -> None:
        self.pool = pool
        self.unavailable: ArchiveUnavailable | None = None

    def put(self, archive: Archive, item: _Pending, encoded: Any) -> None:
        if self.unavailable is not None:
            raise self.unavailable
        future = self.pool.submit(archive.put_file, item.stream, encoded)
        key = item.key

        def watch(done: Future[ArchivedFile]) -> None:
            self._watch(done, key)

        future.add_done_callback(watch)
        item.puts.append(future)

    def _watch(self, done: Future[ArchivedFile], key: str) -> None:
        if done.cancelled():
            return
        error = done.exception()
        if isinstance(error, ArchiveUnavailable) and self.unavailable is None:
            unavailable = ArchiveUnavailable(f"not folded this beat: the archive was unavailable to {key} ({error})")
            unavailable.__cause__ = error
            self.unavailable = unavailable

    def wait(self, pending: Sequence[_Pending]) -> None:
        """Every put of ``pending`` done: its files listed in id order, or its first error the stream's."""
        for item in pending:
            for future in item.puts:
                try:
                    item.files.append(future.result())
                except RetainError as error:
                    item.error = item.error or error
            item.puts = []
            if item.error is None:
                item.files.sort(key=lambda file: file.first)


class _Lazy(Executor):
    """An executor of ``threads`` threads (one by default) that start with its first task."""

    def __init__(self, name: str, threads: int = 1) -> None:
        self.name, self.threads = name, threads
        self._pool: ThreadPoolExecutor | None = None

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix=self.name)
        return self._pool.submit(fn, *args, **kwargs)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait, cancel_futures=cancel_futures)


def _read_file(conn: Any, key: str, low: StreamId, boundary: StreamId, *, count: int, limit: int,
               workers: _Workers, tell: Callable[[int], None] | None = None) -> tuple[FileWriter, bool]:
    """Read up to ``limit`` entries of ``low..boundary`` into a file; also say whether the range is exhausted."""
    writer = FileWriter(key, encoder=workers.encoder)
    chunks = Chunks(conn, key, low, boundary, count=count, limit=limit, prefetch=workers.prefetch)
    try:
        for chunk in chunks:
            writer.add(chunk)
            if tell is not None:
                tell(writer.count)
    except BaseException:
        chunks.close()  # an answer asked for ahead is read off the connection before it goes back to the pool
        writer.abandon()
        raise
    return writer, chunks.exhausted


def fold(conn: Any, stream: Stream, archive: Archive, upto: str | datetime | StreamId | None = None, *,
         count: int = DEFAULT_COUNT, segment_entries: int = DEFAULT_SEGMENT_ENTRIES, min_entries: int = 1,
         progress: Progress | None = None) -> FoldResult:
    """Archive the entries of ``stream`` after W up to ``upto`` (included), and advance W.

    ``upto`` is a stream id, ``"<ms>"``, a timezone-aware datetime (the entries
    minted up to its millisecond) or None: the stream's last id when the call
    starts, so a fold ends however fast producers append. Entries are read
    ``count`` at a time; each data file (and commit) holds at most
    ``segment_entries``. When fewer than ``min_entries`` entries are waiting,
    nothing is written: a fold on every beat then does not leave a trail of
    tiny files.

    Raises:
        InvalidStreamName, InvalidStreamId, InvalidInput: before any I/O.
        WrongTypeError, ServerError, ServerUnavailable: from Redis.
        ArchiveError: from the store or the table; W is then where the last commit put it.
        ArchiveNeedsMigration: a format-1 archive, before anything is read.
        ArchiveGap: the live stream lost entries after W that the archive does not hold
            (:mod:`retain.archive.gap`): nothing is folded over the gap.
        UnarchivableEntry: an entry the table's columns cannot hold.

    Example:
        >>> fold(conn, StreamRef("codemojex", "activity"), Archive("file:///var/lib/retain"))
        FoldResult(stream='emq:{codemojex}:stream:activity', entries=52000, files=1, ...)
    """
    key = key_of(stream)
    boundary = upper_bound(upto) if upto is not None else None
    _check_sizes(count, segment_entries, min_entries)
    archive.check_writable()
    if boundary is None:
        boundary = _last_id(conn, key)
    info = live_info(conn, key)  # before W: see retain.archive.gap
    watermark, ordinal = archive.positions([stream])[key]
    if boundary is None:
        return FoldResult(key, 0, 0, watermark, archive.version)
    missing = gap(key, info, watermark, ordinal)
    if missing is not None:
        raise missing
    folder = _Folder(conn, stream, archive, boundary, count, segment_entries, progress)
    return folder.run(watermark, min_entries, info, ordinal)


class _Folder:
    """One fold call's loop: read a file's worth, store it, commit it (W advances)."""

    def __init__(self, conn: Any, stream: Stream, archive: Archive, boundary: StreamId, count: int,
                 segment_entries: int, progress: Progress | None) -> None:
        self.conn, self.stream, self.archive = raw_reader(conn), stream, archive
        self.key = key_of(stream)
        self.boundary, self.count, self.segment_entries = boundary, count, segment_entries
        self.progress = progress
        self.entries = self.files = self.races = self.left = 0

    def _tell(self, kind: str, watermark: StreamId | None, pending: int = 0) -> None:
        if self.progress is not None:
            self.progress(FoldProgress(kind, self.entries, pending, watermark))

    def run(self, watermark: StreamId | None, min_entries: int, info: LiveInfo | None = None,
            ordinal: int = 0) -> FoldResult:
        with ExitStack() as stack:
            workers = _Workers(stack)
            while watermark is None or watermark < self.boundary:
                low = watermark.successor() if watermark is not None else StreamId(0, 0)

                def read(pending: int, at: StreamId | None = watermark) -> None:
                    self._tell("read", at, pending)

                writer, exhausted = _read_file(self.conn, self.key, low, self.boundary, count=self.count,
                                               limit=self.segment_entries, workers=workers, tell=read)
                if writer.count == 0:
                    break
                if exhausted and not self.files and plan_fold_trim(
                        self.boundary, watermark, writer.count, min_entries=min_entries).fold is None:
                    self.left = writer.count  # too few waiting: leave them for a later, larger file
                    writer.abandon()
                    break
                encoded = writer.finish()
                stored = self.archive.put_file(self.stream, encoded)
                self._tell("file", watermark, writer.count)
                after = next_ordinal(info, watermark, ordinal, encoded.count)
                try:
                    self.archive.commit([Advance(self.key, watermark, encoded.last, (stored,), after)])
                except ArchiveConflict:
                    # The fence: a rival owns this step of W. Take its W and go on from it.
                    self.races += 1
                    watermark, ordinal = self.archive.positions([self.stream])[self.key]
                    self._tell("race", watermark)
                    continue
                watermark, ordinal = encoded.last, after
                self.entries += encoded.count
                self.files += 1
                self._tell("commit", watermark)
                if exhausted:
                    break
        return FoldResult(self.key, self.entries, self.files, watermark, self.archive.version, self.races,
                          self.left)


def fold_boundary(conn: Any, stream: Stream, window: Window, now: datetime | None = None) -> StreamId | None:
    """The highest id ``window`` drops from ``stream`` now, or None if it drops nothing.

    For ``MaxLen(n)``: the (n+1)-th newest id, read in one command that no
    other client's trim, delete or append can split
    (:mod:`retain.streams.boundary`; ``XLEN`` first only picks the cheaper
    form). For ``MinId``, ``MaxAge`` (resolved against ``now``, which it then
    requires) and ``MinStreamId``: the id just below the floor.

    Raises:
        InvalidStreamName, InvalidWindow: before any I/O.
        WrongTypeError, ServerError, ServerUnavailable: from Redis.
    """
    xtrim_command(stream, window, now)  # validates stream, window and now before any I/O
    key = key_of(stream)
    if isinstance(window, MaxAge):
        window = window.resolve(require_aware(now, "now"))
    if isinstance(window, (MinId, MinStreamId)):
        return StreamId.parse(window.floor).predecessor()
    if not isinstance(window, MaxLen):
        raise InvalidWindow(f"window must be MaxLen, MinId, MaxAge or MinStreamId (got {window!r})")
    with translate_errors(key):
        expected = int(conn.xlen(key))
    return read_boundary(conn, key, window.count, expected)


def fold_then_trim(conn: Any, stream: Stream, archive: Archive, window: Window, now: datetime | None = None, *,
                   count: int = DEFAULT_COUNT, segment_entries: int = DEFAULT_SEGMENT_ENTRIES,
                   min_entries: int = 1, progress: Progress | None = None,
                   limit: int | None = None) -> FoldTrimResult:
    """Fold everything ``window`` drops from ``stream``, then trim with MINID just past W.

    The trim is the one :func:`~retain.archive.plan.plan_fold_trim` plans once
    the fold is done: MINID just past min(W, boundary), never past W, so only
    archived entries can go (INV-FOLD); never past the boundary, so nothing
    inside the window goes even when W is ahead of it (INV-WINDOW). If the fold
    raises, nothing is trimmed. ``window.approx`` picks ``~`` or ``=`` for the
    trim, and ``limit`` caps a ``~`` trim as :func:`retain.streams.trim` does
    (0: no cap, as the retention driver sends; None: the server's cap of
    100 x ``stream-node-max-entries``, which leaves the rest of a larger
    backlog, archived, for the next call). ``now`` resolves a MaxAge and
    defaults to the current UTC time.

    Raises:
        the errors of :func:`fold_boundary`, :func:`fold` and :func:`retain.streams.trim`.

    Example:
        >>> fold_then_trim(conn, StreamRef("codemojex", "activity"), archive, MaxLen(10_000))
        FoldTrimResult(fold=FoldResult(...), boundary=StreamId(...), trim=MinStreamId(...), removed=4900)
    """
    _check_sizes(count, segment_entries, min_entries)
    check_limit(limit)
    if now is None and isinstance(window, MaxAge):
        now = utc_now()  # the entry point that owns the clock when the caller passed none
    boundary = fold_boundary(conn, stream, window, now)
    if boundary is None:
        archive.check_writable()
        return FoldTrimResult(FoldResult(key_of(stream), 0, 0, archive.watermark(stream), archive.version),
                              None, None, 0)
    folded = fold(conn, stream, archive, boundary, count=count, segment_entries=segment_entries,
                  min_entries=min_entries, progress=progress)
    # The fold has taken all it will this call (what it left is fewer than min_entries): the plan is now the trim.
    plan = plan_fold_trim(boundary, folded.watermark, folded.left, min_entries=min_entries, approx=window.approx)
    if plan.trim is None:
        return FoldTrimResult(folded, boundary, None, 0)
    if progress is not None:
        progress(FoldProgress("trim", folded.entries, 0, folded.watermark))
    return FoldTrimResult(folded, boundary, plan.trim, trim(conn, stream, plan.trim, limit=limit))


@dataclass
class _Pending:
    """One stream of a beat on its way to the commit."""

    stream: Stream
    key: str
    window: Window
    boundary: StreamId | None = None
    #: W as the beat read it, and as it will be once the commit is in
    before: StreamId | None = None
    after: StreamId | None = None
    files: list[ArchivedFile] = field(default_factory=list)
    entries: int = 0
    left: int = 0
    races: int = 0
    error: RetainError | None = None
    #: the live stream's counters, read before W (retain.archive.gap); W's ordinal as the beat read it
    info: LiveInfo | None = None
    ordinal: int = 0
    #: its data files on their way to the store (see _Storer)
    puts: list[Future[ArchivedFile]] = field(default_factory=list)
    #: every live entry after W up to the boundary, when one pipelined XRANGE read them all (_read_tails)
    tail: list[Any] | None = None
    #: the data file of ``tail``, when it was encoded with the other streams' (_encode_tails)
    encoded: EncodedFile | None = None


def fold_then_trim_all(conn: Any, targets: Sequence[tuple[Stream, Window]], archive: Archive,
                       now: datetime | None = None, *, count: int = DEFAULT_COUNT,
                       segment_entries: int = DEFAULT_SEGMENT_ENTRIES, min_entries: int = 1,
                       limit: int | None = None,
                       cancelled: Callable[[], bool] | None = None) -> tuple[FoldTrimOutcome, ...]:
    """Fold every stream of ``targets`` as :func:`fold_then_trim` would, in **one** commit, then trim each.

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
    stream is read, before the commit and before each trim: once it answers
    True no further step starts, and every stream not yet done fails with
    :class:`~retain.errors.ArchiveTimeout`. A call the driver gave up on
    therefore never trims after its beat (files already stored stay unlisted
    by any commit; vacuum removes them).

    Raises:
        InvalidInput, InvalidWindow: a size, limit or window refused before any I/O.
        ArchiveNeedsMigration: a format-1 archive.
        anything that is not a RetainError (a bug, a crash) ends the call.
    """
    _check_sizes(count, segment_entries, min_entries)
    check_limit(limit)
    if now is None and any(isinstance(window, MaxAge) for _, window in targets):
        now = utc_now()
    for stream, window in targets:
        xtrim_command(stream, window, now)  # every stream and window checked before any I/O
    stop = _Stop(cancelled)
    archive.check_writable()
    pending = [_Pending(stream, key_of(stream), window) for stream, window in targets]
    # One pipeline of XINFO STREAM (the gap check's counters, and each length), one of the XRANGEs that
    # find the MaxLen boundaries: a beat of 1,000 streams makes two round trips here, not 2,000.
    _read_infos(conn, pending)
    reader = raw_reader(conn)
    with ExitStack() as stack:
        workers = _Workers(stack)
        positions = archive.positions(item.stream for item in pending if item.error is None)
        for item in pending:
            if item.error is None:
                item.before, item.ordinal = positions[item.key]
                item.after = item.before
                item.error = gap(item.key, item.info, item.before, item.ordinal)
        # Most streams of a beat hold a few entries after W: one pipeline reads them all, boundaries included.
        _read_tails(reader, pending, now, min(count, segment_entries))
        _boundaries(conn, [item for item in pending if item.tail is None], now)
        _encode_tails(pending, min_entries, workers.encoder)
        unavailable: ArchiveUnavailable | None = None
        for item in pending:
            if item.error is not None:
                continue
            unavailable = unavailable or workers.storer.unavailable
            if unavailable is not None:
                item.error = unavailable
                continue
            if stop.now():
                item.error = stop.error("read")
                continue
            _read_stream(reader, item, archive, count, segment_entries, min_entries, workers)
            if isinstance(item.error, ArchiveUnavailable):
                # The streams after this one would each wait out the store's retries again: they fail at once.
                unavailable = ArchiveUnavailable(f"not folded this beat: the archive was unavailable to {item.key} "
                                                 f"({item.error})")
                unavailable.__cause__ = item.error
        workers.storer.wait(pending)
        if stop.now():
            for item in pending:
                item.error = item.error or stop.error("committed")
        else:
            _commit(reader, pending, archive, count, segment_entries, min_entries, workers)
    return _trim_all(conn, pending, archive, min_entries, limit, stop)


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


def _read_tails(reader: Any, pending: list[_Pending], now: datetime | None, count: int) -> None:
    """For each stream, XRANGE after W (up to ``count`` entries), all in one pipeline; where that is everything
    after W, the boundary comes from it too and the fold needs no other read (``item.tail``).

    A MaxLen(n) window drops all but the n newest entries: if the reply holds every entry after W, the
    boundary is its (n+1)-th newest when it has more than n, else it lies at or below W and is asked for
    the long way. An age or id window's boundary is known without I/O: the reply stops there.
    """
    asked: list[tuple[_Pending, Window]] = []
    commands: list[tuple[str, ...]] = []
    for item in pending:
        if item.error is not None:
            continue
        window: Window = item.window.resolve(require_aware(now, "now")) if isinstance(item.window, MaxAge) \
            else item.window
        high = "+"
        if isinstance(window, (MinId, MinStreamId)):
            floor = StreamId.parse(window.floor)
            if floor == StreamId(0, 0):
                continue  # drops nothing: the long way says so
            high = str(floor.predecessor())
        low = "-" if item.before is None else "(" + str(item.before)
        asked.append((item, window))
        commands.append(("XRANGE", item.key, low, high, "COUNT", str(count)))
    answers = _send_all(reader, commands)
    for (item, asked_window), answer in zip(asked, answers):
        if isinstance(answer, RetainError) or len(answer) >= count:
            continue  # the long way: its error reported there, or more waits than one reply holds
        if isinstance(asked_window, MaxLen):
            if len(answer) <= asked_window.count:
                continue  # the boundary is at or below W
            cut = len(answer) - asked_window.count
            item.boundary, item.tail = StreamId.parse(answer[cut - 1][0]), answer[:cut]
        elif isinstance(asked_window, (MinId, MinStreamId)):
            item.boundary = StreamId.parse(asked_window.floor).predecessor()
            item.tail = answer


def _boundaries(conn: Any, pending: list[_Pending], now: datetime | None) -> None:
    """Each stream's boundary, as :func:`fold_boundary` finds it: the commands a MaxLen window needs in one
    pipeline, each one read alone (the length XINFO gave only picks the cheaper form)."""
    asked: list[tuple[_Pending, BoundaryRead]] = []
    for item in pending:
        if item.error is not None:
            continue
        window = item.window
        if not isinstance(window, MaxLen) or item.info is None:
            # No I/O for an age or id floor; a key XINFO could not read goes the long way (its error is its own).
            try:
                item.boundary = fold_boundary(conn, item.stream, window, now)
            except RetainError as error:
                item.error = error
            continue
        read = boundary_read(item.key, window.count, item.info.length)
        if read is not None:
            asked.append((item, read))
    answers = _send_all(conn, [read.command for _, read in asked])
    for (item, read), answer in zip(asked, answers):
        if isinstance(answer, RetainError):
            item.error = answer
        else:
            item.boundary = read.boundary(answer)


def _read_infos(conn: Any, pending: list[_Pending]) -> None:
    """Each stream's live counters, in one pipeline, before any W is read (see retain.archive.gap)."""
    keys = [item.key for item in pending if item.error is None]
    try:
        infos = live_infos(conn, keys)
    except RetainError as error:
        for item in pending:
            item.error = item.error or error
        return
    for item in pending:
        item.info = infos.get(item.key)


def _read_stream(conn: Any, item: _Pending, archive: Archive, count: int, segment_entries: int, min_entries: int,
                 workers: _Workers) -> None:
    """Store what waits after ``item.before`` up to its boundary as files, as :func:`fold` would (one commit
    for them all to come); a RetainError is the stream's (``item.error``)."""
    item.files, item.entries, item.left, item.after = [], 0, 0, item.before
    tail, item.tail = item.tail, None  # good once: a re-read after a rival's commit goes the long way
    if item.boundary is None or (item.before is not None and item.before >= item.boundary):
        return
    low = item.before.successor() if item.before is not None else StreamId(0, 0)
    try:
        if tail is not None:
            _store_tail(item, tail, archive, min_entries, workers)
            return
        while True:
            writer, exhausted = _read_file(conn, item.key, low, item.boundary, count=count, limit=segment_entries,
                                           workers=workers)
            if not writer.count:
                return
            if exhausted and not item.files and not item.puts and plan_fold_trim(
                    item.boundary, item.before, writer.count, min_entries=min_entries).fold is None:
                item.left = writer.count  # too few waiting: leave them for a later, larger file
                writer.abandon()
                return
            encoded = writer.finish()
            workers.storer.put(archive, item, encoded)
            item.entries += encoded.count
            item.after = encoded.last
            if exhausted:
                return
            low = encoded.last.successor()
    except RetainError as error:
        item.error = error


def _folds(item: _Pending, tail: list[Any], min_entries: int) -> bool:
    """Whether the entries read after W make a file now, or are too few and wait for a later, larger one."""
    assert item.boundary is not None
    return plan_fold_trim(item.boundary, item.before, len(tail), min_entries=min_entries).fold is not None


def _encode_tails(pending: list[_Pending], min_entries: int, encoder: Executor | None) -> None:
    """The file of every stream whose tail folds, encoded together (:func:`encode_runs`: a beat of many
    small folds pays the fixed costs once); when some entry cannot be stored, each stream's file is made
    on its own instead, so that the error is that stream's alone."""
    folding = [item for item in pending if item.error is None and item.tail and _folds(item, item.tail, min_entries)]
    try:
        encoded = encode_runs([(item.key, item.tail) for item in folding], encoder)  # type: ignore[misc]
    except UnarchivableEntry:
        return
    for item, file in zip(folding, encoded):
        item.encoded = file


def _store_tail(item: _Pending, tail: list[Any], archive: Archive, min_entries: int, workers: _Workers) -> None:
    """What :func:`_read_stream` does with entries already read: one file of them, or none if too few."""
    if not tail:
        return
    encoded, item.encoded = item.encoded, None  # encoded with the beat's others: it folds, decided there
    if encoded is None:
        if not _folds(item, tail, min_entries):
            item.left = len(tail)  # too few waiting: leave them for a later, larger file
            return
        writer = FileWriter(item.key)
        writer.add(tail)
        encoded = writer.finish()
    workers.storer.put(archive, item, encoded)
    item.entries += encoded.count
    item.after = encoded.last


def _commit(conn: Any, pending: list[_Pending], archive: Archive, count: int, segment_entries: int,
            min_entries: int, workers: _Workers) -> None:
    """Commit every stream's files and W at once; when a rival wins, re-read the streams it moved and retry."""
    for attempt in range(COMMIT_ATTEMPTS):
        moving = [item for item in pending if item.error is None and item.files]
        if not moving:
            return
        changes = [Advance(item.key, item.before, item.after, tuple(item.files),  # type: ignore[arg-type]
                           next_ordinal(item.info, item.before, item.ordinal, item.entries))
                   for item in moving]
        try:
            archive.commit(changes)
            return
        except ArchiveConflict as conflict:
            if attempt == COMMIT_ATTEMPTS - 1:
                for item in moving:
                    item.error = conflict
                return
            positions = archive.positions(item.stream for item in moving)
            for item in moving:
                if positions[item.key][0] != item.before:
                    # A rival folded this stream: its files stay unlisted; go on from the rival's W.
                    item.races += 1
                    item.before, item.ordinal = positions[item.key]
                    _read_stream(conn, item, archive, count, segment_entries, min_entries, workers)
            workers.storer.wait(moving)
        except RetainError as error:
            for item in moving:
                item.error = error
            return


def _trim_all(conn: Any, pending: list[_Pending], archive: Archive, min_entries: int, limit: int | None,
              stop: _Stop) -> tuple[FoldTrimOutcome, ...]:
    """Each stream's outcome; the trims of those that fold let go, in one pipeline (one answer each)."""
    outcomes: dict[str, FoldTrimOutcome] = {}
    trims: list[tuple[_Pending, FoldResult, MinStreamId]] = []
    stopped = stop.now()
    version = archive.version if any(item.error is None for item in pending) else -1
    for item in pending:
        if item.error is not None:
            outcomes[item.key] = FoldTrimOutcome(item.key, error=item.error)
            continue
        if stopped:
            outcomes[item.key] = FoldTrimOutcome(item.key, error=stop.error("trimmed"), trimming=True)
            continue
        folded = FoldResult(item.key, item.entries if item.files else 0, len(item.files), item.after, version,
                            item.races, item.left)
        if item.boundary is None:
            outcomes[item.key] = FoldTrimOutcome(item.key, FoldTrimResult(folded, None, None, 0))
            continue
        plan = plan_fold_trim(item.boundary, item.after, item.left, min_entries=min_entries,
                              approx=item.window.approx)
        if plan.trim is None:
            outcomes[item.key] = FoldTrimOutcome(item.key, FoldTrimResult(folded, item.boundary, None, 0))
            continue
        trims.append((item, folded, plan.trim))
    answers = _send_all(conn, [xtrim_command(item.stream, window, limit=limit) for item, _, window in trims])
    for (item, folded, window), answer in zip(trims, answers):
        if isinstance(answer, RetainError):
            outcomes[item.key] = FoldTrimOutcome(item.key, error=answer, trimming=True)
        else:
            outcomes[item.key] = FoldTrimOutcome(item.key, FoldTrimResult(folded, item.boundary, window, int(answer)))
    return tuple(outcomes[item.key] for item in pending)


def _send_all(conn: Any, commands: Sequence[tuple[str, ...]]) -> list[Any]:
    """Every command in one pipeline: each one's answer, or the RetainError it met (a lost connection: all)."""
    if not commands:
        return []
    try:
        with translate_errors():
            pipe = conn.pipeline(transaction=False)
            try:
                for command in commands:
                    pipe.execute_command(*command)
                answers: list[Any] = pipe.execute(raise_on_error=False)
            finally:
                pipe.reset()
    except RetainError as error:
        return [error] * len(commands)
    return [as_retain_error(answer, command[1]) if isinstance(answer, BaseException) else answer
            for command, answer in zip(commands, answers)]
