"""The archive: one Delta Lake table of every archived stream, its watermarks held in app transactions.

:class:`Archive` opens the table at a URL (:mod:`~retain.archive.location` says
which) and keeps one snapshot of it, shared by the threads that use it:

- **W in constant time.** Each stream's watermark W is two app transactions
  (``<key>/ms``, ``<key>/seq``) of the snapshot. Before W is read, one check
  says whether the store holds a newer commit than the snapshot: the next
  version's log entry exists or it does not (a stat on a local disk, a HEAD
  on S3; versions are written create-only, so there is no gap to miss). Only
  when it exists is the snapshot brought up to date. A missing entry is
  trusted for 5 seconds after the snapshot was last brought up to date (no
  commit leaves the log sooner than twice that, :mod:`~retain.archive.log_trim`);
  after that, the first read brings it up to date (one listing) again.
- **The fence.** A commit goes through the same ``DeltaTable`` its W was read
  from, after checking in this process that the snapshot still holds that W;
  delta-rs then refuses a commit that another writer beat with the same app
  id (:class:`~retain.errors.ArchiveConflict`). delta-rs does not check that
  a version grows: :class:`Advance` does. Rewrites of a stream's files
  (compaction, expiry) are fenced the same way by ``<key>/rewrite``, since
  delta-rs accepts two commits removing the same file.
- **Reopened every** :data:`REOPEN_EVERY` **commits**: a ``DeltaTable`` kept
  open across many commits slows down commit after commit.

A format-1 archive (manifests and segments, :mod:`~retain.archive.legacy`) is
read through the same methods, and refused for writing
(:class:`~retain.errors.ArchiveNeedsMigration`) until ``retain archive
migrate`` makes it a table. A format-2 table (partitioned by the stream's key,
:mod:`~retain.archive.layout`) is read and written as it is until ``retain
archive migrate`` rewrites it as format 3; the format is the snapshot's, so a
process sees the change at its next refresh.

Example:
    >>> archive = Archive("s3://retain/archive", endpoint="http://127.0.0.1:8333",
    ...                   access_key_id="…", secret_access_key="…")
    >>> archive.watermark(StreamRef("codemojex", "activity"))
    StreamId(ms=1789171200999, seq=0)
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import pyarrow as pa
import pyarrow.dataset as pa_dataset
import pyarrow.parquet as pq
from deltalake import CommitProperties, DeltaTable, Transaction
from deltalake.transaction import AddAction, PostCommitHookProperties, RemoveAction

from retain.archive._boundary import translate_errors
from retain.archive.columns import TABLE_SCHEMA, TABLE_SCHEMA_2
from retain.archive.files import ROW_GROUP_ROWS, EncodedFile, open_parquet, read_tables, scan_batches
from retain.archive.layout import (
    DIGEST,
    FORMAT,
    STREAM,
    commit_path,
    expired_txn,
    file_name,
    file_range,
    ordinal_txn,
    partition_column,
    partition_values,
    rewrite_txn,
    watermark_txns,
)
from retain.archive.legacy import segments as legacy_segments
from retain.archive.legacy.store import LegacyStore
from retain.archive.location import Location
from retain.archive.log_check import diagnose
from retain.archive.log_trim import LOG_KEEP_COMMITS, LOG_TRIM_AGE, plan_log_trim
from retain.errors import (
    ArchiveConflict,
    ArchiveCorrupt,
    ArchiveError,
    ArchiveFenced,
    ArchiveObjectMissing,
    ArchiveUnavailable,
    InvalidInput,
)
from retain.ids import StreamId
from retain.streams.keys import Stream, key_of

__all__ = ["DEFAULT_LOG_RETENTION", "DEFAULT_VACUUM_RETENTION", "ORPHAN_RETENTION", "REOPEN_EVERY", "TABLE_PROPERTIES",
           "Advance", "Archive", "ArchivedFile", "Fence", "Rewrite", "StreamState", "delta_interval"]

#: commits after which the shared DeltaTable is opened afresh
REOPEN_EVERY = 100
#: how long the log keeps a commit, and a removed file is kept, unless maintenance is configured otherwise
DEFAULT_LOG_RETENTION = timedelta(minutes=5)
DEFAULT_VACUUM_RETENTION = timedelta(minutes=1)
#: a file no commit ever listed (a fold that crashed or lost its race) is deleted this long after it was
#: written, at the earliest: far longer than any fold takes from writing a file to committing it
ORPHAN_RETENTION = timedelta(hours=1)


def delta_interval(duration: timedelta) -> str:
    """A duration as a Delta table property writes one: ``interval 600 seconds``."""
    return f"interval {int(duration.total_seconds())} seconds"


#: the table's properties when retain creates it; maintenance sets the retentions it is configured with
TABLE_PROPERTIES = {
    # A checkpoint every 10 commits (Delta Lake's own default; delta-rs's is 100): delta-rs's work per commit
    # grows with the commits since the last checkpoint, and at 100 a 10-entry fold went from 12 to 29 ms
    # between two checkpoints (6-8 ms throughout at 10, measured over 1,000 folds).
    "delta.checkpointInterval": "10",
    "delta.logRetentionDuration": delta_interval(DEFAULT_LOG_RETENTION),
    "delta.deletedFileRetentionDuration": delta_interval(DEFAULT_VACUUM_RETENTION),
    # Commits never clean the log up themselves: maintenance does, on its own cadence.
    "delta.enableExpiredLogCleanup": "false",
    # Checkpoints hold each file's statistics as typed columns only, not also as a JSON string: 40% smaller
    # (delta-rs writes them uncompressed), and quicker to open.
    "delta.checkpoint.writeStatsAsJson": "false",
    "delta.checkpoint.writeStatsAsStruct": "true",
}
#: every commit still writes a checkpoint at the interval (so opening the table stays cheap), and cleans nothing
_HOOKS = PostCommitHookProperties(create_checkpoint=True, cleanup_expired_logs=False)


@dataclass(frozen=True)
class ArchivedFile:
    """One data file of a stream as the archive lists it: its path, id range, entry count and size in bytes."""

    path: str
    first: StreamId
    last: StreamId
    count: int
    size: int
    #: 3 for the table's files (2: of a format-2 table, without the ``stream`` column), 1 for a format-1 segment
    format: int = FORMAT
    #: Delta's statistics of a file this process wrote, for its Add action (JSON)
    stats: str = field(default="", repr=False, compare=False)


@dataclass(frozen=True)
class StreamState:
    """One stream in the archive as of one snapshot: W, its files, how far expiry reached."""

    stream: str
    #: W: the highest archived id, None when nothing is archived
    watermark: StreamId | None
    #: the stream's data files in id order (format 1: the current manifest's segments)
    files: tuple[ArchivedFile, ...] = ()
    #: the table's version (format 1: the manifest's number); -1 before the table exists
    version: int = -1
    #: rewrites of the stream's files so far (compaction, expiry)
    rewrites: int = 0
    #: rows with a millisecond before this one have expired (None: nothing expired)
    expired_before: int | None = None
    format: int = 2

    @property
    def entries(self) -> int:
        """Entries archived and not expired: the sum of the files' counts."""
        return sum(file.count for file in self.files)

    @property
    def size(self) -> int:
        """Bytes stored: the sum of the files' sizes."""
        return sum(file.size for file in self.files)


