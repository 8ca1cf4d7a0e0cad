"""Parquet segments: stream entries in, bytes out, and back again (no I/O of their own).

A segment holds a run of consecutive stream entries in id order, with the schema

    ms      int64                 the id's milliseconds
    seq     int64                 the id's sequence number
    fields  map<string, binary>   the entry's field names and values, binary-safe

compressed with zstd, in row groups of at most :data:`ROW_GROUP_ROWS` rows. Ids
are two integer columns because ``"<ms>-<seq>"`` strings do not sort as
numbers. The file's key-value metadata carries ``retain.format`` and
``retain.stream``. DuckDB, Polars and pandas read segments as they are.

Example:
    >>> writer = SegmentWriter("emq:{q}:stream:s")
    >>> writer.add(conn.xrange("emq:{q}:stream:s", count=1000))
    >>> segment = writer.finish()          # EncodedSegment: first, last, count, data
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate, chain
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from retain.archive.ids import StreamId
from retain.archive.layout import segment_name
from retain.archive.manifest import FORMAT_VERSION, SegmentInfo
from retain.errors import ArchiveCorrupt, UnarchivableEntry

__all__ = ["ROW_GROUP_ROWS", "SCHEMA", "EncodedSegment", "SegmentWriter", "Text", "read_entries", "same_rows"]

ROW_GROUP_ROWS = 10_000
SCHEMA = pa.schema([
    pa.field("ms", pa.int64(), nullable=False),
    pa.field("seq", pa.int64(), nullable=False),
    pa.field("fields", pa.map_(pa.string(), pa.binary()), nullable=False),
])
_INT64_MAX = 2**63 - 1

Entry = tuple[Any, dict[Any, Any]]
#: how a reader wants text: (encoding, errors) as its redis-py connection decodes, or None for bytes
Text = tuple[str, str] | None


@dataclass(frozen=True)
class EncodedSegment:
    """A segment ready to store: its id range, entry count and Parquet bytes."""

    first: StreamId
    last: StreamId
    count: int
    data: bytes

    @property
    def name(self) -> str:
        """Its object name relative to the stream's folder."""
        return segment_name(self.first, self.last)

    def info(self, stored_bytes: int | None = None) -> SegmentInfo:
        """The manifest's line for it; ``stored_bytes`` is the size of the object actually stored."""
        return SegmentInfo(self.name, self.first, self.last, self.count,
                           len(self.data) if stored_bytes is None else stored_bytes)


def _table(entries: Sequence[Entry], stream: str) -> pa.Table:
    """XRANGE entries (str or bytes, as the connection returns them) as a table of the schema."""
    ids = [entry[0] for entry in entries]
    maps = [entry[1] for entry in entries]
    # Flatten with C-level iterators: a Python loop per entry costs as much as the XRANGE.
    keys = list(chain.from_iterable(map(Mapping.keys, maps)))
    values = list(chain.from_iterable(map(Mapping.values, maps)))
    offsets = pa.array([0, *accumulate(map(len, maps))], pa.int32())
    try:
        parts = pc.split_pattern(pa.array(ids, pa.string() if isinstance(ids[0], str) else pa.binary()), "-")
        ms = pc.cast(pc.cast(pc.list_element(parts, 0), pa.string()), pa.int64())
        seq = pc.cast(pc.cast(pc.list_element(parts, 1), pa.string()), pa.int64())
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise UnarchivableEntry(f"an id of {stream!r} near {ids[0]!r}..{ids[-1]!r} does not fit the int64 "
                                f"ms and seq columns ({exc})") from exc
    key_type = pa.string() if keys and isinstance(keys[0], str) else pa.binary()
    try:
        key_array = pa.array(keys, key_type).cast(pa.string())
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        bad = next(entry[0] for entry in entries if any(isinstance(k, bytes) and not _utf8(k) for k in entry[1]))
        raise UnarchivableEntry(f"entry {bad!r} of {stream!r} has a field name that is not UTF-8; "
                                "segments store field names as strings") from exc
    fields = pa.MapArray.from_arrays(offsets, key_array, pa.array(values, pa.binary()))
    return pa.Table.from_arrays([ms, seq, fields], schema=SCHEMA)


