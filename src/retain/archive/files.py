"""The table's data files: Parquet bytes written from stream entries, and read back checked (no I/O of their own).

A data file holds a run of one stream's entries in id order: the stream's key
(``stream``, one dictionary value: a few bytes per file), then the columns of
:data:`~retain.archive.columns.FILE_SCHEMA`, compressed with zstd, in row
groups of at most :data:`ROW_GROUP_ROWS` rows, with a CRC checksum on every
page. ``stream``, ``id``, ``ms``, ``seq`` and ``ts`` carry min/max statistics
per row group (a reader skips row groups on them); the field names are
dictionary-encoded. The file's key-value metadata carries ``retain.format``
(3) and ``retain.stream``. A file of a format-2 table has no ``stream`` column
(its folder named the stream). :class:`EncodedFile` also carries the
statistics Delta keeps per file in its log (``numRecords``, min/max and null
counts): with ``stream``'s, a reader that filters on a stream skips the other
streams' files.

Reading goes through :func:`open_parquet`: the one place a file is opened, with
every page's checksum verified, so that a damaged file is
:class:`~retain.errors.ArchiveCorrupt` naming the object and never a silent
gap or a raw library error.

Example:
    >>> writer = FileWriter("emq:{q}:stream:s")
    >>> writer.add(conn.xrange("emq:{q}:stream:s", count=1000))
    >>> encoded = writer.finish()          # EncodedFile: first, last, count, data, stats
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import accumulate, chain, repeat
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pa_dataset
import pyarrow.fs as pa_fs
import pyarrow.parquet as pq

from retain.archive._boundary import reading_file
from retain.archive.columns import (
    FILE_SCHEMA,
    STREAM_FIELD,
    Arrays,
    Entry,
    Text,
    chunk_arrays,
    entries_of,
    entries_table,
)
from retain.archive.layout import FORMAT
from retain.ids import StreamId

__all__ = ["FORMAT_VERSION", "ROW_GROUP_ROWS", "EncodedFile", "FileWriter", "encode_runs", "open_parquet",
           "read_entries", "read_tables", "scan_batches"]

#: the format of the archive: 1 was manifests and segments (:mod:`retain.archive.legacy`), 2 the table partitioned
#: by stream, 3 the table partitioned by a digest, the key in every file (:mod:`retain.archive.layout`)
FORMAT_VERSION = FORMAT
ROW_GROUP_ROWS = 10_000
_INT64_MAX = 2**63 - 1
#: the columns with statistics: what readers prune on
_STATISTICS = ["id", "ms", "seq", "ts"]
#: how pyarrow's scanner reads a data file: every page checksum verified, as open_parquet does
_SCAN = pa_dataset.ParquetFileFormat(
    default_fragment_scan_options=pa_dataset.ParquetFragmentScanOptions(page_checksum_verification=True))
_LOCAL = pa_fs.LocalFileSystem()


@dataclass(frozen=True)
class EncodedFile:
    """A data file ready to store: its id range, entry count, Parquet bytes and Delta statistics (JSON)."""

    first: StreamId
    last: StreamId
    count: int
    data: bytes
    stats: str
    #: the table format it was written for: 3 holds the ``stream`` column, 2 does not
    format: int = FORMAT


class _Statistics:
    """Min, max and null counts over the row groups of one file, as Delta's log keeps them."""

    def __init__(self) -> None:
        self.rows = 0
        self.low: dict[str, Any] = {}
        self.high: dict[str, Any] = {}
        self.text_nulls = self.binary_nulls = 0

    @classmethod
    def of(cls, rows: int, low: dict[str, Any], high: dict[str, Any], text_nulls: int,
           binary_nulls: int) -> _Statistics:
        """Statistics already computed (:func:`encode_runs` computes every file's at once)."""
        statistics = cls()
        statistics.rows, statistics.low, statistics.high = rows, low, high
        statistics.text_nulls, statistics.binary_nulls = text_nulls, binary_nulls
        return statistics

    def add(self, table: pa.Table) -> None:
        self.rows += table.num_rows
        for name in _STATISTICS:
            found = pc.min_max(table.column(name))
            low, high = found["min"].as_py(), found["max"].as_py()
            self.low[name] = low if name not in self.low else min(self.low[name], low)
            self.high[name] = high if name not in self.high else max(self.high[name], high)
        self.text_nulls += table.column("fields").null_count
        self.binary_nulls += table.column("fields_binary").null_count

    def to_json(self, stream: str | None) -> str:
        """Delta's statistics of the file; with ``stream``, that of its ``stream`` column (format 3)."""
        def shown(values: dict[str, Any]) -> dict[str, Any]:
            key = {"stream": stream} if stream is not None else {}
            return key | {name: _instant(value) if isinstance(value, datetime) else value
                          for name, value in values.items()}

        nulls = {"stream": 0} if stream is not None else {}
        return json.dumps({"numRecords": self.rows, "minValues": shown(self.low), "maxValues": shown(self.high),
                           "nullCount": nulls | {"id": 0, "ms": 0, "seq": 0, "ts": 0, "fields": self.text_nulls,
                                                 "fields_binary": self.binary_nulls}}, separators=(",", ":"))


