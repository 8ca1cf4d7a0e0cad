"""The table's columns: stream entries into Arrow, and Arrow back into entries (pure, no I/O).

Every row is one stream entry::

    stream          string, not null         the stream's key (in every file; format 2: the partition column)
    id              string, not null         "<ms>-<seq>", as Redis writes it
    ms              int64, not null          the id's milliseconds: order and pruning
    seq             int64, not null          the id's sequence number
    ts              timestamp(ms, UTC), not null   the instant of ``ms``
    fields          map<string, string>      the entry's fields, when every value is UTF-8 (else null)
    fields_binary   map<string, binary>      every field as bytes, when some value is not UTF-8 (else null)
    stream_digest   string, not null         the partition column (format 3): a path-safe name of the stream

Exactly one of ``fields`` and ``fields_binary`` is set on a row, so every
byte is kept and the common case reads as text (``fields['player']`` in
DuckDB, with no decode or cast). Field names are UTF-8 in both: an entry with
a name that is not is :class:`~retain.errors.UnarchivableEntry`, as is an id
part above 2^63-1 (int64 columns).

A fold turns each XRANGE chunk into two Arrow arrays at once
(:func:`chunk_arrays`, Python objects to Arrow, while the next chunk is read)
and a row group of them into the columns (:func:`entries_table`, Arrow
compute only, so it runs beside the reading without holding the GIL for long).
:func:`entries_of` turns rows back into ``(id, fields)`` shaped as redis-py's
XRANGE returns them.

Example:
    >>> table = entries_table([chunk_arrays([(b"5-0", [b"a", b"1"])])], "emq:{q}:stream:s")
    >>> table.column("fields").to_pylist(), table.column("ts")[0]
    ([[('a', '1')]], <pyarrow.TimestampScalar: '1970-01-01T00:00:00.005000+0000'>)
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import accumulate, chain
from operator import itemgetter
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from retain.errors import UnarchivableEntry

__all__ = [
    "FILE_SCHEMA",
    "STREAM_FIELD",
    "TABLE_SCHEMA",
    "TABLE_SCHEMA_2",
    "Entry",
    "Text",
    "chunk_arrays",
    "entries_of",
    "entries_table",
    "from_binary_map",
]

TEXT_MAP = pa.map_(pa.string(), pa.string())
BINARY_MAP = pa.map_(pa.string(), pa.binary())
TIMESTAMP = pa.timestamp("ms", tz="UTC")
#: the key of the stream a row is of: the first column of a format-3 file
STREAM_FIELD = pa.field("stream", pa.string(), nullable=False)
#: an entry's columns, in this order: what every data file holds after ``stream`` (a format-2 file holds only
#: these), and what a read of one stream yields
FILE_SCHEMA = pa.schema([
    pa.field("id", pa.string(), nullable=False),
    pa.field("ms", pa.int64(), nullable=False),
    pa.field("seq", pa.int64(), nullable=False),
    pa.field("ts", TIMESTAMP, nullable=False),
    pa.field("fields", TEXT_MAP),
    pa.field("fields_binary", BINARY_MAP),
])
#: the table's columns (format 3): the files', then the partition column (nullable: a format-2 table rewritten as
#: format 3 keeps tombstones of files without it, and each checkpoint writes theirs in the table's columns)
TABLE_SCHEMA = pa.schema([STREAM_FIELD, *FILE_SCHEMA, pa.field("stream_digest", pa.string())])
#: the columns of a format-2 table: ``stream`` the partition column, then the files'
TABLE_SCHEMA_2 = pa.schema([STREAM_FIELD, *FILE_SCHEMA])

Entry = tuple[Any, dict[Any, Any]]
#: how a reader wants text: (encoding, errors) as its redis-py connection decodes, or None for bytes
Text = tuple[str, str] | None
Arrays = tuple[pa.Array, pa.Array]


def _text_or_binary(values: Any) -> pa.DataType:
    """str fields (a connection that decodes) convert as strings, bytes as binary."""
    first = next(iter(values), b"")
    return pa.string() if isinstance(first, str) else pa.binary()


def chunk_arrays(entries: Sequence[Entry]) -> Arrays:
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
        values = pa.array(list(chain.from_iterable(map(dict.values, fields))),
                          _text_or_binary(fields[0].values()))
        offsets = pa.array([0, *accumulate(map(len, fields))], pa.int32())
        return ids, pa.MapArray.from_arrays(offsets, names.cast(pa.binary()), values.cast(pa.binary()))
    return ids, pa.array(fields, pa.list_(_text_or_binary(fields[0])))


# Arrow scalars, not Python ints: pyarrow converts a Python int argument of a compute function through a
# path that tries to import dateutil on every call (≈0.3 ms when it is not installed: a beat of 1,000 small
# folds spent over a second on it).
_FIRST, _SECOND, _TWO = pa.scalar(0, pa.int32()), pa.scalar(1, pa.int32()), pa.scalar(2, pa.int32())


def entries_table(pieces: Sequence[Arrays], stream: str) -> pa.Table:
    """Chunks from :func:`chunk_arrays`, in id order, as rows of :data:`FILE_SCHEMA`.

    Raises:
        UnarchivableEntry: an id part above 2^63-1, or a field name that is not UTF-8.
    """
    ids = pa.concat_arrays([piece[0].cast(pa.binary()) for piece in pieces])
    fields = pa.concat_arrays([piece[1] for piece in pieces])
    try:
        parts = pc.split_pattern(ids, "-")
        ms = pc.cast(pc.cast(pc.list_element(parts, _FIRST), pa.string()), pa.int64())
        seq = pc.cast(pc.cast(pc.list_element(parts, _SECOND), pa.string()), pa.int64())
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise UnarchivableEntry(f"an id of {stream!r} in {ids[0]}..{ids[-1]} does not fit the int64 "
                                f"ms and seq columns ({exc})") from exc
    if isinstance(fields, pa.MapArray):
        offsets, names, values = fields.offsets, fields.keys, fields.items
    else:
        # The flat lists split into names and values in C++: every other element is a name.
        pairs = pa.FixedSizeListArray.from_arrays(fields.values, 2)
        offsets = pc.divide(fields.offsets, _TWO)
        names, values = pc.list_element(pairs, _FIRST), pc.list_element(pairs, _SECOND)
    text, binary = _field_columns(offsets, names, values.cast(pa.binary()), ids, stream)
    return pa.Table.from_arrays([ids.cast(pa.string()), ms, seq, ms.cast(TIMESTAMP), text, binary],
                                schema=FILE_SCHEMA)


def from_binary_map(ms: pa.Array, seq: pa.Array, fields: pa.MapArray, stream: str) -> pa.Table:
    """Rows of :data:`FILE_SCHEMA` from ids as two columns and every field as bytes (format 1's segments)."""
    ids = pc.binary_join_element_wise(pc.cast(ms, pa.string()), pc.cast(seq, pa.string()), "-")
    fields = fields.combine_chunks() if isinstance(fields, pa.ChunkedArray) else fields
    start = fields.offsets[0].as_py()
    offsets = pc.subtract(fields.offsets, start) if start else fields.offsets
    end = fields.offsets[-1].as_py()
    names, values = fields.keys.slice(start, end - start), fields.items.slice(start, end - start)
    text, binary = _field_columns(offsets, names, values, ids, stream)
    ms = ms.combine_chunks() if isinstance(ms, pa.ChunkedArray) else ms
    seq = seq.combine_chunks() if isinstance(seq, pa.ChunkedArray) else seq
    return pa.Table.from_arrays([ids.combine_chunks() if isinstance(ids, pa.ChunkedArray) else ids, ms, seq,
                                 ms.cast(TIMESTAMP), text, binary], schema=FILE_SCHEMA)


def _field_columns(offsets: pa.Array, names: pa.Array, values: pa.Array, ids: pa.Array,
                   stream: str) -> tuple[pa.Array, pa.Array]:
    """``fields`` and ``fields_binary`` from every entry's names and values (binary) between ``offsets``."""
    try:
        names = names.cast(pa.string())
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        bad = next(name for name in names.to_pylist() if not _utf8(name))
        raise UnarchivableEntry(f"a field name of {stream!r} in {ids[0]}..{ids[-1]} is not UTF-8 "
                                f"({bad!r}); the table stores field names as strings") from exc
    rows = len(offsets) - 1
    try:
        text_values = values.cast(pa.string())
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return _mixed(offsets, names, values, rows)
    return pa.MapArray.from_arrays(offsets, names, text_values), pa.nulls(rows, BINARY_MAP)


def _mixed(offsets: pa.Array, names: pa.Array, values: pa.Array, rows: int) -> tuple[pa.Array, pa.Array]:
    """Some value is not UTF-8: those entries keep every field in ``fields_binary``, the others in ``fields``."""
    valid = [_utf8(value) for value in values.to_pylist()]
    bounds = offsets.to_pylist()
    binary_rows = [not all(valid[bounds[row]:bounds[row + 1]]) for row in range(rows)]
    # The text child must be valid UTF-8 throughout, masked rows too: their values stand in as "".
    text_values = pc.if_else(pa.array(valid), values, pa.scalar(b"", pa.binary())).cast(pa.string())
    text = pa.MapArray.from_arrays(offsets, names, text_values, mask=pa.array(binary_rows))
    binary = pa.MapArray.from_arrays(offsets, names, values, mask=pa.array([not flag for flag in binary_rows]))
    return text, binary


def _utf8(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def entries_of(table: pa.Table, text: Text) -> Iterator[Entry]:
    """Rows of :data:`FILE_SCHEMA` as ``(id, fields)`` shaped as redis-py's XRANGE returns them.

    Bytes, or str decoded as ``text = (encoding, errors)`` says. The tuples are
    made as they are taken, so a reader that drops each one holds the table's
    values and no more.
    """
    if not table.num_rows:
        return iter(())
    ids = table.column("id")
    id_list = ids.to_pylist() if text is not None else ids.cast(pa.binary()).to_pylist()
    binary = table.column("fields_binary")
    if binary.null_count == table.num_rows:
        fields = table.column("fields").combine_chunks()
        return _paired(id_list, fields, fields.items.cast(pa.binary()), text)
    # Some entry holds a value that is not UTF-8: each row takes its fields from the column that holds them.
    as_text = table.column("fields").cast(BINARY_MAP).to_pylist()
    as_bytes = binary.to_pylist()
    rows = [pairs if pairs is not None else as_bytes[index] for index, pairs in enumerate(as_text)]
    return ((entry_id, {_shown(name, text): _shown(value, text) if text is not None else value
                        for name, value in pairs})
            for entry_id, pairs in zip(id_list, rows, strict=False))


def _shown(raw: Any, text: Text) -> Any:
    if text is None:
        return raw.encode() if isinstance(raw, str) else raw
    if isinstance(raw, str):
        return raw
    return raw.decode(*text)


def _paired(id_list: list[Any], fields: pa.MapArray, values: pa.Array, text: Text) -> Iterator[Entry]:
    start, end = fields.offsets[0].as_py(), fields.offsets[-1].as_py()
    keys = fields.keys.slice(start, end - start)
    values = values.slice(start, end - start)
    if text is None:
        key_list = keys.cast(pa.binary()).to_pylist()
        value_list = values.to_pylist()
    else:
        key_list = keys.to_pylist()
        value_list = _decoded(values, text)
    widths = pc.min_max(pc.pairwise_diff(fields.offsets)) if len(id_list) > 1 else None
    width = (end - start) // len(id_list)
    if width and (widths is None or widths["min"].as_py() == widths["max"].as_py() == width):
        # Every entry has the same number of fields (the usual case): pair and group at C speed.
        return zip(id_list, map(dict, zip(*[zip(key_list, value_list, strict=False)] * width, strict=False)), strict=False)
    offsets = [offset - start for offset in fields.offsets.to_pylist()]
    return ((id_list[row], dict(zip(key_list[offsets[row]:offsets[row + 1]], value_list[offsets[row]:offsets[row + 1]], strict=False)))
            for row in range(len(id_list)))


def _decoded(values: pa.Array, text: tuple[str, str]) -> list[Any]:
    encoding, errors = text
    if encoding.replace("-", "").lower() == "utf8":
        try:
            return list(values.cast(pa.string()).to_pylist())
        except pa.ArrowInvalid:
            pass  # not all UTF-8: decode value by value, as the connection would
    return [raw.decode(encoding, errors) for raw in values.to_pylist()]
