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

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import accumulate, chain
from operator import itemgetter
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from retain.ids import StreamId
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


def _arrays(entries: Sequence[Entry]) -> tuple[pa.Array, pa.Array]:
    """One XRANGE chunk as Arrow arrays, at once, so no Python object outlives its chunk.

    Returns the ids and the fields: a map array for dicts (``conn.xrange``), a
    list array of ``[name, value, ...]`` for the flat lists the server sends.
    Names and values may be str or bytes, as the connection returns them.
    """
    ids = pa.array(list(map(itemgetter(0), entries)), _text_or_binary(entries[0][0]))
    fields = list(map(itemgetter(1), entries))
    if isinstance(fields[0], dict):
        # Flatten with C-level iterators: a Python loop per entry costs as much as the XRANGE.
        names = pa.array(list(chain.from_iterable(map(dict.keys, fields))), _text_or_binary(fields[0]))
        values = pa.array(list(chain.from_iterable(map(dict.values, fields))), pa.binary())
        offsets = pa.array([0, *accumulate(map(len, fields))], pa.int32())
        return ids, pa.MapArray.from_arrays(offsets, names.cast(pa.binary()), values)
    return ids, pa.array(fields, pa.list_(_text_or_binary(fields[0])))


def _table(pieces: Sequence[tuple[pa.Array, pa.Array]], stream: str) -> pa.Table:
    """Chunks from :func:`_arrays` as one table of the schema (the compute runs once per row group)."""
    ids = pa.concat_arrays([piece[0].cast(pa.binary()) for piece in pieces])
    fields = pa.concat_arrays([piece[1] for piece in pieces])
    try:
        parts = pc.split_pattern(ids, "-")
        ms = pc.cast(pc.cast(pc.list_element(parts, 0), pa.string()), pa.int64())
        seq = pc.cast(pc.cast(pc.list_element(parts, 1), pa.string()), pa.int64())
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise UnarchivableEntry(f"an id of {stream!r} in {ids[0]}..{ids[-1]} does not fit the int64 "
                                f"ms and seq columns ({exc})") from exc
    if isinstance(fields, pa.MapArray):
        offsets, names, values = fields.offsets, fields.keys, fields.items
    else:
        # The flat lists split into names and values in C++: every other element is a name.
        pairs = pa.FixedSizeListArray.from_arrays(fields.values, 2)
        offsets, names, values = pc.divide(fields.offsets, 2), pc.list_element(pairs, 0), pc.list_element(pairs, 1)
    try:
        names = names.cast(pa.string())
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        bad = next(name for name in names.to_pylist() if not _utf8(name))
        raise UnarchivableEntry(f"a field name of {stream!r} in {ids[0]}..{ids[-1]} is not UTF-8 "
                                f"({bad!r}); segments store field names as strings") from exc
    mapped = pa.MapArray.from_arrays(offsets, names, values.cast(pa.binary()))
    return pa.Table.from_arrays([ms, seq, mapped], schema=SCHEMA)


def _text_or_binary(fields: Any) -> pa.DataType:
    """str fields (a connection that decodes) convert as strings, bytes as binary."""
    first = next(iter(fields), b"")
    return pa.string() if isinstance(first, str) else pa.binary()