def _instant(value: datetime) -> str:
    # Delta's statistics hold timestamps as ISO 8601 with milliseconds, in UTC.
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"


class FileWriter:
    """Build one data file of stream ``stream``, a row group of :data:`ROW_GROUP_ROWS` rows at a time.

    Entries come in id order, each chunk after the last: XRANGE chunks
    (:meth:`add`) or rows already in the file's columns (:meth:`add_table`).
    A chunk becomes Arrow arrays as it comes; the columns of a row group are
    computed, and the row group compressed and written, on ``encoder`` when one
    is given (a single-thread executor: off the read loop, in order; Arrow and
    Parquet release the GIL), else at once. An error of that work (an entry the
    columns cannot hold) is raised by the next call, at the latest by :meth:`finish`.
    """

    def __init__(self, stream: str, *, row_group_rows: int = ROW_GROUP_ROWS, encoder: Executor | None = None,
                 table_format: int = FORMAT) -> None:
        self.stream = stream
        self.table_format = table_format
        self.row_group_rows = row_group_rows
        self.count = 0
        self.first: StreamId | None = None
        self.last: StreamId | None = None
        self._encoder = encoder
        self._pending: list[Arrays] = []
        self._pending_tables: list[pa.Table] = []
        self._pending_rows = 0
        self._writing: list[Future[None]] = []
        self._statistics = _Statistics()
        self._sink = pa.BufferOutputStream()
        self._writer = _parquet_writer(self._sink, stream, table_format)

    def add(self, entries: Sequence[Entry]) -> None:
        """Append a chunk of entries, as ``conn.xrange`` or the server returned them."""
        if not entries:
            return
        self._raise_failed()
        if self.first is None:
            self.first = StreamId.parse(entries[0][0])
        self.last = StreamId.parse(entries[-1][0])
        self.count += len(entries)
        self._pending.append(chunk_arrays(entries))
        self._pending_rows += len(entries)
        if self._pending_rows >= self.row_group_rows:
            self._flush()

    def add_table(self, table: pa.Table) -> None:
        """Append rows already in :data:`FILE_SCHEMA`, in id order, after the last ones added.

        Small tables (a compaction's many small files) gather into full row groups.
        """
        if not table.num_rows:
            return
        self._raise_failed()
        if self.first is None:
            self.first = StreamId(table.column("ms")[0].as_py(), table.column("seq")[0].as_py())
        self.last = StreamId(table.column("ms")[-1].as_py(), table.column("seq")[-1].as_py())
        self.count += table.num_rows
        self._pending_tables.append(table.select(FILE_SCHEMA.names).cast(FILE_SCHEMA))
        self._pending_rows += table.num_rows
        if self._pending_rows >= self.row_group_rows:
            self._flush()

    def _flush(self, *, now: bool = False) -> None:
        """Write the pending rows as a row group: on the encoder, or at once (``now``, or with none)."""
        if self._pending:
            pieces, self._pending, self._pending_rows = self._pending, [], 0
            self._submit(lambda: self._write(entries_table(pieces, self.stream)), now)
        elif self._pending_tables:
            tables, self._pending_tables, self._pending_rows = self._pending_tables, [], 0
            self._submit(lambda: self._write(pa.concat_tables(tables)), now)

    def _submit(self, work: Any, now: bool) -> None:
        if self._encoder is None or (now and not self._writing):
            work()
        else:
            self._writing.append(self._encoder.submit(work))

    def _write(self, table: pa.Table) -> None:
        self._statistics.add(table)
        self._writer.write_table(_stored(table, self.stream, self.table_format), row_group_size=self.row_group_rows)

    def _raise_failed(self) -> None:
        while self._writing and self._writing[0].done():
            self._writing.pop(0).result()

    def finish(self) -> EncodedFile:
        """Close the file and return it; at least one entry must have been added."""
        if self.first is None or self.last is None:
            raise ValueError("a data file needs at least one entry")
        self._flush(now=True)  # the caller waits for it anyway: no hand-over to the encoder when none is busy
        try:
            for future in self._writing:
                future.result()
        finally:
            self._writing = []
        self._writer.close()
        return EncodedFile(self.first, self.last, self.count, self._sink.getvalue().to_pybytes(),
                           self._statistics.to_json(_key_column(self.stream, self.table_format)), self.table_format)

    def abandon(self) -> None:
        """Drop the file (a fold that stops early): wait for the work in flight, ignoring its errors."""
        for future in self._writing:
            future.exception()
        self._writing = []


