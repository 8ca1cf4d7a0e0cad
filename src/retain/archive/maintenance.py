"""Maintenance: keep the cost of a fold and of a read flat over years, and let old rows expire.

A fold adds one small file and one commit per beat. Left alone, the files and
the log grow without end, and with them every checkpoint, every opening of
the table and every fold. :func:`maintain`, on a cadence of its own (the
driver runs it every :attr:`MaintenanceSettings.every`; ``retain archive
maintain`` by hand), per stream and then for the table:

1. **expiry**: with a ``max_age`` for the stream, the rows older than
   ``now - max_age`` leave the table: files wholly older are removed, the one
   that straddles the cutoff is rewritten without them
   (:func:`plan_expiry`); ``<key>/expired`` records the cutoff;
2. **compaction**: runs of consecutive small files are merged into one sorted
   file of at most ``target_file_entries`` (:func:`plan_compaction`;
   delta-rs's own compaction bins files by size and would not keep the id
   order a merge-read relies on);

   each a commit that removes the old files and adds the new, fenced by
   ``<key>/rewrite`` (two maintainers never both rewrite a stream);
3. **checkpoint**, so that opening the table reads one file, not the commits;
4. **log cleanup**: commits older than ``log_retention`` (and the latest
   checkpoint) are deleted, and those before the newest checkpoint that
   :data:`~retain.archive.log_trim.LOG_KEEP_COMMITS` commits follow
   (:mod:`retain.archive.log_trim`);
5. **vacuum**: files compacted away or expired are deleted once
   ``vacuum_retention`` has passed since (a merge-read that finds one gone
   lists the files again and reads on from the compacted file), and files no
   commit ever listed (a fold that crashed or lost its race) an hour after
   they were written. The files this maintenance replaced are younger than
   that: :func:`vacuum_replaced` removes them ``vacuum_retention`` later (the
   driver's maintainer runs it then), rather than the next maintenance;
6. **memory**: Arrow's pool gives back what the rewrites allocated
   (:func:`release_memory`): a compaction reads and writes whole files, and
   the pool kept that memory for the process's life (RSS +30% after one
   compaction of 295 files, in a soak).

The plans are pure; the rest is I/O.

Example:
    >>> maintain(archive, MaintenanceSettings(max_age=timedelta(days=400)), now=utc_now())
    MaintenanceReport(at=..., streams=(StreamMaintenance(stream='emq:{q}:stream:s', compacted=600, ...),), ...)
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from retain._fields import Where
from retain.archive.files import FileWriter
from retain.archive.table import (
    DEFAULT_LOG_RETENTION,
    DEFAULT_VACUUM_RETENTION,
    TABLE_PROPERTIES,
    Archive,
    ArchivedFile,
    Rewrite,
    StreamState,
    delta_interval,
)
from retain.errors import ArchiveConflict, ArchiveError, InvalidArchive
from retain.ids import epoch_ms
from retain.streams.keys import RawKey, Stream, key_of
from retain.windows import require_aware

__all__ = ["MaintenanceReport", "MaintenanceSettings", "StreamMaintenance", "checkpoint_interval",
           "compact_on_interval", "maintain", "plan_compaction", "plan_expiry", "preview_maintenance",
           "release_memory", "vacuum_replaced"]

log = logging.getLogger(__name__)

DEFAULT_EVERY = timedelta(minutes=5)
DEFAULT_TARGET_FILE_ENTRIES = 1_000_000
#: a table's checkpoint interval when its properties name none (delta-rs's default)
DEFAULT_CHECKPOINT_INTERVAL = 100
#: a fold compacts its stream every this many checkpoint intervals (every 100 commits at retain's 10)
COMPACT_EVERY_CHECKPOINTS = 10
#: the largest file a fold's own compaction makes: a file of half of it or more is never rewritten by a fold
#: again (the driver's maintenance merges those into files of target_file_entries)
FOLD_COMPACTION_ENTRIES = 100_000


def _empty() -> Mapping[str, timedelta]:
    return MappingProxyType({})


@dataclass(frozen=True)
class MaintenanceSettings:
    """How and how often an archive is maintained; checked at construction (``InvalidArchive``)."""

    #: how often the retention driver maintains its archive (None: never by itself; ``retain archive maintain``)
    every: timedelta | None = DEFAULT_EVERY
    #: compaction merges consecutive files into files of at most this many entries
    target_file_entries: int = DEFAULT_TARGET_FILE_ENTRIES
    #: the log keeps each commit this long (then, once checkpointed, it is cleaned up)
    log_retention: timedelta = DEFAULT_LOG_RETENTION
    #: a file compacted away or expired stays in the store at least this long after (a read that still
    #: lists it, and is slower, lists the files again and reads on from the compacted one)
    vacuum_retention: timedelta = DEFAULT_VACUUM_RETENTION
    #: rows older than this expire from every stream (None: they never do)
    max_age: timedelta | None = None
    #: stream key -> its own max_age, instead of ``max_age``
    max_age_by: Mapping[str, timedelta] = field(default_factory=_empty)

    def __post_init__(self) -> None:
        where = Where("", InvalidArchive)
        for name in ("every", "log_retention", "vacuum_retention"):
            value = getattr(self, name)
            if name == "every" and value is None:
                continue
            if not isinstance(value, timedelta) or value <= timedelta(0):
                where.refuse(name, "a positive timedelta", value)
        if isinstance(self.target_file_entries, bool) or not isinstance(self.target_file_entries, int) or \
                self.target_file_entries < 1:
            where.refuse("target_file_entries", "a whole number >= 1", self.target_file_entries)
        for key, age in [("max_age", self.max_age), *self.max_age_by.items()]:
            if age is not None and (not isinstance(age, timedelta) or age <= timedelta(0)):
                where.refuse(key if key == "max_age" else f"max_age_by[{key!r}]", "a positive timedelta", age)
        object.__setattr__(self, "max_age_by", MappingProxyType(dict(self.max_age_by)))

    def max_age_of(self, key: str) -> timedelta | None:
        """How old a row of stream ``key`` may grow before it expires (None: never)."""
        return self.max_age_by.get(key, self.max_age)


@dataclass(frozen=True)
class StreamMaintenance:
    """What maintenance did (or, in a dry run, would do) to one stream's files."""

    stream: str
    #: rows before this millisecond expired this time (None: no expiry ran)
    expired_before: int | None = None
    #: entries and files that expired
    expired: int = 0
    expired_files: int = 0
    #: files merged by compaction, and the files they became
    compacted: int = 0
    compacted_into: int = 0
    #: a rival maintainer rewrote the stream first: left to it this time
    conflict: ArchiveConflict | None = None


