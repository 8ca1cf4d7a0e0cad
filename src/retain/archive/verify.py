"""Checking a whole archive: every data file readable, every page checksum, W consistent with the data.

:func:`verify` reads every file the table's log lists, in full (each Parquet
page's CRC is verified as it is read), and checks, stream by stream:

- the file is in the store and decodes (a missing or damaged object is named);
- its rows are the ids its name says, in strictly increasing order, as many as
  the log says it holds;
- files do not overlap, and none holds ids above W;
- W is the last id of the last file (unless expiry removed the stream's newest
  rows, or the files were all expired);
- with a Redis connection, that the live stream has not lost entries W does
  not cover (:func:`retain.archive.gap.gap`); a stream where that cannot be
  known is named as unverifiable, with the reason
  (:func:`retain.archive.gap.unverifiable`), never passed over in silence.

Every problem is a :class:`Damage` naming the object (a data file's path, the
table's log, or a stream); nothing is repaired.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from retain._redis import RedisLike
from retain.archive._boundary import reading_file
from retain.archive.gap import gap, live_infos, unverifiable
from retain.archive.table import Archive, ArchivedFile
from retain.errors import ArchiveError, RetainError
from retain.ids import StreamId
from retain.streams.keys import RawKey

__all__ = ["Damage", "VerifyReport", "verify"]


@dataclass(frozen=True)
class Damage:
    """One damaged object: what it is (a data file's path, ``_delta_log``, ``stream <key>``) and what is wrong."""

    object: str
    problem: str

    def __str__(self) -> str:
        return f"{self.object}: {self.problem}"


@dataclass
class VerifyReport:
    """What :func:`verify` checked and found."""

    url: str
    version: int = -1
    streams: int = 0
    files: int = 0
    rows: int = 0
    damage: list[Damage] = field(default_factory=list)
    #: stream key -> why the gap check cannot tell whether the live stream lost entries after W
    unverifiable: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.damage


def verify(archive: Archive, conn: RedisLike | None = None, *,
           progress: Callable[[str, ArchivedFile], None] | None = None) -> VerifyReport:
    """Check every file and stream of ``archive`` (see the module docstring); ``conn`` adds the gap check.

    ``progress(stream, file)`` is called before each file is read. Never raises for damage: each one is in
    the report. Raises only what makes the check itself impossible (a Redis that cannot be reached).
    """
    report = VerifyReport(archive.url)
    try:
        keys = archive.streams()
        report.version = archive.version
    except ArchiveError as error:
        report.damage.append(Damage("_delta_log", f"the table's log cannot be read: {error}"))
        return report
    infos = live_infos(conn, keys, table_id=archive.table_id) if conn is not None else {}
    for key in keys:
        report.streams += 1
        _verify_stream(archive, key, report, progress)
        if conn is not None:
            watermark, ordinal = archive.positions([RawKey(key)])[key]
            missing = gap(key, infos.get(key), watermark, ordinal)
            unknown = unverifiable(infos.get(key), watermark, ordinal)
            if missing is not None:
                report.damage.append(Damage(f"stream {key}", str(missing)))
            elif unknown is not None:
                report.unverifiable[key] = unknown
    return report


def _verify_stream(archive: Archive, key: str, report: VerifyReport,
                   progress: Callable[[str, ArchivedFile], None] | None) -> None:
    stream = RawKey(key)
    try:
        state = archive.state(stream)
    except ArchiveError as error:
        report.damage.append(Damage(f"stream {key}", str(error)))
        return
    last: StreamId | None = None
    for file in state.files:
        report.files += 1
        if progress is not None:
            progress(key, file)
        try:
            rows = _read_whole(archive, file)
        except RetainError as error:
            report.damage.append(Damage(file.path, str(error)))
            continue
        report.rows += rows.num_rows
        problem = _rows_problem(key, file, rows)
        if problem is not None:
            report.damage.append(Damage(file.path, problem))
        if state.watermark is not None and file.last > state.watermark:
            report.damage.append(Damage(file.path, f"holds ids up to {file.last}, above the stream's W "
                                                   f"{state.watermark}: the log's W went back"))
        last = file.last
    if state.watermark is not None and last is not None and last < state.watermark \
            and state.expired_before is None:
        report.damage.append(Damage(f"stream {key}", f"W is {state.watermark} but the newest data file ends at "
                                                     f"{last}: the rows in between are missing"))


def _read_whole(archive: Archive, file: ArchivedFile) -> pa.Table:
    """Every row's id (and a format-3 file's key) of ``file``, having read (and so checksummed) every page of
    every column."""
    parquet = archive.open_file(file)
    try:
        with reading_file(file.path):
            whole = parquet.read()
            if file.format >= 3:
                return whole.select(["stream", "ms", "seq"])
            return whole.select(["ms", "seq"]) if file.format == 2 else whole
    finally:
        parquet.close(force=True)


def _rows_problem(key: str, file: ArchivedFile, rows: pa.Table) -> str | None:
    if file.format < 2:
        return None
    if rows.num_rows != file.count:
        return f"holds {rows.num_rows} rows, the table's log says {file.count}"
    if not rows.num_rows:
        return "holds no rows"
    if file.format >= 3 and pc.any(pc.not_equal(rows.column("stream"), pa.scalar(key))).as_py():
        return f"holds rows whose stream is not {key!r}"
    ms, seq = rows.column("ms"), rows.column("seq")
    first = StreamId(ms[0].as_py(), seq[0].as_py())
    last = StreamId(ms[-1].as_py(), seq[-1].as_py())
    if (first, last) != (file.first, file.last):
        return f"holds ids {first}..{last}, its name says {file.first}..{file.last}"
    if rows.num_rows > 1:
        ms_values, seq_values = ms.combine_chunks(), seq.combine_chunks()
        earlier_ms, later_ms = ms_values[:-1], ms_values[1:]
        earlier_seq, later_seq = seq_values[:-1], seq_values[1:]
        increasing = pc.or_(pc.less(earlier_ms, later_ms),
                            pc.and_(pc.equal(earlier_ms, later_ms), pc.less(earlier_seq, later_seq)))
        if not pc.all(increasing).as_py():
            return "its ids are not in strictly increasing order"
    return None
