"""Fold before trim: copy what a window will drop into the archive, then trim just past W.

- :func:`fold` reads the entries after the watermark W up to a boundary, in
  XRANGE chunks, writes them as segments and advances W by writing the next
  manifest, create-only. A rival who wrote that manifest first wins the step;
  the loser re-reads and continues from the new W (INV-FENCE).
- :func:`fold_boundary` says the highest id a window will drop.
- :func:`fold_then_trim` folds up to it, then trims just past W as
  :func:`~retain.archive.plan.plan_fold_trim` plans, so a trim never removes an
  entry that is not already durable in the archive (INV-FOLD).

Every step is safe to crash after (INV-IDEMPOTENT): a segment without its
manifest is invisible and is checked, not overwritten, when the re-run writes
it again; a manifest without its trim leaves the entries live and archived, and
the merge-read keeps only one copy; a trim is idempotent.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import redis.exceptions

from retain import _fields
from retain._fields import Where
from retain._redis import translate_errors
from retain.clock import utc_now
from retain.ids import StreamId, upper_bound
from retain.archive.manifest import Manifest
from retain.archive.plan import plan_fold_trim
from retain.archive.segments import SegmentWriter
from retain.archive.store import Archive
from retain.errors import ArchiveObjectExists, InvalidInput, InvalidWindow
from retain.streams.keys import Stream, key_of
from retain.streams.trim import check_limit, trim, xtrim_command
from retain.windows import MaxAge, MaxLen, MinId, MinStreamId, Window, require_aware

__all__ = [
    "FoldProgress",
    "FoldResult",
    "FoldTrimResult",
    "fold",
    "fold_boundary",
    "fold_then_trim",
]

DEFAULT_COUNT = 1_000
DEFAULT_SEGMENT_ENTRIES = 100_000


@dataclass(frozen=True)
class FoldResult:
    """What one :func:`fold` call did: entries and segments it archived, and W after it."""

    stream: str
    #: entries this call archived (listed in manifests it wrote)
    entries: int
    #: segments this call wrote and listed
    segments: int
    #: W after the call: the highest archived id, None if nothing is archived
    watermark: StreamId | None
    #: the number of the current manifest
    manifest: int
    #: times a rival folder wrote the next manifest first, so this call re-read and went on
    races_lost: int = 0
    #: entries after W up to the boundary that this call read and left live: fewer than min_entries waited
    left: int = 0


@dataclass(frozen=True)
class FoldProgress:
    """One step of a fold, as passed to its ``progress`` callback.

    ``kind`` is ``"read"`` (an XRANGE chunk was read), ``"segment"`` (a segment
    is stored, not yet listed), ``"manifest"`` (the next manifest is written: W
    advanced), ``"race"`` (a rival wrote it first) or ``"trim"`` (from
    :func:`fold_then_trim`, just before its XTRIM).
    """

    kind: str
    #: entries archived so far by this call
    entries: int
    #: entries read into the segment being built, not yet archived
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


Progress = Callable[[FoldProgress], None]


def _as_sent(response: Any, **options: Any) -> Any:
    return response


def _reader(conn: Any) -> Any:
    """The client a fold reads XRANGE chunks with.

    redis-py turns each entry's flat ``[name, value, ...]`` list into a dict,
    which a fold would only flatten again: a quarter of its time. A private
    client on the same connection pool, with XRANGE replies left as the server
    sent them, skips both. Other clients (a cluster) are used as they are.
    """
    if not isinstance(conn, redis.Redis):
        return conn
    reader = redis.Redis(connection_pool=conn.connection_pool)
    reader.set_response_callback("XRANGE", _as_sent)
    return reader


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


def fold(conn: Any, stream: Stream, archive: Archive, upto: str | datetime | StreamId | None = None, *,
         count: int = DEFAULT_COUNT, segment_entries: int = DEFAULT_SEGMENT_ENTRIES, min_entries: int = 1,
         progress: Progress | None = None) -> FoldResult:
    """Archive the entries of ``stream`` after W up to ``upto`` (included), and advance W.

    ``upto`` is a stream id, ``"<ms>"``, a timezone-aware datetime (the entries
    minted up to its millisecond) or None: the stream's last id when the call
    starts, so a fold ends however fast producers append. Entries are read
    ``count`` at a time; each segment holds at most ``segment_entries``. When
    fewer than ``min_entries`` entries are waiting, nothing is written: a fold
    on every beat then does not leave a trail of tiny segments.

    Raises:
        InvalidStreamName, InvalidStreamId, InvalidInput: before any I/O.
        WrongTypeError, ServerError, ServerUnavailable: from Redis.
        ArchiveError: from the store; W is then where the last written manifest put it.
        UnarchivableEntry: an entry the segment format cannot hold.

    Example:
        >>> fold(conn, StreamRef("codemojex", "activity"), Archive("file:///var/lib/retain"))
        FoldResult(stream='emq:{codemojex}:stream:activity', entries=52000, segments=1, ...)
    """
    key = key_of(stream)
    boundary = upper_bound(upto) if upto is not None else None
    _check_sizes(count, segment_entries, min_entries)
    if boundary is None:
        boundary = _last_id(conn, key)
    state = archive.manifest(stream)
    if boundary is None:
        return FoldResult(key, 0, 0, state.watermark, state.number)
    return _Folder(conn, stream, archive, boundary, count, segment_entries, progress).run(state, min_entries)


class _Folder:
    """One fold call's loop: read a segment's worth, store it, write the next manifest."""

    def __init__(self, conn: Any, stream: Stream, archive: Archive, boundary: StreamId, count: int,
                 segment_entries: int, progress: Progress | None) -> None:
        self.conn, self.stream, self.archive = _reader(conn), stream, archive
        self.key = key_of(stream)
        self.boundary, self.count, self.segment_entries = boundary, count, segment_entries
        self.progress = progress
        self.writer_token = uuid.uuid4().hex
        self.entries = self.segments = self.races = self.left = 0

    def _tell(self, kind: str, state: Manifest, pending: int = 0) -> None:
        if self.progress is not None:
            self.progress(FoldProgress(kind, self.entries, pending, state.watermark))

    def _xrange(self, low: StreamId, count: int) -> list[Any]:
        with translate_errors(self.key):
            return self.conn.xrange(self.key, str(low), str(self.boundary), count=count)  # type: ignore[no-any-return]

    def _read_segment(self, state: Manifest) -> tuple[SegmentWriter, bool]:
        """Read up to a segment's worth after W; also say whether the range is exhausted."""
        writer = SegmentWriter(self.key)
        low = state.watermark.successor() if state.watermark is not None else StreamId(0, 0)
        while writer.count < self.segment_entries:
            asked = min(self.count, self.segment_entries - writer.count)
            chunk = self._xrange(low, asked)
            writer.add(chunk)
            self._tell("read", state, writer.count)
            if len(chunk) < asked:
                return writer, True
            last = StreamId.parse(chunk[-1][0])
            if last >= self.boundary:
                return writer, True
            low = last.successor()
        return writer, False

    def run(self, state: Manifest, min_entries: int) -> FoldResult:
        while state.watermark is None or state.watermark < self.boundary:
            writer, exhausted = self._read_segment(state)
            if writer.count == 0:
                break
            if exhausted and not self.segments and plan_fold_trim(
                    self.boundary, state.watermark, writer.count, min_entries=min_entries).fold is None:
                self.left = writer.count  # too few waiting: leave them for a later, larger segment
                break
            info = self.archive.put_segment(self.stream, writer.finish())
            self._tell("segment", state, writer.count)
            following = state.advance(info, self.writer_token)
            try:
                self.archive.put_manifest(following)
            except ArchiveObjectExists:
                # The fence: a rival owns this step of W. Take its state and go on from its W.
                self.races += 1
                state = self._after_race(following.number)
                self._tell("race", state)
                continue
            state = following
            self.entries += info.count
            self.segments += 1
            self._tell("manifest", state)
            if exhausted:
                break
        return FoldResult(self.key, self.entries, self.segments, state.watermark, state.number, self.races,
                          self.left)

    def _after_race(self, taken: int) -> Manifest:
        latest = self.archive.manifest(self.stream)
        # A listing may lag behind the write that beat us; the manifest we lost to exists for sure.
        return latest if latest.number >= taken else self.archive.manifest_at(self.stream, taken)