def _utf8(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


class SegmentWriter:
    """Build one segment from XRANGE chunks, a row group of :data:`ROW_GROUP_ROWS` rows at a time.

    Entries must come in id order, each chunk after the last. Each chunk is
    turned into Arrow arrays as it comes; the pending row group is computed
    into the schema once, which costs far less than once per chunk.
    Everything written so far is already compressed Parquet.
    """

    def __init__(self, stream: str, *, row_group_rows: int = ROW_GROUP_ROWS) -> None:
        self.stream = stream
        self.row_group_rows = row_group_rows
        self.count = 0
        self.first: StreamId | None = None
        self.last: StreamId | None = None
        self._pending: list[tuple[pa.Array, pa.Array]] = []
        self._pending_rows = 0
        self._sink = pa.BufferOutputStream()
        metadata = {b"retain.format": str(FORMAT_VERSION).encode(), b"retain.stream": stream.encode()}
        # Dictionary pages for the field names only (few, repeated); statistics for the ids only
        # (what a reader prunes row groups on): both cut the encoding time of a fold by a third.
        self._writer = pq.ParquetWriter(self._sink, SCHEMA.with_metadata(metadata), compression="zstd",
                                        use_dictionary=["fields.key_value.key"], write_statistics=["ms", "seq"])

    def add(self, entries: Sequence[Entry]) -> None:
        """Append a chunk of entries, as ``conn.xrange`` or the server returned them."""
        if not entries:
            return
        if self.first is None:
            self.first = StreamId.parse(entries[0][0])
        self.last = StreamId.parse(entries[-1][0])
        self.count += len(entries)
        self._pending.append(_arrays(entries))
        self._pending_rows += len(entries)
        if self._pending_rows >= self.row_group_rows:
            self._flush()

    def _flush(self) -> None:
        if self._pending:
            self._writer.write_table(_table(self._pending, self.stream), row_group_size=self.row_group_rows)
            self._pending, self._pending_rows = [], 0

    def finish(self) -> EncodedSegment:
        """Close the file and return the segment; at least one entry must have been added."""
        if self.first is None or self.last is None:
            raise ValueError("a segment needs at least one entry")
        self._flush()
        self._writer.close()
        return EncodedSegment(self.first, self.last, self.count, self._sink.getvalue().to_pybytes())


def read_entries(source: Any, low: StreamId, high: StreamId, text: Text = None) -> Iterator[Iterator[Entry]]:
    """The entries of a segment with ids in ``low..high`` (both included), a row group at a time.

    ``source`` is anything pyarrow opens (a file-like object, a buffer). Row
    groups wholly outside the range are skipped on their statistics, unread.
    Each row group comes as an iterator of ``(id, fields)`` shaped as redis-py
    returns XRANGE entries: bytes, or str decoded as ``text = (encoding,
    errors)`` says. The tuples are made as they are taken, so a reader that
    drops each one holds one row group's values and no more.
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
    return bool(stats.min <= low.ms or stats.max >= high.ms)


def _within(table: pa.Table, low: StreamId, high: StreamId) -> pa.ChunkedArray:
    ms, seq = table.column("ms"), table.column("seq")
    keep = pc.or_(pc.greater(ms, low.ms), pc.and_(pc.equal(ms, low.ms), pc.greater_equal(seq, low.seq)))
    if high.ms <= _INT64_MAX:  # past int64 every stored id is below the bound
        below = pc.or_(pc.less(ms, high.ms),
                       pc.and_(pc.equal(ms, high.ms), pc.less_equal(seq, min(high.seq, _INT64_MAX))))
        keep = pc.and_(keep, below)
    return keep


def _entries(table: pa.Table, text: Text) -> Iterator[Entry]:
    ids = pc.binary_join_element_wise(pc.cast(table.column("ms"), pa.string()),
                                      pc.cast(table.column("seq"), pa.string()), "-")
    fields = table.column("fields").combine_chunks()
    start, end = fields.offsets[0].as_py(), fields.offsets[-1].as_py()
    keys = fields.keys.slice(start, end - start)
    values = fields.items.slice(start, end - start)
    if text is None:
        id_list = ids.cast(pa.binary()).to_pylist()
        key_list = keys.cast(pa.binary()).to_pylist()
        value_list = values.to_pylist()
    else:
        id_list, key_list = ids.to_pylist(), keys.to_pylist()
        value_list = _decoded(values, text)
    widths = pc.min_max(pc.pairwise_diff(fields.offsets)) if len(id_list) > 1 else None
    width = (end - start) // len(id_list)
    if width and (widths is None or widths["min"].as_py() == widths["max"].as_py() == width):
        # Every entry has the same number of fields (the usual case): pair and group at C speed.
        return zip(id_list, map(dict, zip(*[zip(key_list, value_list)] * width)))
    offsets = [offset - start for offset in fields.offsets.to_pylist()]
    return ((id_list[row], dict(zip(key_list[offsets[row]:offsets[row + 1]], value_list[offsets[row]:offsets[row + 1]])))
            for row in range(len(id_list)))


def _decoded(values: pa.Array, text: tuple[str, str]) -> list[Any]:
    encoding, errors = text
    if encoding.replace("-", "").lower() == "utf8":
        try:
            return list(values.cast(pa.string()).to_pylist())
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
    return bool(theirs.select(SCHEMA.names).equals(mine.select(SCHEMA.names)))
