"""Format 1 (read-only until migrated): a segment's rows, read as the table's columns.

A format-1 segment is a Parquet file of one stream's consecutive entries in id
order, zstd, row groups of at most 10,000 rows, with the schema

    ms      int64                 the id's milliseconds
    seq     int64                 the id's sequence number
    fields  map<string, binary>   the entry's field names and values, binary-safe

and ``retain.format`` = 1 and ``retain.stream`` in its key-value metadata.
:func:`read_tables` reads the rows of an id range and turns them into the
columns of :data:`~retain.archive.columns.FILE_SCHEMA`, so that a merge-read and
a migration treat them as they treat the table's own files.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from retain.archive._boundary import reading_file
from retain.archive.columns import from_binary_map
from retain.archive.files import ROW_GROUP_ROWS
from retain.archive.files import read_tables as read_file_tables
from retain.ids import StreamId

__all__ = ["SCHEMA", "read_tables"]

SCHEMA = pa.schema([
    pa.field("ms", pa.int64(), nullable=False),
    pa.field("seq", pa.int64(), nullable=False),
    pa.field("fields", pa.map_(pa.string(), pa.binary()), nullable=False),
])


def read_tables(parquet: pq.ParquetFile, name: str, stream: str, low: StreamId, high: StreamId,
                batch_rows: int = ROW_GROUP_ROWS) -> Iterator[pa.Table]:
    """The rows of segment ``name`` with ids in ``low..high``, ``batch_rows`` at a time at most, as the table's columns."""
    for table in read_file_tables(parquet, name, low, high, batch_rows=batch_rows):
        with reading_file(name):
            yield from_binary_map(table.column("ms"), table.column("seq"), table.column("fields"), stream)