def fold_boundary(conn: Any, stream: Stream, window: Window, now: datetime | None = None) -> StreamId | None:
    """The highest id ``window`` drops from ``stream`` now, or None if it drops nothing.

    For ``MaxLen(n)``: the (n+1)-th newest id (reads at most min(n+1, XLEN-n)
    entries). For ``MinId``, ``MaxAge`` (resolved against ``now``, which it then
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
        dropped = conn.xlen(key) - window.count
        if dropped <= 0:
            return None
        if dropped <= window.count + 1:
            return StreamId.parse(conn.xrange(key, "-", "+", count=dropped)[-1][0])
        return StreamId.parse(conn.xrevrange(key, "+", "-", count=window.count + 1)[-1][0])


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
        state = archive.manifest(stream)
        return FoldTrimResult(FoldResult(key_of(stream), 0, 0, state.watermark, state.number), None, None, 0)
    folded = fold(conn, stream, archive, boundary, count=count, segment_entries=segment_entries,
                  min_entries=min_entries, progress=progress)
    # The fold has taken all it will this call (what it left is fewer than min_entries): the plan is now the trim.
    plan = plan_fold_trim(boundary, folded.watermark, folded.left, min_entries=min_entries, approx=window.approx)
    if plan.trim is None:
        return FoldTrimResult(folded, boundary, None, 0)
    if progress is not None:
        progress(FoldProgress("trim", folded.entries, 0, folded.watermark))
    return FoldTrimResult(folded, boundary, plan.trim, trim(conn, stream, plan.trim, limit=limit))
