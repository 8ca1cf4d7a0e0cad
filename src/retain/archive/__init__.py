"""The archive: fold what a trim will drop into a Delta Lake table first, and read archive and live as one log.

The parts: where the store is (:mod:`~retain.archive.location`), the names of
files and app transactions (:mod:`~retain.archive.layout`), the columns
(:mod:`~retain.archive.columns`), the Parquet data files
(:mod:`~retain.archive.files`), the table and its watermarks W
(:mod:`~retain.archive.table`), the pure plan of a fold-then-trim
(:mod:`~retain.archive.plan`), the fold of one stream (:mod:`~retain.archive.fold`)
and of a driver's beat of many (:mod:`~retain.archive.beat`), the
merge-read (:mod:`~retain.archive.read`), a consumer group's catch-up from the
archive (:mod:`~retain.archive.catch_up`), maintenance and expiry
(:mod:`~retain.archive.maintenance`), SQL over the table
(:mod:`~retain.archive.query`), the move from format 1
(:mod:`~retain.archive.migrate`, reading :mod:`~retain.archive.legacy`), the gap
between the tiers (:mod:`~retain.archive.gap`) and checking a whole archive
(:mod:`~retain.archive.verify`).

Imports: the vocabulary, and :mod:`retain.streams` for the key layout and the
trim verb; never :mod:`retain.retention`, the layer above that drives it.

Example:
    >>> archive = Archive("file:///var/lib/retain/archive")
    >>> fold_then_trim(conn, StreamRef("codemojex", "activity"), archive, MaxLen(10_000))
    >>> for entry_id, fields in read(conn, StreamRef("codemojex", "activity"), archive):
    ...     ...
"""

import os

# delta-rs writes the Rust log lines of what it calls (the AWS SDK's: three IMDS warnings on a machine that is no
# EC2 instance) straight to stderr, past retain's logging and --log-format, with a filter it reads from RUST_LOG once,
# when it is first imported: here. What fails reaches retain as an exception, reported in one line of its own.
# A RUST_LOG the user sets still wins.
os.environ.setdefault("RUST_LOG", "error")

from retain.archive.beat import fold_then_trim_all
from retain.archive.catch_up import catch_up
from retain.archive.columns import FILE_SCHEMA, TABLE_SCHEMA
from retain.archive.files import FORMAT_VERSION
from retain.archive.fold import (
    FoldProgress,
    FoldResult,
    FoldTrimOutcome,
    FoldTrimResult,
    fold,
    fold_boundary,
    fold_then_trim,
)
from retain.archive.maintenance import (
    MaintenanceReport,
    MaintenanceSettings,
    StreamMaintenance,
    maintain,
    plan_compaction,
    plan_expiry,
    preview_maintenance,
    vacuum_replaced,
)
from retain.archive.migrate import MigrationReport, migrate
from retain.archive.plan import FoldTrimPlan, plan_fold_trim, trim_past
from retain.archive.query import query
from retain.archive.read import read, read_arrow, read_log
from retain.archive.relayout import RelayoutReport, relayout
from retain.archive.table import Archive, ArchivedFile, Fence, StreamState
from retain.archive.verify import Damage, VerifyReport, verify
from retain.errors import (
    ArchiveAccessDenied,
    ArchiveConflict,
    ArchiveCorrupt,
    ArchiveError,
    ArchiveFenced,
    ArchiveGap,
    ArchiveNeedsMigration,
    ArchiveObjectExists,
    ArchiveObjectMissing,
    ArchiveTimeout,
    ArchiveUnavailable,
    InvalidArchive,
    InvalidStreamId,
    UnarchivableEntry,
)
from retain.ids import StreamId

__all__ = [
    "FILE_SCHEMA",
    "FORMAT_VERSION",
    "TABLE_SCHEMA",
    "Archive",
    "ArchiveAccessDenied",
    "ArchiveConflict",
    "ArchiveCorrupt",
    "ArchiveFenced",
    "ArchiveError",
    "ArchiveGap",
    "ArchiveNeedsMigration",
    "ArchiveObjectExists",
    "ArchiveObjectMissing",
    "ArchiveTimeout",
    "ArchiveUnavailable",
    "ArchivedFile",
    "Fence",
    "Damage",
    "FoldProgress",
    "FoldResult",
    "FoldTrimOutcome",
    "FoldTrimPlan",
    "FoldTrimResult",
    "InvalidArchive",
    "InvalidStreamId",
    "MaintenanceReport",
    "MaintenanceSettings",
    "MigrationReport",
    "RelayoutReport",
    "StreamId",
    "StreamMaintenance",
    "StreamState",
    "UnarchivableEntry",
    "VerifyReport",
    "catch_up",
    "fold",
    "fold_boundary",
    "fold_then_trim",
    "fold_then_trim_all",
    "maintain",
    "migrate",
    "plan_compaction",
    "plan_expiry",
    "plan_fold_trim",
    "preview_maintenance",
    "query",
    "read",
    "read_arrow",
    "read_log",
    "relayout",
    "trim_past",
    "vacuum_replaced",
    "verify",
]
