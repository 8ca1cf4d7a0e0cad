"""The merge-read: a stream's archived past and its live tail, as one log in id order.

Each step reads, in this order: a chunk of the live range, then W, then the
archive for ids up to W; it keeps the live ids above W. Why no entry falls
between (docs/archive.md has the whole argument): a trim only ever removes ids
at or below the W of its time, and W only grows. So an id above the W read
*after* the live chunk was not trimmed *before* that chunk was read: it is in
the chunk. An id at or below that W is in the archive, which only grows too
(until it expires). Reading W first instead would let a fold and trim run
between the two reads and hide entries from both. W is read after every
chunk, in constant time (:meth:`~retain.archive.Archive.watermark`).

Two shapes, one merge:

- :func:`read` yields ``(id, fields)`` as ``conn.xrange`` returns them;
- :func:`read_arrow` yields Arrow record batches in the table's columns
  (:data:`~retain.archive.columns.FILE_SCHEMA`): the archive's row groups as
  they are decoded, each live chunk converted as a fold converts it;
- :func:`read_log` is the merge-read of many streams as one Arrow stream, the
  key in a ``stream`` column: the ``log`` view of ``retain archive query``.

Example:
    >>> for entry_id, fields in read(conn, StreamRef("codemojex", "activity"), archive,
    ...                              start=datetime(2026, 9, 12, tzinfo=timezone.utc)):
    ...     ...
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from itertools import chain
from typing import Any, TypeVar

import pyarrow as pa

from retain._redis import RedisLike, translate_errors
from retain.archive._pipeline import raw_reader
from retain.archive.columns import FILE_SCHEMA, STREAM_FIELD, Entry, Text, chunk_arrays, entries_of, entries_table
from retain.archive.gap import gap, live_info
from retain.archive.table import Archive, ArchivedFile
from retain.errors import ArchiveCorrupt, ArchiveObjectMissing, InvalidInput
from retain.ids import StreamId, lower_bound, upper_bound
from retain.streams.keys import RawKey, Stream, key_of

__all__ = ["LOG_SCHEMA", "read", "read_arrow", "read_log"]

DEFAULT_COUNT = 1_000
#: rows of the archive turned into Python entries at a time: a reader's first entry costs this many, not a row group
ENTRY_BATCH = 2_048
_LAST = StreamId(2**64 - 1, 2**64 - 1)
#: the columns of :func:`read_log`: the stream's key, then an entry's
LOG_SCHEMA = pa.schema([STREAM_FIELD, *FILE_SCHEMA])
T = TypeVar("T")


def _bounds(start: Any, end: Any, count: Any) -> tuple[StreamId, StreamId]:
    low, high = lower_bound(start), upper_bound(end)
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise InvalidInput(f"count must be an int >= 1 (got {count!r})")
    return low, high


def read(conn: RedisLike, stream: Stream, archive: Archive, start: str | datetime | StreamId | None = None,
         end: str | datetime | StreamId | None = None, *, count: int = DEFAULT_COUNT) -> Iterator[Entry]:
    """Every entry of ``stream`` with an id in ``start..end`` (both included), archived or live, in id order.

    ``start`` and ``end`` are stream ids, ``"<ms>"`` (as XRANGE reads them), or
    timezone-aware datetimes (the ids minted in that millisecond are included);
    None reads from the first id or to the last. Entries come as ``(id,
    fields)`` shaped exactly as ``conn.xrange`` returns them (bytes, or str if
    the connection decodes responses), whether from the table or from Redis.
    Entries appended while the read runs may or may not appear; none appears
    twice, and none appended before the read began is missed, however folds and
    trims run underneath (INV-MERGE); rows the archive expired are not read.
    Memory stays at one XRANGE chunk (``count`` entries) plus one row group.

    Raises:
        InvalidStreamName, InvalidStreamId, InvalidInput: at the call, before any I/O.
        WrongTypeError, ServerError, ServerUnavailable, ArchiveError: while iterating.
        ArchiveGap: entries of the range are neither archived nor live (:mod:`retain.archive.gap`):
            the live stream was trimmed past W, or the archive lost a commit; raised before any entry.
        ArchiveCorrupt: a data file the table lists is missing from the store or damaged (named).

    Example:
        >>> list(read(conn, StreamRef("codemojex", "activity"), archive, "1789171200000-0", "1789171200001"))
        [(b'1789171200000-0', {b'player': b'ada', ...}), (b'1789171200001-0', {...})]
    """
    key = key_of(stream)
    low, high = _bounds(start, end, count)
    text = _text_of(conn)

    def archived(file: ArchivedFile, position: StreamId, top: StreamId) -> Iterator[tuple[StreamId, Iterable[Entry]]]:
        for table in archive.tables(stream, file, position, top, batch_rows=ENTRY_BATCH):
            yield _last_id(table), entries_of(table, text)

    # The merge yields runs of entries; chain flattens them at C speed, not one generator step an entry.
    return chain.from_iterable(_merge(conn, stream, key, archive, low, high, count, archived, _as_is))


def read_arrow(conn: RedisLike, stream: Stream, archive: Archive, start: str | datetime | StreamId | None = None,
               end: str | datetime | StreamId | None = None, *, count: int = DEFAULT_COUNT) -> Iterator[pa.RecordBatch]:
    """The entries :func:`read` yields, as Arrow record batches of :data:`~retain.archive.columns.FILE_SCHEMA`.

    Same bounds, order and guarantees (INV-MERGE); each batch holds ids in
    order, after the last batch's. Archived rows come as the files decode
    them, a row group at a time; each live chunk is converted at once.

    Example:
        >>> table = pa.Table.from_batches(read_arrow(conn, feed, archive), schema=FILE_SCHEMA)
    """
    key = key_of(stream)
    low, high = _bounds(start, end, count)

    def archived(file: ArchivedFile, position: StreamId, top: StreamId) -> Iterator[tuple[StreamId, pa.RecordBatch]]:
        for batch in archive.batches(stream, file, position, top):
            yield _last_id(batch), batch

    def live(chunk: list[Any]) -> pa.RecordBatch:
        return entries_table([chunk_arrays(chunk)], key).combine_chunks().to_batches()[0]

    return _merge(raw_reader(conn), stream, key, archive, low, high, count, archived, live)


def read_log(conn: RedisLike, archive: Archive, streams: Iterable[Stream] | None = None,
             start: str | datetime | StreamId | None = None, end: str | datetime | StreamId | None = None, *,
             count: int = DEFAULT_COUNT) -> pa.RecordBatchReader:
    """The merge-read of each of ``streams`` (default: every stream the archive holds, in key order) as one
    stream of Arrow record batches of :data:`LOG_SCHEMA`: stream after stream, each in id order, each id once,
    no gap between the tiers (INV-MERGE), bounded by ``start``/``end`` as :func:`read` is.

    Nothing is read until the first batch is asked for, and memory stays at a batch: ``.read_all()`` makes one
    Arrow table of it, ``for batch in …`` a year of history in bounded memory. An Arrow stream is read once.

    Raises:
        InvalidStreamName, InvalidStreamId, InvalidInput: at the call, before any I/O.
        the errors of :func:`read` while iterating.

    Example:
        >>> read_log(conn, archive, [StreamRef("shop", "orders")], since).read_all().group_by("stream").aggregate(...)
    """
    chosen = [RawKey(key_of(stream)) for stream in streams] if streams is not None else None
    _bounds(start, end, count)

    def batches() -> Iterator[pa.RecordBatch]:
        for stream in chosen if chosen is not None else [RawKey(key) for key in archive.streams()]:
            key = pa.scalar(stream.key, pa.string())
            for batch in read_arrow(conn, stream, archive, start, end, count=count):
                yield pa.RecordBatch.from_arrays([pa.repeat(key, batch.num_rows), *batch.columns],
                                                 schema=LOG_SCHEMA)

    return pa.RecordBatchReader.from_batches(LOG_SCHEMA, batches())


def _as_is(chunk: list[Any]) -> list[Any]:
    return chunk


def _text_of(conn: RedisLike) -> Text:
    """How ``conn`` decodes replies: (encoding, errors), or None for bytes."""
    encoder = conn.get_encoder() if hasattr(conn, "get_encoder") else None
    if encoder is not None and encoder.decode_responses:
        return encoder.encoding, encoder.encoding_errors
    return None


def _last_id(rows: pa.Table | pa.RecordBatch) -> StreamId:
    return StreamId(rows.column("ms")[-1].as_py(), rows.column("seq")[-1].as_py())


Archived = Callable[[ArchivedFile, StreamId, StreamId], Iterable[tuple[StreamId, T]]]


def _merge(conn: RedisLike, stream: Stream, key: str, archive: Archive, low: StreamId, high: StreamId, count: int,
           archived: Archived[T], live: Callable[[list[Any]], T]) -> Iterator[T]:
    _refuse_gap(conn, stream, key, archive, low, high)
    position: StreamId | None = low  # the smallest id not yet yielded; None once past the largest id
    while position is not None and position <= high:
        with translate_errors(key):
            chunk = conn.xrange(key, str(position), str(high), count=count)  # 1. the live range
        watermark = archive.watermark(stream)  # 2. then W
        if watermark is not None and watermark >= position:  # 3. then the archive, up to W
            top = min(watermark, high)
            yield from _archived_part(archive, stream, position, top, archived)
            if top == high:
                return
            position = top.successor()
        if chunk:
            first_kept = 0
            if StreamId.parse(chunk[0][0]) < position:  # keep only the live ids above W
                first_kept = bisect_left(chunk, position, key=lambda entry: StreamId.parse(entry[0]))
            if first_kept < len(chunk):
                yield live(chunk[first_kept:] if first_kept else chunk)
            after_chunk = _successor(StreamId.parse(chunk[-1][0]))
            if after_chunk is None or (position is not None and after_chunk > position):
                position = after_chunk
        if len(chunk) < count:
            return  # the live range held nothing more when the chunk was read; the archive was read after


def _refuse_gap(conn: RedisLike, stream: Stream, key: str, archive: Archive, low: StreamId, high: StreamId) -> None:
    """Raise ArchiveGap when entries of ``low..high`` are neither archived nor live (:mod:`retain.archive.gap`).

    The live counters and the trim mark are read before W, as the check needs: one round trip per read.
    """
    info = live_info(conn, key, archive.table_id)
    watermark, ordinal = archive.positions([stream])[key]
    missing = gap(key, info, watermark, ordinal)
    if missing is None or info is None:
        return
    # The lost entries lie strictly between W and the first live entry.
    if (watermark is None or high > watermark) and (info.first is None or low < info.first):
        raise missing


def _archived_part(archive: Archive, stream: Stream, low: StreamId, top: StreamId,
                   archived: Archived[T]) -> Iterator[T]:
    """The archive's rows of ``low..top``, file after file as the latest snapshot lists them.

    A file can go while a slow read still holds the list it came in: compacted
    into another, or expired, then vacuumed. The read then lists the files
    again and goes on after the last row it yielded (the compacted file holds
    the rest; expired rows are gone). A file missing from a fresh list too is
    an error (INV-NOSILENTGAP).
    """
    position = low
    name = ""
    for attempt in (1, 2):
        try:
            for file in archive.files(stream, position, top):
                name = file.path
                for last, rows in archived(file, position, top):
                    yield rows
                    if last >= top:
                        return
                    position = last.successor()
            return
        except ArchiveObjectMissing as missing:
            if attempt == 2:
                # Listed by the latest snapshot and still not in the store: damage, never fewer rows in silence.
                raise ArchiveCorrupt(f"data file {name!r} is listed by the table's log (version {archive.version}) "
                                     "but is not in the store: the archive is damaged (`retain archive verify` "
                                     "names every damaged object)") from missing


def _successor(entry_id: StreamId) -> StreamId | None:
    return None if entry_id == _LAST else entry_id.successor()