@dataclass(frozen=True)
class MaintenanceReport:
    """One maintenance of an archive."""

    at: datetime
    streams: tuple[StreamMaintenance, ...]
    #: the log after it: objects and bytes
    log_objects: int
    log_bytes: int
    #: files the vacuum deleted (in a dry run: would delete)
    vacuumed: int
    elapsed: float
    dry_run: bool = False

    @property
    def replaced(self) -> bool:
        """Whether it removed files from the table (compacted or expired some): a vacuum then has work."""
        return not self.dry_run and any(stream.compacted or stream.expired for stream in self.streams)

    def summary(self) -> str:
        """One line for a log."""
        expired = sum(stream.expired for stream in self.streams)
        compacted = sum(stream.compacted for stream in self.streams)
        into = sum(stream.compacted_into for stream in self.streams)
        compact, expire, vacuum = ("would compact", "would expire", "would vacuum") if self.dry_run else (
            "compacted", "expired", "vacuumed")
        return (f"maintenance at {self.at.isoformat(timespec='seconds')}: {compact} {compacted} files into {into}, "
                f"{expire} {expired} entries, {vacuum} {self.vacuumed} files; log {self.log_objects} objects, "
                f"{self.log_bytes} bytes; {self.elapsed:.2f} s")


def plan_expiry(files: Sequence[ArchivedFile], cutoff_ms: int) -> tuple[tuple[ArchivedFile, ...], ArchivedFile | None]:
    """The files wholly before ``cutoff_ms`` (all their rows expire), and the one that straddles it.

    Pure. ``files`` are one stream's, in id order.
    """
    whole = tuple(file for file in files if file.last.ms < cutoff_ms)
    straddling = next((file for file in files if file.first.ms < cutoff_ms <= file.last.ms), None)
    return whole, straddling