def _key_column(stream: str, table_format: int) -> str | None:
    """The value of the ``stream`` column of a file of ``stream``; None when the format has no such column."""
    return stream if table_format >= 3 else None


def _stored(table: pa.Table, stream: str, table_format: int) -> pa.Table:
    """Rows of :data:`FILE_SCHEMA` as a file of ``table_format`` holds them: format 3 puts the key first."""
    if table_format < 3:
        return table
    return table.add_column(0, STREAM_FIELD, pa.repeat(pa.scalar(stream, pa.string()), table.num_rows))


def _parquet_writer(sink: pa.BufferOutputStream, stream: str, table_format: int) -> pq.ParquetWriter:
    """A Parquet writer of one data file of ``stream`` into ``sink``, for a table of ``table_format``."""
    metadata = {b"retain.format": str(table_format).encode(), b"retain.stream": stream.encode()}
    key = ["stream"] if table_format >= 3 else []
    schema = pa.schema([STREAM_FIELD, *FILE_SCHEMA]) if key else FILE_SCHEMA
    # Dictionary pages for the key and the field names only (few, repeated); statistics for the key, the
    # ids and times only (what a reader prunes on): both cut the encoding time of a fold by a third. A CRC
    # on every page: a damaged file is caught when it is read, never decoded into other values.
    return pq.ParquetWriter(sink, schema.with_metadata(metadata), compression="zstd",
                            use_dictionary=key + ["fields.key_value.key", "fields_binary.key_value.key"],
                            write_statistics=key + _STATISTICS, write_page_checksum=True)