@dataclass(frozen=True)
class Fence:
    """A writer's claim on some streams, carried into every commit of them (a replica's lease of a shard).

    The commit writes ``token`` as the app transaction ``app_id``; a commit whose token is below the one the
    table already holds for ``app_id`` is refused (:class:`~retain.errors.ArchiveFenced`): a writer that took
    the claim since has committed, so the deposed one's late commit must not land. Tokens only grow.
    ``valid()`` says whether the writer still holds the claim by its own clock: a beat asks it before each
    step and starts none once it answers False.
    """

    app_id: str
    token: int
    valid: Callable[[], bool] = field(default=lambda: True, compare=False, repr=False)


@dataclass(frozen=True)
class Advance:
    """A fold's change to one stream: its files after W, and W moved from ``before`` to ``after``."""

    stream: str
    before: StreamId | None
    after: StreamId
    files: tuple[ArchivedFile, ...]
    #: W's ordinal after the change: it was the n-th entry ever added to the live stream (0: unknown)
    ordinal: int = 0
    #: the claim the folder holds on the stream, if it shares the work with replicas (its token goes in)
    fence: Fence | None = None

    def __post_init__(self) -> None:
        # delta-rs takes any version for an app id: that W only grows is checked here.
        if self.before is not None and self.after <= self.before:
            raise ArchiveError(f"W of {self.stream!r} may only grow: {self.before} -> {self.after} refused")
        for file in self.files:
            if (self.before is not None and file.first <= self.before) or file.last > self.after:
                raise ArchiveError(f"file {file.path} ({file.first}..{file.last}) of {self.stream!r} is not "
                                   f"between W {self.before} and {self.after}")


@dataclass(frozen=True)
class Rewrite:
    """A rewrite of one stream's files (compaction, expiry): ``removed`` replaced by ``added``."""

    stream: str
    #: the stream's rewrites as read: the commit takes the next number, or loses to a rival who took it
    rewrites: int
    removed: tuple[ArchivedFile, ...]
    added: tuple[ArchivedFile, ...] = ()
    #: set by expiry: rows before this millisecond are gone (a change of data, not only of layout)
    expired_before: int | None = None


Change = Advance | Rewrite