def _utf8(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


class SegmentWriter:
    """Build one segment from XRANGE chunks, writing a row group each :data:`ROW_GROUP_ROWS` rows.

    Entries must come in id order, each chunk after the last; only the
    pending row group is held uncompressed, the rest is already Parquet.
    """

    def __init__(self, stream: str, *, row_group_rows: int = ROW_GROUP_ROWS) -> None:
        self.stream = stream
        self.row_group_rows = row_group_rows
        self.count = 0
        self.first: StreamId | None = None
        self.last: StreamId | None = None
        self._pending: list[pa.Table] = []
        self._pending_rows = 0
        self._sink = pa.BufferOutputStream()
        metadata = {b"retain.format": str(FORMAT_VERSION).encode(), b"retain.stream": stream.encode()}
        self._writer = pq.ParquetWriter(self._sink, SCHEMA.with_metadata(metadata), compression="zstd")

    def add(self, entries: Sequence[Entry]) -> None:
        """Append a chunk of entries, as ``conn.xrange`` returned them."""
        if not entries:
            return
        table = _table(entries, self.stream)
        if self.first is None:
            self.first = StreamId.parse(entries[0][0])
        self.last = StreamId.parse(entries[-1][0])
        self.count += len(entries)
        self._pending.append(table)
        self._pending_rows += len(entries)
        if self._pending_rows >= self.row_group_rows:
            self._flush()

    def _flush(self) -> None:
        if self._pending:
            self._writer.write_table(pa.concat_tables(self._pending), row_group_size=self.row_group_rows)
            self._pending, self._pending_rows = [], 0

    def finish(self) -> EncodedSegment:
        """Close the file and return the segment; at least one entry must have been added."""
        if self.first is None or self.last is None:
            raise ValueError("a segment needs at least one entry")
        self._flush()
        self._writer.close()
        return EncodedSegment(self.first, self.last, self.count, self._sink.getvalue().to_pybytes())


def read_entries(source: Any, low: StreamId, high: StreamId, text: Text = None) -> Iterator[list[Entry]]:
    """The entries of a segment with ids in ``low..high`` (both included), a row group at a time.

    ``source`` is anything pyarrow opens (a file-like object, a buffer). Row
    groups wholly outside the range are skipped on their statistics, unread.
    Each list holds ``(id, fields)`` shaped as redis-py returns XRANGE entries:
    bytes, or str decoded as ``text = (encoding, errors)`` says.
    """
    parquet = pq.ParquetFile(source)
    for index in range(parquet.num_row_groups):
        group = parquet.metadata.row_group(index)
        stats = group.column(0).statistics
        if stats is not None and stats.has_min_max and (stats.max < low.ms or stats.min > high.ms):
            continue
        table = parquet.read_row_group(index)
        table = table.filter(_within(table, low, high)) if _straddles(stats, low, high) else table
        if table.num_rows:
            yield _entries(table, text)


def _straddles(stats: Any, low: StreamId, high: StreamId) -> bool:
    # Only a row group whose ms range touches a bound needs a row-by-row filter.
    if stats is None or not stats.has_min_max:
        return True
    return stats.min <= low.ms or stats.max >= high.ms


def _within(table: pa.Table, low: StreamId, high: StreamId) -> pa.ChunkedArray:
    ms, seq = table.column("ms"), table.column("seq")
    keep = pc.or_(pc.greater(ms, low.ms), pc.and_(pc.equal(ms, low.ms), pc.greater_equal(seq, low.seq)))
    if high.ms <= _INT64_MAX:  # past int64 every stored id is below the bound
        below = pc.or_(pc.less(ms, high.ms),
                       pc.and_(pc.equal(ms, high.ms), pc.less_equal(seq, min(high.seq, _INT64_MAX))))
        keep = pc.and_(keep, below)
    return keep


def _entries(table: pa.Table, text: Text) -> list[Entry]:
    ids = pc.binary_join_element_wise(pc.cast(table.column("ms"), pa.string()),
                                      pc.cast(table.column("seq"), pa.string()), "-")
    fields = table.column("fields").combine_chunks()
    offsets = fields.offsets.to_pylist()
    start, end = offsets[0], offsets[-1]
    keys = fields.keys.slice(start, end - start)
    values = fields.items.slice(start, end - start)
    if text is None:
        id_list = ids.cast(pa.binary()).to_pylist()
        key_list = keys.cast(pa.binary()).to_pylist()
        value_list = values.to_pylist()
    else:
        id_list, key_list = ids.to_pylist(), keys.to_pylist()
        value_list = _decoded(values, text)
    rows = len(id_list)
    width = (end - start) // rows if rows else 0
    if width and width * rows == end - start and offsets == list(range(start, end + 1, width)):
        # Every entry has the same fields count (the usual case): group pairs at C speed.
        pairs = zip(key_list, value_list)
        return list(zip(id_list, map(dict, zip(*[pairs] * width))))
    return [(id_list[row], dict(zip(key_list[offsets[row] - start:offsets[row + 1] - start],
                                    value_list[offsets[row] - start:offsets[row + 1] - start])))
            for row in range(rows)]


def _decoded(values: pa.Array, text: tuple[str, str]) -> list[Any]:
    encoding, errors = text
    if encoding.replace("-", "").lower() == "utf8":
        try:
            return values.cast(pa.string()).to_pylist()
        except pa.ArrowInvalid:
            pass  # not all UTF-8: decode value by value, as the connection would
    return [raw.decode(encoding, errors) for raw in values.to_pylist()]


def same_rows(stored: Any, ours: bytes) -> bool:
    """Whether two segment files hold the same rows (the metadata and encoding may differ)."""
    try:
        theirs = pq.read_table(pa.BufferReader(stored))
    except (pa.ArrowException, OSError) as exc:
        raise ArchiveCorrupt(f"a stored segment is not readable Parquet: {exc}") from exc
    mine = pq.read_table(pa.BufferReader(ours))
    return theirs.select(SCHEMA.names).equals(mine.select(SCHEMA.names))