def plan_compaction(files: Sequence[ArchivedFile], target_entries: int) -> tuple[tuple[ArchivedFile, ...], ...]:
    """Runs of two or more consecutive small files whose entries add up to at most ``target_entries``.

    Pure. ``files`` are one stream's, in id order; each run becomes one file,
    in the same place in the order, so files stay sorted and apart. A file of
    half the target or more is left as it is, and ends a run: a large file is
    not rewritten over and over to take in a few small ones.

    Example:
        >>> [len(run) for run in plan_compaction(files_of_sizes([10, 10, 10, 990, 5, 5]), 1000)]
        [3, 2]
    """
    runs: list[tuple[ArchivedFile, ...]] = []
    run: list[ArchivedFile] = []
    total = 0
    for file in files:
        large = file.count * 2 >= target_entries
        if run and (large or total + file.count > target_entries):
            if len(run) > 1:
                runs.append(tuple(run))
            run, total = [], 0
        if large:
            continue  # full enough: never rewritten again
        run.append(file)
        total += file.count
    if len(run) > 1:
        runs.append(tuple(run))
    return tuple(runs)


def maintain(archive: Archive, settings: MaintenanceSettings | None = None, *, now: datetime,
             dry_run: bool = False) -> MaintenanceReport:
    """Expire, compact, checkpoint, clean the log and vacuum ``archive`` as ``settings`` say (see the module).

    ``now`` is the instant expiry counts ages from. In a dry run nothing is
    written: the report says what would be done.

    Raises:
        InvalidWindow: a naive ``now``.
        ArchiveNeedsMigration: a format-1 archive.
        ArchiveError: the store or the table failed (a rival maintainer is no
            error: that stream is left to it, ``StreamMaintenance.conflict``).
    """
    require_aware(now, "now")
    settings = settings if settings is not None else MaintenanceSettings()
    started = time.monotonic()
    archive.check_writable()
    if not dry_run:
        archive.set_properties({**TABLE_PROPERTIES,
                                "delta.logRetentionDuration": delta_interval(settings.log_retention),
                                "delta.deletedFileRetentionDuration": delta_interval(settings.vacuum_retention)})
    streams = tuple(_stream(archive, key, settings, now, dry_run) for key in archive.streams())
    if not dry_run:
        archive.checkpoint()
        archive.clean_log(now)
    vacuumed = archive.vacuum(dry_run=dry_run)
    objects, size = archive.log_size()
    release_memory()
    return MaintenanceReport(now, streams, objects, size, len(vacuumed), time.monotonic() - started, dry_run)


def vacuum_replaced(archive: Archive) -> int:
    """Vacuum ``archive`` (files removed ``vacuum_retention`` ago or more, orphans an hour old), then give
    Arrow's memory back; how many files went. What a maintenance that replaced files is followed by."""
    removed = len(archive.vacuum())
    release_memory()
    return removed


def release_memory() -> None:
    """Give the memory Arrow's default pool holds unused back to the system (jemalloc and mimalloc keep it)."""
    pa.default_memory_pool().release_unused()


def preview_maintenance(archive: Archive, key: str, settings: MaintenanceSettings, *,
                        now: datetime) -> StreamMaintenance:
    """What :func:`maintain` would do to stream ``key`` now (expiry and compaction), doing nothing."""
    require_aware(now, "now")
    if archive.format == 1:
        return StreamMaintenance(key)  # a format-1 archive is not maintained: migrate it first
    return _stream(archive, key, settings, now, dry_run=True)


def _stream(archive: Archive, key: str, settings: MaintenanceSettings, now: datetime,
            dry_run: bool) -> StreamMaintenance:
    stream = RawKey(key)
    report: dict[str, Any] = {}
    try:
        age = settings.max_age_of(key)
        state = archive.state(stream)
        files = state.files
        if age is not None:
            expiry, files = _expire(archive, state, epoch_ms(now - age, "the expiry cutoff"), dry_run)
            report.update(expiry)
            if not dry_run:
                state = archive.state(stream)
                files = state.files
        report.update(_compact(archive, state, files, settings.target_file_entries, dry_run))
    except ArchiveConflict as conflict:
        report["conflict"] = conflict
    return StreamMaintenance(key, **report)


def _compact(archive: Archive, state: StreamState, files: tuple[ArchivedFile, ...], target_file_entries: int,
             dry_run: bool) -> dict[str, Any]:
    """Merge the runs of small files of ``state`` (``files``: as they are now) into one file each."""
    runs = plan_compaction(files, target_file_entries)
    if runs and not dry_run:
        merged = tuple(_merged(archive, state, run) for run in runs)
        archive.commit([Rewrite(state.stream, state.rewrites, tuple(file for run in runs for file in run), merged)],
                       operation="compact")
    return {"compacted": sum(len(run) for run in runs), "compacted_into": len(runs)}


