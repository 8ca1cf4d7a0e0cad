"""Moving a format-1 archive (manifests and segments) into the table, every id verified once.

:func:`migrate` reads each stream's current manifest and, in id order, every
segment it lists; writes the rows into the table's files (up to
``file_entries`` a file) in the table's columns; reads each file back and
checks it holds exactly the ids that went in; and checks over the whole
stream that the ids only grow (no id twice, none out of order), that each
segment held the count its manifest says, and that the last id is the
manifest's W. Then **one** commit adds every stream's files and sets each
stream's W to its manifest's: the archive is migrated whole or not at all. A
migration that stops half-way leaves files no commit lists (vacuum removes
them); run it again. A stream the table already holds at that W or beyond is
left as it is, so running it twice changes nothing.

The format-1 objects stay where they are: still readable by an older retain,
and removed by the next maintenance's vacuum once older than its retention.
Stop the daemons that fold into the archive while it runs.

Example:
    >>> migrate(Archive("/var/lib/retain/archive")).entries
    1830411
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from retain.archive.files import FileWriter, open_parquet, read_tables
from retain.archive.legacy import segments as legacy_segments
from retain.archive.legacy.manifest import Manifest
from retain.archive.table import Advance, Archive, ArchivedFile
from retain.errors import ArchiveCorrupt, InvalidInput
from retain.ids import StreamId
from retain.streams.keys import RawKey

__all__ = ["IdCheck", "MigratedStream", "MigrationReport", "migrate"]

DEFAULT_FILE_ENTRIES = 1_000_000


@dataclass(frozen=True)
class MigratedStream:
    """One stream's move: what its manifest listed, and the files it became."""

    stream: str
    entries: int
    segments: int
    files: int
    watermark: StreamId | None
    #: True when the table already held the stream at that W or beyond: nothing was done
    skipped: bool = False


@dataclass(frozen=True)
class MigrationReport:
    """One run of :func:`migrate`."""

    streams: tuple[MigratedStream, ...]
    #: the table's version after the migration's commit (-1: nothing to commit)
    version: int
    elapsed: float

    @property
    def entries(self) -> int:
        """Entries moved (skipped streams not counted)."""
        return sum(stream.entries for stream in self.streams if not stream.skipped)


def migrate(archive: Archive, *, file_entries: int = DEFAULT_FILE_ENTRIES) -> MigrationReport:
    """Turn the format-1 objects of ``archive``'s store into the table (see the module docstring).

    Raises:
        InvalidInput: ``file_entries`` not a whole number >= 1, before any I/O.
        ArchiveCorrupt: a segment breaks its manifest (a count, an id out of
            order or twice, a row outside its range), or a written file does not
            read back the ids that went in; nothing is committed.
        ArchiveError: the store or the table failed; nothing is committed.
    """
    if isinstance(file_entries, bool) or not isinstance(file_entries, int) or file_entries < 1:
        raise InvalidInput(f"file_entries must be a whole number >= 1 (got {file_entries!r})")
    started = time.monotonic()
    legacy = archive.legacy()
    target = archive.as_table()
    keys = legacy.streams()
    _, watermarks = target.watermarks(RawKey(key) for key in keys)
    moved: list[MigratedStream] = []
    advances: list[Advance] = []
    for key in keys:
        manifest = legacy.manifest(key)
        present = watermarks[key]
        if present is not None and (manifest.watermark is None or present >= manifest.watermark):
            moved.append(MigratedStream(key, manifest.entries, len(manifest.segments), 0, manifest.watermark, True))
            continue
        if present is not None:
            raise ArchiveCorrupt(f"the table holds {key!r} up to {present} and format 1 up to {manifest.watermark}: "
                                 "both were written to; nothing is migrated")
        files = _moved(archive, target, manifest, file_entries)
        moved.append(MigratedStream(key, manifest.entries, len(manifest.segments), len(files), manifest.watermark))
        if files and manifest.watermark is not None:
            advances.append(Advance(key, None, manifest.watermark, files))
    version = target.commit(advances, operation="migrate") if advances else -1
    archive.reload()
    return MigrationReport(tuple(moved), version, time.monotonic() - started)


class IdCheck:
    """The ids that went into one file, and the check that they only grow across the whole stream."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.last: StreamId | None = None
        self.ms: list[pa.Array] = []
        self.seq: list[pa.Array] = []

    def add(self, table: pa.Table, where: str) -> None:
        ms, seq = table.column("ms").combine_chunks(), table.column("seq").combine_chunks()
        first = StreamId(ms[0].as_py(), seq[0].as_py())
        if self.last is not None and first <= self.last:
            raise ArchiveCorrupt(f"{where} of {self.key!r} starts at {first}, not after {self.last}")
        if len(ms) > 1:
            before_ms, after_ms = ms.slice(0, len(ms) - 1), ms.slice(1)
            before_seq, after_seq = seq.slice(0, len(seq) - 1), seq.slice(1)
            grows = pc.or_(pc.greater(after_ms, before_ms),
                           pc.and_(pc.equal(after_ms, before_ms), pc.greater(after_seq, before_seq)))
            if not pc.all(grows).as_py():
                raise ArchiveCorrupt(f"{where} of {self.key!r} holds an id twice or out of order")
        self.last = StreamId(ms[-1].as_py(), seq[-1].as_py())
        self.ms.append(ms)
        self.seq.append(seq)

    def check(self, target: Archive, file: ArchivedFile) -> None:
        """The stored file reads back exactly the ids that went into it, in order."""
        stream = RawKey(self.key)
        parquet = target.open_file(file)
        try:
            back = pa.concat_tables(read_tables(parquet, file.path, file.first, file.last, columns=["ms", "seq"]))
        finally:
            parquet.close(force=True)
        if not (back.column("ms").combine_chunks().equals(pa.concat_arrays(self.ms))
                and back.column("seq").combine_chunks().equals(pa.concat_arrays(self.seq))):
            raise ArchiveCorrupt(f"data file {file.path} of {stream.key!r} does not read back the ids written to it")
        self.ms, self.seq = [], []


def _moved(archive: Archive, target: Archive, manifest: Manifest, file_entries: int) -> tuple[ArchivedFile, ...]:
    """Write the rows of every segment of ``manifest`` into checked files of the table (not yet committed)."""
    key = manifest.stream
    stream = RawKey(key)
    legacy = archive.legacy()
    ids = IdCheck(key)
    files: list[ArchivedFile] = []
    writer = FileWriter(key, table_format=target.format)

    def close_file() -> None:
        nonlocal writer
        if writer.count:
            stored = target.put_file(stream, writer.finish())
            ids.check(target, stored)
            files.append(stored)
        writer = FileWriter(key, table_format=target.format)

    for segment in manifest.segments:
        path = legacy.segment_path(key, segment)
        where = f"segment {segment.name}"
        parquet = open_parquet(archive.location.source(path, segment.size), path)
        rows = 0
        try:
            for table in legacy_segments.read_tables(parquet, path, key, StreamId(0, 0), StreamId(2**63 - 1, 2**63 - 1)):
                ids.add(table, where)
                rows += table.num_rows
                writer.add_table(table)
                if writer.count >= file_entries:
                    close_file()
        finally:
            parquet.close(force=True)
        if rows != segment.count or ids.last != segment.last:
            raise ArchiveCorrupt(f"{where} of {key!r} holds {rows} rows up to {ids.last}; its manifest says "
                                 f"{segment.count} up to {segment.last}")
    close_file()
    if ids.last != manifest.watermark:
        raise ArchiveCorrupt(f"the segments of {key!r} end at {ids.last}, not at its W {manifest.watermark}")
    return tuple(files)
