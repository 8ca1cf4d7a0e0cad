"""Fold before trim, one stream: copy what a window will drop into the table, then trim just past W.

- :func:`fold` reads the entries of one stream after the watermark W up to a
  boundary, in XRANGE chunks, writes them as data files and advances W with
  a Delta commit per file (an app transaction per stream holds W). A rival
  who committed W first wins the step; the loser re-reads and continues from
  the new W (INV-FENCE).
- :func:`fold_boundary` says the highest id a window will drop, read so that
  no other client's trim can move it into the window (:mod:`retain.streams.boundary`).
- :func:`fold_then_trim` folds one stream up to it, then trims just past W as
  :func:`~retain.archive.plan.plan_fold_trim` plans, so a trim never removes an
  entry that is not already durable in the archive (INV-FOLD).

Many streams at once, in one commit (a driver's beat), is :mod:`retain.archive.beat`.

Every step is safe to crash after (INV-IDEMPOTENT): a file without its commit
is listed by no commit, so no reader sees it (vacuum removes it later); a
commit without its trim leaves the entries live and archived, and the
merge-read keeps only one copy; a trim is idempotent.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import datetime

from retain import _fields
from retain._fields import Where
from retain._redis import RedisLike, translate_errors
from retain.archive._pipeline import Workers, raw_reader, read_file
from retain.archive.gap import LiveInfo, gap, live_info, mark_trimmed, next_ordinal
from retain.archive.maintenance import compact_on_interval
from retain.archive.plan import plan_fold_trim
from retain.archive.table import Advance, Archive
from retain.clock import utc_now
from retain.errors import ArchiveConflict, InvalidInput, InvalidWindow, RetainError
from retain.ids import StreamId, upper_bound
from retain.streams.boundary import read_boundary
from retain.streams.keys import Stream, key_of
from retain.streams.trim import check_limit, trim, xtrim_command
from retain.windows import MaxAge, MaxLen, MinId, MinStreamId, Window, require_aware

__all__ = [
    "DEFAULT_COUNT",
    "DEFAULT_SEGMENT_ENTRIES",
    "FoldProgress",
    "FoldResult",
    "FoldTrimOutcome",
    "FoldTrimResult",
    "check_sizes",
    "fold",
    "fold_boundary",
    "fold_then_trim",
]

DEFAULT_COUNT = 1_000
DEFAULT_SEGMENT_ENTRIES = 100_000


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
    """One stream of :func:`retain.archive.beat.fold_then_trim_all`: what it did, or the error it met and where."""

    stream: str
    result: FoldTrimResult | None = None
    error: RetainError | None = None
    #: True when ``error`` came from the trim, after the fold went through
    trimming: bool = False


Progress = Callable[[FoldProgress], None]


def check_sizes(count: object, segment_entries: object, min_entries: object) -> None:
    """Refuse a fold's read size, file size or minimum that is not a whole number >= 1, or a minimum above
    the file size (:class:`~retain.errors.InvalidInput`)."""
    where = Where("", InvalidInput)
    sizes = [_fields.whole_number(value, name, where, minimum=1) for name, value in
             (("count", count), ("segment_entries", segment_entries), ("min_entries", min_entries))]
    if sizes[2] > sizes[1]:
        raise InvalidInput(f"min_entries must not exceed segment_entries ({min_entries} > {segment_entries})")


def _last_id(conn: RedisLike, key: str) -> StreamId | None:
    with translate_errors(key):
        newest = conn.xrevrange(key, "+", "-", count=1)
    return StreamId.parse(newest[0][0]) if newest else None


def fold(conn: RedisLike, stream: Stream, archive: Archive, upto: str | datetime | StreamId | None = None, *,
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
    check_sizes(count, segment_entries, min_entries)
    archive.check_writable()
    if boundary is None:
        boundary = _last_id(conn, key)
    info = live_info(conn, key, archive.table_id)  # before W: see retain.archive.gap
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

    def __init__(self, conn: RedisLike, stream: Stream, archive: Archive, boundary: StreamId, count: int,
                 segment_entries: int, progress: Progress | None) -> None:
        self.conn, self.stream, self.archive = raw_reader(conn), stream, archive
        self.key = key_of(stream)
        self.boundary, self.count, self.segment_entries = boundary, count, segment_entries
        self.progress = progress
        self.entries = self.files = self.races = self.left = 0
        #: the table's version after each of this call's commits
        self.versions: list[int] = []

    def _tell(self, kind: str, watermark: StreamId | None, pending: int = 0) -> None:
        if self.progress is not None:
            self.progress(FoldProgress(kind, self.entries, pending, watermark))

    def run(self, watermark: StreamId | None, min_entries: int, info: LiveInfo | None = None,
            ordinal: int = 0) -> FoldResult:
        with ExitStack() as stack:
            workers = Workers(stack)
            while watermark is None or watermark < self.boundary:
                low = watermark.successor() if watermark is not None else StreamId(0, 0)

                def read(pending: int, at: StreamId | None = watermark) -> None:
                    self._tell("read", at, pending)

                writer, exhausted = read_file(self.conn, self.key, low, self.boundary, count=self.count,
                                               limit=self.segment_entries, workers=workers,
                                               table_format=self.archive.format, tell=read)
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
                later = live_info(self.conn, self.key)  # an XDEL during the reads leaves the ordinal unknown
                after = next_ordinal(info, later, watermark, ordinal, encoded.count)
                try:
                    self.versions.append(self.archive.commit([Advance(self.key, watermark, encoded.last, (stored,),
                                                                      after)]))
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
        compact_on_interval(self.archive, self.stream, self.versions, now=utc_now())
        return FoldResult(self.key, self.entries, self.files, watermark, self.archive.version, self.races,
                          self.left)


def fold_boundary(conn: RedisLike, stream: Stream, window: Window, now: datetime | None = None) -> StreamId | None:
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


def fold_then_trim(conn: RedisLike, stream: Stream, archive: Archive, window: Window, now: datetime | None = None, *,
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
    check_sizes(count, segment_entries, min_entries)
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
    removed = trim(conn, stream, plan.trim, limit=limit)
    if folded.files and folded.watermark is not None:
        mark_trimmed(conn, archive.table_id, {folded.stream: folded.watermark})  # see retain.archive.gap
    return FoldTrimResult(folded, boundary, plan.trim, removed)