def checkpoint_interval(archive: Archive) -> int:
    """The table's ``delta.checkpointInterval``: every how many commits a writer checkpoints (100 if unset)."""
    value = archive.properties().get("delta.checkpointInterval", "")
    return int(value) if value.isdigit() and int(value) > 0 else DEFAULT_CHECKPOINT_INTERVAL


def compact_on_interval(archive: Archive, stream: Stream, versions: Sequence[int], *,
                        now: datetime) -> StreamMaintenance | None:
    """After a fold's commits (``versions``): when one reaches every :data:`COMPACT_EVERY_CHECKPOINTS`-th
    checkpoint interval (a commit delta-rs checkpoints after), compact ``stream``'s small files into files
    of at most :data:`FOLD_COMPACTION_ENTRIES` and clean the log, as maintenance does.

    A table written by scripts alone (``fold``, ``fold_then_trim``, ``retain archive fold``) has no driver
    to maintain it: each fold adds a file, and delta-rs's work per commit grows with the files the table
    lists, and with the objects of its log (:mod:`retain.archive.log_trim`: the log is cleaned here as well,
    ``now`` the instant its age counts from). Compacting every few checkpoints keeps the files few (21
    rather than 2,000 after 2,000 folds);
    files of half the fold's target are left alone, so a fold never rewrites more than that. The replaced
    files stay in the store until a vacuum (``retain archive maintain``). The fold's commits are in
    whatever happens here: a rival maintainer rewriting the stream first is no error, and a store failing
    is logged and left to the next time. None: no commit reached it, or the store failed.
    """
    if not versions:
        return None
    every = checkpoint_interval(archive) * COMPACT_EVERY_CHECKPOINTS
    if not any((version + 1) % every == 0 for version in versions):
        return None
    key = key_of(stream)
    try:
        try:
            state = archive.state(stream)
            done = StreamMaintenance(key, **_compact(archive, state, state.files, FOLD_COMPACTION_ENTRIES, False))
        except ArchiveConflict as conflict:
            done = StreamMaintenance(key, conflict=conflict)
        archive.clean_log(now)
    except ArchiveError as error:
        log.warning("the small files of %s were not compacted, or the log not cleaned, after its fold (the "
                    "fold went through; the next interval tries again): %s", key, error)
        return None
    return done


def _expire(archive: Archive, state: StreamState, cutoff: int,
            dry_run: bool) -> tuple[dict[str, Any], tuple[ArchivedFile, ...]]:
    """Expire the rows of ``state`` before ``cutoff``; also the files as they are after (a dry run: would be)."""
    whole, straddling = plan_expiry(state.files, cutoff)
    if not whole and straddling is None:
        return {}, state.files
    stream = RawKey(state.stream)
    kept: tuple[ArchivedFile, ...] = ()
    expired = sum(file.count for file in whole)
    if straddling is not None:
        writer = FileWriter(state.stream, table_format=archive.format)
        for table in archive.tables(stream, straddling, straddling.first, straddling.last):
            young = table.filter(pc.greater_equal(table.column("ms"), cutoff))
            expired += table.num_rows - young.num_rows
            writer.add_table(young)
        if writer.count and dry_run:
            kept = (replace(straddling, count=writer.count),)  # as it would be: only its size counts in the plan
        elif writer.count:
            kept = (archive.put_file(stream, writer.finish()),)
    removed = whole + ((straddling,) if straddling is not None else ())
    if not dry_run:
        archive.commit([Rewrite(state.stream, state.rewrites, removed, kept, expired_before=cutoff)],
                       operation="expire")
    after = tuple(file for file in state.files if file not in removed)
    return ({"expired_before": cutoff, "expired": expired, "expired_files": len(whole)},
            tuple(sorted(after + kept, key=lambda file: file.first)))


def _merged(archive: Archive, state: StreamState, run: Sequence[ArchivedFile]) -> ArchivedFile:
    """One file holding the rows of ``run``, in order."""
    stream = RawKey(state.stream)
    writer = FileWriter(state.stream, table_format=archive.format)
    for file in run:
        for table in archive.tables(stream, file, file.first, file.last):
            writer.add_table(table)
    return archive.put_file(stream, writer.finish())