def encode_runs(runs: Sequence[tuple[str, Sequence[Entry]]], encoder: Executor | None = None, *,
                table_format: int = FORMAT) -> list[EncodedFile]:
    """One data file per run of ``(stream, entries)`` (entries in id order), the files :class:`FileWriter`
    makes, with the work done once for all of them.

    A beat of 1,000 streams folds 1,000 runs of a few entries each: made one by one, each file paid the
    conversion to Arrow, the columns and the statistics as fixed costs, and those were most of the beat.
    Here the entries become one table and every file's statistics come from one grouped aggregation; each
    file is a slice of that table, written as a Parquet file of its own, half of them on ``encoder`` when
    one is given.

    Raises:
        UnarchivableEntry: an entry of some run the columns cannot hold (:class:`FileWriter` run by run
            names the stream).
    """
    runs = [(stream, entries) for stream, entries in runs if entries]
    if not runs:
        return []
    lengths = [len(entries) for _, entries in runs]
    table = entries_table([chunk_arrays(list(chain.from_iterable(entries for _, entries in runs)))],
                          runs[0][0] if len(runs) == 1 else "one of several streams")
    jobs = list(zip(runs, accumulate(lengths, initial=0), _run_statistics(table, lengths), strict=False))

    def write(run: tuple[str, Sequence[Entry]], start: int, statistics: _Statistics) -> EncodedFile:
        stream, entries = run
        sink = pa.BufferOutputStream()
        writer = _parquet_writer(sink, stream, table_format)
        writer.write_table(_stored(table.slice(start, len(entries)), stream, table_format),
                           row_group_size=ROW_GROUP_ROWS)
        writer.close()
        return EncodedFile(StreamId.parse(entries[0][0]), StreamId.parse(entries[-1][0]), len(entries),
                           sink.getvalue().to_pybytes(), statistics.to_json(_key_column(stream, table_format)),
                           table_format)

    if encoder is None or len(jobs) < 2:
        return [write(*job) for job in jobs]
    # Half the files on the encoder's thread: Parquet encodes and compresses without the GIL.
    there = [encoder.submit(write, *job) for job in jobs[1::2]]
    here = [write(*job) for job in jobs[0::2]]
    files: list[EncodedFile] = []
    for index, made in enumerate(here):
        files.append(made)
        if index < len(there):
            files.append(there[index].result())
    return files


def _run_statistics(table: pa.Table, lengths: Sequence[int]) -> list[_Statistics]:
    """The statistics of each run of ``lengths`` consecutive rows of ``table``, in one grouped aggregation."""
    run = pa.array(list(chain.from_iterable(repeat(index, length) for index, length in enumerate(lengths))),
                   pa.int32())
    columns = {name: table.column(name) for name in _STATISTICS}
    grouped = pa.table({"run": run, **columns, "text_nulls": pc.is_null(table.column("fields")),
                        "binary_nulls": pc.is_null(table.column("fields_binary"))})
    found = grouped.group_by("run", use_threads=False).aggregate(
        [(name, "min_max") for name in _STATISTICS] + [("text_nulls", "sum"), ("binary_nulls", "sum")])
    order = found.column("run").to_pylist()
    bounds = {name: found.column(f"{name}_min_max").to_pylist() for name in _STATISTICS}
    text_nulls, binary_nulls = found.column("text_nulls_sum").to_pylist(), found.column("binary_nulls_sum").to_pylist()
    at = {index: row for row, index in enumerate(order)}
    return [_Statistics.of(length, {name: bounds[name][at[index]]["min"] for name in _STATISTICS},
                           {name: bounds[name][at[index]]["max"] for name in _STATISTICS},
                           text_nulls[at[index]], binary_nulls[at[index]])
            for index, length in enumerate(lengths)]


def open_parquet(source: Any, name: str) -> pq.ParquetFile:
    """Open a stored data file (a path or a file object) with every page checksum verified on read.

    Raises:
        ArchiveCorrupt: the bytes are not a Parquet file (naming ``name``).
        ArchiveObjectMissing: a local file that is not there.
    """
    with reading_file(name):
        return pq.ParquetFile(source, page_checksum_verification=True)


def _row_groups(parquet: pq.ParquetFile, low: StreamId, high: StreamId) -> list[tuple[int, Any]]:
    """The row groups whose ids may meet ``low..high``, with their ``ms`` statistics (the others are skipped)."""
    ms_column = parquet.schema_arrow.get_field_index("ms")
    found = []
    for index in range(parquet.num_row_groups):
        stats = parquet.metadata.row_group(index).column(ms_column).statistics
        if stats is not None and stats.has_min_max and (stats.max < low.ms or stats.min > high.ms):
            continue
        found.append((index, stats))
    return found