class Archive:
    """The archive at ``url``: one Delta table of every archived stream (or a format-1 archive, read-only).

    Construction validates the URL and options before any I/O (``InvalidArchive``);
    a local directory is made when it is missing; the table is created by the
    first commit. One Archive may be shared by threads. Errors of the store and
    the table arrive as :class:`~retain.errors.ArchiveError`.
    """

    def __init__(self, url: str, **options: Any) -> None:
        self.location = Location.of(url, **options)
        self.url = self.location.url
        self._lock = threading.RLock()
        self._table: DeltaTable | None = None
        self._opened_at = -1
        self._version = -1
        #: when the snapshot was last brought up to date by the log itself (monotonic seconds)
        self._confirmed = float("-inf")
        #: how long that stays good enough to trust a missing next log entry: half the log retention, and half
        #: the age a log entry must reach before it may leave by count (retain.archive.log_trim)
        self._trusted_for = _trust(DEFAULT_LOG_RETENTION)
        self._format: int | None = None
        self._legacy: LegacyStore | None = None
        self._watermarks: dict[str, StreamId | None] = {}
        #: app id -> its version in the snapshot (delta-rs reads one in milliseconds: a beat reads thousands)
        self._txns: dict[str, int | None] = {}
        self._index: dict[str, tuple[ArchivedFile, ...]] | None = None

    def __repr__(self) -> str:
        return f"Archive({self.url!r})"

    @property
    def store(self) -> Any:
        """The obstore store the archive's objects are in."""
        return self.location.store

    # -- the snapshot ---------------------------------------------------------------------------

    @property
    def format(self) -> int:
        """3 for the table, 2 for a table partitioned by key (read and written as it is until migrated), 1 for
        an archive of manifests and segments (read-only until migrated)."""
        self._detect()
        assert self._format is not None
        return self._format

    def _detect(self) -> None:
        if self._format is not None:
            return
        with self._lock:
            if self._format is not None:
                return
            if self._try_open():
                return  # the table says its format (_settle)
            legacy = LegacyStore(self.location)
            if legacy.streams():
                self._legacy, self._format = legacy, 1
            else:
                self._format = FORMAT

    def _try_open(self) -> bool:
        """Open the table if there is one; False if there is none (yet)."""
        try:
            with translate_errors(f"opening the table {self.location.table_uri!r}"):
                self._open()
        except ArchiveObjectMissing:
            return False
        return True

    def _open(self) -> None:
        with self._reading_log(f"opening the table {self.location.table_uri!r}"):
            self._table = DeltaTable(self.location.table_uri, storage_options=self.location.storage_options)
        self._opened_at = self._table.version()
        self._settle()

    @contextmanager
    def _reading_log(self, what: str) -> Iterator[None]:
        """Errors as :func:`translate_errors` makes them; a damaged log named: delta-rs says only that it could
        not replay it, :func:`~retain.archive.log_check.diagnose` finds which object stopped it."""
        try:
            with translate_errors(what):
                yield
        except ArchiveCorrupt as damage:
            named = diagnose(self.location)
            if named is None:
                raise
            raise ArchiveCorrupt(f"{damage}: {named}") from damage.__cause__

    def _settle(self) -> None:
        """After the table moved: note its version, drop what was cached for the one before."""
        assert self._table is not None
        version = self._table.version()
        if version != self._version:
            self._version, self._watermarks, self._txns, self._index = version, {}, {}, None
            self._format = 3 if DIGEST in self._table.metadata().partition_columns else 2
            retention = _interval(self.properties().get("delta.logRetentionDuration", ""))
            if retention is not None:
                self._trusted_for = _trust(retention)
        self._confirmed = time.monotonic()

    def _refresh(self) -> None:
        """Bring the snapshot up to the latest commit (under the lock)."""
        if self._table is None:
            if not self._try_open():
                self._confirmed = time.monotonic()
            return
        if self._version - self._opened_at >= REOPEN_EVERY:
            self._open()
            return
        try:
            with translate_errors(f"reading the table {self.location.table_uri!r}"):
                self._table.update_incremental()
        except ArchiveError:
            self._open()  # the log this snapshot would replay from may be cleaned up: load it afresh (a damaged
            return        # log is then reported, naming the object)
        self._settle()

    def _current(self) -> None:
        """Make the snapshot the latest: one existence check when it already is (see the module docstring)."""
        self._require_local_root()
        self._detect()
        if self._format == 1:
            return
        # A newer commit's log entry is cleaned up no sooner than twice _trusted_for after it was written (by
        # age or by count); past that since the last full look, look again rather than trust a missing entry.
        fresh = time.monotonic() - self._confirmed < self._trusted_for
        if fresh and not self.location.exists(commit_path(self._version + 1)):
            return
        with self._lock, translate_errors(f"reading the table {self.location.table_uri!r}"):
            self._refresh()

    def _require_local_root(self) -> None:
        """A local archive whose directory is gone (removed, or a file in its place) answers no read: that is an
        outage to report, not a table to keep serving from memory. One stat; on S3 the existence check of the next
        commit is the request that fails."""
        root = self.location.local_root
        if root is not None and not root.is_dir():
            raise ArchiveUnavailable(f"the archive directory {str(root)!r} is gone (it is not a directory)")

    def metadata(self) -> Any:
        """The snapshot's Delta metadata (id, name, description, partition columns, created time, properties).

        Raises:
            ArchiveError: there is no table yet.
        """
        self._detect()
        table = self._table
        if table is None:
            raise ArchiveError(f"there is no table at {self.location.table_uri!r} yet")
        return table.metadata()

    def properties(self) -> dict[str, str]:
        """The table's properties (``delta.logRetentionDuration``, ...); none before the table exists."""
        table = self._table
        return dict(table.metadata().configuration) if table is not None else {}

    @property
    def table_id(self) -> str | None:
        """The table's own id (Delta metadata, made with the table): what names its trim marks in Redis
        (:mod:`retain.archive.gap`). None before the first commit, or for a format-1 archive."""
        self._detect()
        table = self._table
        if table is None:
            self._current()
            table = self._table
        return str(table.metadata().id) if table is not None else None

    @property
    def version(self) -> int:
        """The table's latest version (-1 before the first commit; a format-1 archive: -1)."""
        self._current()
        return self._version

    # -- reading -------------------------------------------------------------------------------

    def watermark(self, stream: Stream) -> StreamId | None:
        """W of ``stream``: the highest archived id, None when nothing is archived. Constant time."""
        key = key_of(stream)
        self._current()
        if self._legacy is not None:
            return self._legacy.manifest(key).watermark
        with self._lock:
            return self._watermark(key)

    def watermarks(self, streams: Iterable[Stream]) -> tuple[int, dict[str, StreamId | None]]:
        """The table's version and W of each stream, all from that one snapshot."""
        keys = [key_of(stream) for stream in streams]
        self._current()
        if self._legacy is not None:
            return -1, {key: self._legacy.manifest(key).watermark for key in keys}
        with self._lock:
            return self._version, {key: self._watermark(key) for key in keys}

    def positions(self, streams: Iterable[Stream]) -> dict[str, tuple[StreamId | None, int]]:
        """W of each stream and its ordinal (0: unknown; see :mod:`retain.archive.gap`), from one snapshot."""
        keys = [key_of(stream) for stream in streams]
        self._current()
        if self._legacy is not None:
            return {key: (self._legacy.manifest(key).watermark, 0) for key in keys}
        with self._lock:
            return {key: (self._watermark(key), self._txn(ordinal_txn(key)) or 0) for key in keys}

    def _watermark(self, key: str) -> StreamId | None:
        if key not in self._watermarks:
            self._watermarks[key] = self._txn_watermark(key)
        return self._watermarks[key]

    def _txn_watermark(self, key: str) -> StreamId | None:
        table = self._table
        if table is None:
            return None
        ms_id, seq_id = watermark_txns(key)
        ms, seq = self._txn(ms_id), self._txn(seq_id)
        if ms is None:
            return None
        return StreamId(ms, seq or 0)

    def _txn(self, app_id: str) -> int | None:
        table = self._table
        if table is None:
            return None
        if app_id not in self._txns:
            with translate_errors(f"reading {app_id!r}"):
                self._txns[app_id] = table.transaction_version(app_id)
        return self._txns[app_id]

    def state(self, stream: Stream) -> StreamState:
        """``stream`` as of the latest snapshot: W, its files in id order, how far expiry reached."""
        key = key_of(stream)
        self._current()
        if self._legacy is not None:
            manifest = self._legacy.manifest(key)
            files = tuple(ArchivedFile(self._legacy.segment_path(key, segment), segment.first, segment.last,
                                       segment.count, segment.size, 1) for segment in manifest.segments)
            return StreamState(key, manifest.watermark, files, manifest.number, format=1)
        with self._lock:
            return StreamState(key, self._watermark(key), self._files_of(key), self._version,
                               self._txn(rewrite_txn(key)) or 0, self._txn(expired_txn(key)))

    def files(self, stream: Stream, low: StreamId | None = None, high: StreamId | None = None) -> list[ArchivedFile]:
        """The files of ``stream`` whose id range meets ``low..high`` (both included), in id order."""
        key = key_of(stream)
        self._current()
        if self._legacy is not None:
            manifest = self._legacy.manifest(key)
            segments = manifest.covering(low or StreamId(0, 0), high or StreamId(2**64 - 1, 2**64 - 1))
            return [ArchivedFile(self._legacy.segment_path(key, segment), segment.first, segment.last,
                                 segment.count, segment.size, 1) for segment in segments]
        with self._lock:
            found = self._files_of(key)
        return [file for file in found if (low is None or file.last >= low) and (high is None or file.first <= high)]

    def _files_of(self, key: str) -> tuple[ArchivedFile, ...]:
        if self._index is None:
            self._index = self._read_index()
        files = self._index.get(key, ())
        for before, after in zip(files, files[1:], strict=False):
            if after.first <= before.last:
                raise ArchiveCorrupt(f"files {before.path} and {after.path} of {key!r} overlap: a row would "
                                     "be read twice")
        return files

    def _read_index(self) -> dict[str, tuple[ArchivedFile, ...]]:
        """Every live file of the snapshot, by stream, in id order (from the log: no listing)."""
        table = self._table
        if table is None:
            return {}
        with translate_errors(f"reading the files of {self.location.table_uri!r}"):
            actions = pa.table(table.get_add_actions(flatten=True))
        if not actions.num_rows:
            return {}
        by_stream: dict[str, list[ArchivedFile]] = {}
        counts = actions.column("num_records").to_pylist()
        table_format = self._format or FORMAT
        # A format-3 file's key is its ``stream`` column, whose min and max the log keeps (one value per file).
        keys = actions.column(f"min.{STREAM}" if table_format >= 3 else f"partition.{STREAM}").to_pylist()
        for path, size, count, key in zip(actions.column("path").to_pylist(), actions.column("size_bytes").to_pylist(),
                                          counts, keys, strict=False):
            found = file_range(path)
            if found is None or key is None:
                raise ArchiveCorrupt(f"the table lists {path!r}, a file retain did not write (its name does not "
                                     "say its id range, or the log does not say its stream)")
            by_stream.setdefault(key, []).append(ArchivedFile(path, found[0], found[1], int(count or 0), int(size),
                                                              table_format))
        return {key: tuple(sorted(files, key=lambda file: file.first)) for key, files in by_stream.items()}

    def streams(self) -> list[str]:
        """The keys of every stream with archived rows, sorted."""
        self._current()
        if self._legacy is not None:
            return self._legacy.streams()
        with self._lock:
            if self._index is None:
                self._index = self._read_index()
            return sorted(self._index)

    def dataset(self, as_of: int | datetime | None = None) -> Any:
        """The whole table as a pyarrow dataset (every stream), for SQL engines; ``as_of`` a version, or an
        aware datetime: the table as it was then (Delta's time travel, as long as the log keeps that version
        and the vacuum has not removed its files).

        Raises:
            ArchiveNeedsMigration: a format-1 archive has no table to query.
            InvalidInput: ``as_of`` is not a version >= 0 or an aware datetime, or the table has no such version
                (before its first commit, after its last, or cleaned from the log).
        """
        if as_of is not None:
            _check_as_of(as_of)
        self.check_writable()
        if as_of is not None:
            return self._dataset_as_of(as_of)
        self._current()
        with self._lock, translate_errors(f"reading the table {self.location.table_uri!r}"):
            if self._table is None:
                return pa_dataset.dataset(TABLE_SCHEMA.empty_table())
            # delta-rs's dataset: each column from the files, the partition column from the log
            return self._table.to_pyarrow_dataset()

    def _dataset_as_of(self, as_of: int | datetime) -> Any:
        latest = self.version
        if isinstance(as_of, int) and as_of > latest:
            raise InvalidInput(f"the table has no version {as_of}: its latest is {latest}")
        try:
            with translate_errors(f"reading the table {self.location.table_uri!r} as of {as_of}"):
                table = DeltaTable(self.location.table_uri, storage_options=self.location.storage_options)
                table.load_as_version(as_of)
                return table.to_pyarrow_dataset()
        except ArchiveError as error:
            raise InvalidInput(f"the table cannot be read as of {as_of}: {error} (a time before its first "
                               "commit, or a version its log no longer keeps)") from error

    def open_file(self, file: ArchivedFile) -> pq.ParquetFile:
        """A stored file, opened for reading: its pages' checksums are verified as they are read."""
        return open_parquet(self.location.source(file.path, file.size), file.path)

    def tables(self, stream: Stream, file: ArchivedFile, low: StreamId, high: StreamId, *,
               batch_rows: int = ROW_GROUP_ROWS) -> Iterator[pa.Table]:
        """The rows of ``file`` with ids in ``low..high``, ``batch_rows`` at a time at most, in the table's columns."""
        parquet = self.open_file(file)
        try:
            yield from self._tables(stream, file, parquet, low, high, batch_rows)
        finally:
            parquet.close(force=True)  # an S3 file object holds a reader until closed

    def _tables(self, stream: Stream, file: ArchivedFile, parquet: pq.ParquetFile, low: StreamId,
                high: StreamId, batch_rows: int = ROW_GROUP_ROWS) -> Iterator[pa.Table]:
        if file.format == 1:
            return legacy_segments.read_tables(parquet, file.path, key_of(stream), low, high, batch_rows)
        return read_tables(parquet, file.path, low, high, batch_rows=batch_rows)

    def batches(self, stream: Stream, file: ArchivedFile, low: StreamId, high: StreamId) -> Iterator[pa.RecordBatch]:
        """The rows of ``file`` with ids in ``low..high`` as record batches in the table's columns.

        A local file of the table is decoded by pyarrow's scanner (row groups in
        parallel); others a row group at a time.
        """
        parquet = self.open_file(file)
        try:
            if file.format >= 2 and self.location.local_root is not None:
                yield from scan_batches(parquet, str(self.location.local_root / file.path), file.path, low, high)
            else:
                for table in self._tables(stream, file, parquet, low, high):
                    yield from table.to_batches()
        finally:
            parquet.close(force=True)

    # -- writing -------------------------------------------------------------------------------

    def reload(self) -> None:
        """Forget the format and the snapshot: look again (after ``retain archive migrate`` made a table)."""
        with self._lock:
            self._format, self._legacy, self._table = None, None, None
            self._version, self._opened_at, self._confirmed = -1, -1, float("-inf")
            self._watermarks, self._txns, self._index = {}, {}, None

    def clone(self) -> Archive:
        """Another Archive on the same store, with a snapshot and a lock of its own: for a thread that must
        never wait on this one's (maintenance beside a driver's folds). The two meet in the table's log,
        as two processes would."""
        other = Archive.__new__(Archive)
        other.__dict__.update(self.__dict__)
        other._lock = threading.RLock()
        other.reload()
        return other

    def as_table(self) -> Archive:
        """This archive's store as the table, even while format-1 objects are there: the migration's target."""
        target = Archive.__new__(Archive)
        target.__dict__.update(self.__dict__)
        target._lock = threading.RLock()
        target.reload()
        target._format = FORMAT  # until a table there says its own
        return target

    def legacy(self) -> LegacyStore:
        """The format-1 objects of this archive's store (none once migrated and vacuumed)."""
        return self._legacy if self._legacy is not None else LegacyStore(self.location)

    def check_writable(self) -> None:
        """Refuse a format-1 archive before a fold reads anything to write into it.

        Raises:
            ArchiveNeedsMigration: manifests and segments: `retain archive migrate` first.
        """
        self._detect()
        if self._legacy is not None:
            raise self._legacy.refuse_writes()

    def put_file(self, stream: Stream, encoded: EncodedFile) -> ArchivedFile:
        """Store a data file of ``stream``, create-only under a fresh name; it counts once a commit lists it."""
        key = key_of(stream)
        self.check_writable()
        path = file_name(key, encoded.first, encoded.last, uuid.uuid4().hex[:12], encoded.format)
        self.location.put_new(path, encoded.data, f"writing data file {path!r} of {key!r}")
        return ArchivedFile(path, encoded.first, encoded.last, encoded.count, len(encoded.data), encoded.format,
                            encoded.stats)

    def commit(self, changes: Sequence[Change], *, operation: str = "fold") -> int:
        """Commit ``changes`` to the table as one Delta commit; return the table's version after it.

        Each :class:`Advance` must start from the W the snapshot holds for its
        stream, each :class:`Rewrite` from its count of rewrites.

        Raises:
            ArchiveConflict: the snapshot, or a commit another writer made after
                it, already moved one of the streams: re-read and plan again.
            ArchiveFenced: an Advance's :class:`Fence` token is below the one the
                table holds: a newer holder of the claim committed first
                (``streams`` names the changes it refuses; the others may be retried).
            ArchiveNeedsMigration: a format-1 archive.
        """
        if not changes:
            return self.version
        self.check_writable()
        actions: list[AddAction | RemoveAction] = []
        txns: list[Transaction] = []
        now = int(time.time() * 1000)
        with self._lock:
            self._ensure_table()
            self._check_fences(changes)
            table_format = self.format
            for change in changes:
                self._check_fence(change)
                _check_layout(change, table_format)
                actions += _actions(change, now)
                txns += _transactions(change)
            txns += _fence_transactions(changes)
            table = self._table
            assert table is not None
            before, known, watermarks = self._version, dict(self._txns), dict(self._watermarks)
            try:
                with translate_errors(f"committing {operation} of {', '.join(sorted({c.stream for c in changes}))}"):
                    table.create_write_transaction(
                        actions, "append", TABLE_SCHEMA if table_format >= 3 else TABLE_SCHEMA_2,
                        partition_by=[partition_column(table_format)],
                        commit_properties=CommitProperties(app_transactions=txns,
                                                           custom_metadata={"retain.operation": operation}),
                        post_commithook_properties=_HOOKS)
            finally:
                # The commit (or the rival that beat it) is in the log either way.
                with translate_errors(f"reading the table {self.location.table_uri!r}"):
                    self._refresh()
            if self._version == before + 1 and before >= 0:
                # Ours is the only commit since the snapshot the caches hold: they stay, with what it wrote.
                self._txns = known | {txn.app_id: txn.version for txn in txns}
                self._watermarks = watermarks | {change.stream: change.after for change in changes
                                                 if isinstance(change, Advance)}
            return self._version

    def _check_fences(self, changes: Sequence[Change]) -> None:
        """Refuse the changes whose claim's token is below the table's (the others could commit alone)."""
        stale = [change for change in changes if isinstance(change, Advance) and change.fence is not None
                 and (self._txn(change.fence.app_id) or 0) > change.fence.token]
        if stale:
            held = {change.fence.app_id: self._txn(change.fence.app_id) for change in stale if change.fence}
            raise ArchiveFenced(
                f"not committed: {', '.join(sorted(change.stream for change in stale))} are claimed by a newer "
                f"writer ({', '.join(f'{app} token {token}' for app, token in sorted(held.items()))}, above this "
                "writer's): its lease was taken over", tuple(change.stream for change in stale))

    def _check_fence(self, change: Change) -> None:
        """The fence in this process: the snapshot must still hold what the change was planned from."""
        if isinstance(change, Advance):
            now = self._watermark(change.stream)
            if now != change.before:
                raise ArchiveConflict(f"W of {change.stream!r} is {now}, no longer {change.before}: "
                                      "another folder advanced it first")
        else:
            now_rewrites = self._txn(rewrite_txn(change.stream)) or 0
            if now_rewrites != change.rewrites:
                raise ArchiveConflict(f"the files of {change.stream!r} were rewritten by another maintainer "
                                      f"(rewrite {now_rewrites}, planned from {change.rewrites})")

    def _ensure_table(self) -> None:
        """Create the table at its first commit (a rival creating it at the same time is no error)."""
        if self._table is not None:
            return
        self._refresh()
        if self._table is not None:
            return
        try:
            with translate_errors(f"creating the table {self.location.table_uri!r}"):
                DeltaTable.create(self.location.table_uri, TABLE_SCHEMA, mode="ignore", partition_by=[DIGEST],
                                  name="retain archive", configuration=TABLE_PROPERTIES,
                                  storage_options=self.location.storage_options)
        except ArchiveError:
            self._refresh()
            if self._table is None:
                raise
            return
        with translate_errors(f"opening the table {self.location.table_uri!r}"):
            self._open()

    # -- maintenance's tools -------------------------------------------------------------------

    def _at_the_latest(self, what: str, action: Callable[[DeltaTable], object]) -> None:
        """``action`` on the table brought up to its latest version (nothing before the table exists)."""
        self.check_writable()
        with self._lock, translate_errors(f"{what} {self.location.table_uri!r}"):
            self._refresh()
            if self._table is not None:
                action(self._table)

    def checkpoint(self) -> None:
        """Write a checkpoint at the latest version: opening the table then reads it, not every commit."""
        self._at_the_latest("checkpointing", DeltaTable.create_checkpoint)

    def set_properties(self, properties: Mapping[str, str]) -> None:
        """Set the table's properties that differ from ``properties`` (a metadata commit; none if all agree).

        A rival setting them at the same moment is no error: the properties are
        read again, and set if they still differ.
        """
        self.check_writable()
        with self._lock:
            self._ensure_table()
            for attempt in (1, 2):
                assert self._table is not None
                changed = {name: value for name, value in properties.items() if self.properties().get(name) != value}
                if not changed:
                    return
                try:
                    with translate_errors(f"setting the properties of {self.location.table_uri!r}"):
                        self._table.alter.set_table_properties(changed, post_commithook_properties=_HOOKS)
                except ArchiveConflict:
                    if attempt == 2:
                        raise
                finally:
                    with translate_errors(f"reading the table {self.location.table_uri!r}"):
                        self._refresh()

    def clean_log(self, now: datetime, keep_commits: int = LOG_KEEP_COMMITS) -> None:
        """Delete the log entries older than the log retention and the latest checkpoint (delta-rs's cleanup),
        then those before the newest checkpoint that ``keep_commits`` commits follow, if all of them are
        :data:`~retain.archive.log_trim.LOG_TRIM_AGE` old or older at ``now`` (:mod:`retain.archive.log_trim`:
        a long log slows every commit)."""
        self._at_the_latest("cleaning the log of", DeltaTable.cleanup_metadata)
        with self._lock:
            latest = self._version
        if latest < 0:
            return
        listing = self.location.listing("_delta_log/")
        for path in plan_log_trim(listing, latest, keep_commits, written_before=now - LOG_TRIM_AGE):
            self.location.delete(path, f"removing {path!r} from the log of {self.location.table_uri!r}")

    def vacuum(self, *, dry_run: bool = False) -> list[str]:
        """Delete the files the table no longer lists: removed ones once the table's
        ``delta.deletedFileRetentionDuration`` has passed since their removal, and
        files no commit ever listed once :data:`ORPHAN_RETENTION` has passed since
        they were written (a fold writing one now is never robbed of it).

        Two passes: a vacuum given a retention in hours applies it to removed
        files too, so one full vacuum kept every file a compaction replaced for
        the hour the orphans wait (295 replaced files of a soak stayed on disk
        after the maintenance that could remove them). The first pass reads the
        removals and takes the table's retention (in seconds, as maintenance sets
        it); the second lists the store for the orphans.
        """
        self.check_writable()
        hours = int(ORPHAN_RETENTION.total_seconds() // 3600)
        with self._lock, translate_errors(f"vacuuming {self.location.table_uri!r}"):
            if not self._try_open():
                return []
            assert self._table is not None  # opened afresh: its tombstones are the checkpoint's, not expired ones
            removed = self._table.vacuum(retention_hours=None, dry_run=dry_run, enforce_retention_duration=False,
                                         post_commithook_properties=_HOOKS)
            orphans = self._table.vacuum(retention_hours=hours, dry_run=dry_run, enforce_retention_duration=False,
                                         full=True, post_commithook_properties=_HOOKS)
            self._refresh()
            return sorted(set(removed) | set(orphans))

    def log_size(self) -> tuple[int, int]:
        """How many objects the table's log holds, and their bytes (a listing: for reports, not reads)."""
        listed = self.location.listing("_delta_log/")
        return len(listed), sum(int(item["size"]) for item in listed)


def _trust(log_retention: timedelta) -> float:
    """Seconds a snapshot may trust a missing next commit: no commit leaves the log sooner than twice that
    after it was written, by age (the log retention) or by count (:data:`~retain.archive.log_trim.LOG_TRIM_AGE`)."""
    return min(log_retention, LOG_TRIM_AGE).total_seconds() / 2


def _check_as_of(as_of: object) -> None:
    if isinstance(as_of, datetime):
        if as_of.tzinfo is None:
            raise InvalidInput(f"as_of must be an aware datetime (got {as_of!r})")
    elif isinstance(as_of, bool) or not isinstance(as_of, int) or as_of < 0:
        raise InvalidInput(f"as_of must be a table version >= 0 or an aware datetime (got {as_of!r})")


def _check_layout(change: Change, table_format: int) -> None:
    """Refuse files written for another format than the table's: ``retain archive migrate`` rewrote the table
    while they were written (the caller writes them again)."""
    added = change.files if isinstance(change, Advance) else change.added
    for file in added:
        if file.format != table_format:
            raise ArchiveConflict(f"the table of {change.stream!r} is now format {table_format}, and {file.path} "
                                  f"was written for format {file.format}: it was migrated meanwhile")


def _actions(change: Change, now: int) -> list[AddAction | RemoveAction]:
    if isinstance(change, Advance):
        return [AddAction(file.path, file.size, partition_values(change.stream, file.format), now, True, file.stats)
                for file in change.files]
    data_change = change.expired_before is not None
    removed: list[AddAction | RemoveAction] = [
        RemoveAction(file.path, data_change, now, file.size, partition_values(change.stream, file.format))
        for file in change.removed]
    return removed + [AddAction(file.path, file.size, partition_values(change.stream, file.format), now,
                                data_change, file.stats) for file in change.added]


def _transactions(change: Change) -> list[Transaction]:
    if isinstance(change, Advance):
        ms_id, seq_id = watermark_txns(change.stream)
        return [Transaction(ms_id, change.after.ms), Transaction(seq_id, change.after.seq),
                Transaction(ordinal_txn(change.stream), change.ordinal)]
    found = [Transaction(rewrite_txn(change.stream), change.rewrites + 1)]
    if change.expired_before is not None:
        found.append(Transaction(expired_txn(change.stream), change.expired_before))
    return found


def _fence_transactions(changes: Sequence[Change]) -> list[Transaction]:
    """One app transaction per claim the changes carry (several streams of one shard share it)."""
    tokens: dict[str, int] = {}
    for change in changes:
        if isinstance(change, Advance) and change.fence is not None:
            tokens[change.fence.app_id] = max(tokens.get(change.fence.app_id, 0), change.fence.token)
    return [Transaction(app_id, token) for app_id, token in sorted(tokens.items())]


def _interval(text: str) -> timedelta | None:
    """A Delta interval property (``interval 10 minutes``) as a timedelta; None if it does not read as one."""
    parts = text.split()
    if len(parts) != 3 or parts[0] != "interval" or not parts[1].isdigit():
        return None
    unit = parts[2].rstrip("s")
    seconds = {"second": 1, "minute": 60, "hour": 3600, "day": 86400, "week": 604800}.get(unit)
    return timedelta(seconds=int(parts[1]) * seconds) if seconds else None