def scan_batches(parquet: pq.ParquetFile, path: str, name: str, low: StreamId, high: StreamId) -> Iterator[pa.RecordBatch]:
    """The rows of the local data file at ``path`` with ids in ``low..high``, as record batches.

    What :func:`read_tables` reads, decoded by pyarrow's scanner: the row groups
    in parallel, a few batches ahead (as fast as a dataset's ``to_table``, in
    bounded memory). Row groups are chosen on ``parquet``'s statistics.
    """
    with reading_file(name):
        groups = _row_groups(parquet, low, high)
        if not groups:
            return
        fragment = _SCAN.make_fragment(path, filesystem=_LOCAL, row_groups=[index for index, _ in groups])
        for batch in fragment.to_batches(schema=FILE_SCHEMA, batch_size=ROW_GROUP_ROWS, batch_readahead=4):
            if batch.num_rows and (_id_at(batch, 0) < low or _id_at(batch, -1) > high):
                batch = batch.filter(_within(batch, low, high))
            if batch.num_rows:
                yield batch


def _id_at(batch: pa.RecordBatch, row: int) -> StreamId:
    return StreamId(batch.column("ms")[row].as_py(), batch.column("seq")[row].as_py())


def read_tables(parquet: pq.ParquetFile, name: str, low: StreamId, high: StreamId,
                columns: Sequence[str] | None = None, batch_rows: int = ROW_GROUP_ROWS) -> Iterator[pa.Table]:
    """The rows of a data file with ids in ``low..high`` (both included), ``batch_rows`` at a time at most.

    Row groups wholly outside the range are skipped on their statistics, unread;
    the others are decoded as they are taken (a reader's first row costs a
    batch, not a row group).

    Raises:
        ArchiveCorrupt: a page fails its checksum, or a row group is not the file's columns (naming ``name``).
    """
    with reading_file(name):
        for index, stats in _row_groups(parquet, low, high):
            straddles = _straddles(stats, low, high)
            for batch in parquet.iter_batches(batch_size=batch_rows, row_groups=[index],
                                              columns=columns if columns is not None else FILE_SCHEMA.names):
                table = pa.Table.from_batches([batch])
                if columns is None and table.schema != FILE_SCHEMA and table.schema.names == FILE_SCHEMA.names:
                    table = table.cast(FILE_SCHEMA)  # the names Parquet gives a map's entries, and no file metadata
                if straddles:
                    table = table.filter(_within(table, low, high))
                if table.num_rows:
                    yield table


def read_entries(parquet: pq.ParquetFile, name: str, low: StreamId, high: StreamId,
                 text: Text = None) -> Iterator[Iterator[Entry]]:
    """The entries of a data file with ids in ``low..high``, a row group at a time, shaped as XRANGE's."""
    for table in read_tables(parquet, name, low, high):
        with reading_file(name):
            yield entries_of(table, text)


def _straddles(stats: Any, low: StreamId, high: StreamId) -> bool:
    # Only a row group whose ms range touches a bound needs a row-by-row filter.
    if stats is None or not stats.has_min_max:
        return True
    return bool(stats.min <= low.ms or stats.max >= high.ms)


def _within(table: pa.Table | pa.RecordBatch, low: StreamId, high: StreamId) -> pa.ChunkedArray:
    ms, seq = table.column("ms"), table.column("seq")
    # Arrow scalars: a Python int argument costs a failed import of dateutil per call (see columns.py).
    low_ms, low_seq = pa.scalar(min(low.ms, _INT64_MAX), pa.int64()), pa.scalar(min(low.seq, _INT64_MAX), pa.int64())
    keep = pc.or_(pc.greater(ms, low_ms), pc.and_(pc.equal(ms, low_ms), pc.greater_equal(seq, low_seq)))
    if high.ms <= _INT64_MAX:  # past int64 every stored id is below the bound
        high_ms, high_seq = pa.scalar(high.ms, pa.int64()), pa.scalar(min(high.seq, _INT64_MAX), pa.int64())
        below = pc.or_(pc.less(ms, high_ms), pc.and_(pc.equal(ms, high_ms), pc.less_equal(seq, high_seq)))
        keep = pc.and_(keep, below)
    return keep
