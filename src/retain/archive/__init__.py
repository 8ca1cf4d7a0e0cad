"""The archive: fold what a trim will drop into Parquet segments first, and read archive and live as one log.

The parts: the object names (:mod:`~retain.archive.layout`), the manifest and
its watermark W (:mod:`~retain.archive.manifest`), Parquet segments
(:mod:`~retain.archive.segments`), the create-only store
(:mod:`~retain.archive.store`), the pure plan of a fold-then-trim
(:mod:`~retain.archive.plan`), the fold (:mod:`~retain.archive.fold`) and the
merge-read (:mod:`~retain.archive.read`).

Imports: the vocabulary, and :mod:`retain.streams` for the key layout and the
trim verb; never :mod:`retain.retention`, the layer above that drives it.

Example:
    >>> archive = Archive("file:///var/lib/retain/archive")
    >>> fold_then_trim(conn, StreamRef("codemojex", "activity"), archive, MaxLen(10_000))
    >>> for entry_id, fields in read(conn, StreamRef("codemojex", "activity"), archive):
    ...     ...
"""

from retain.archive.fold import (
    FoldProgress,
    FoldResult,
    FoldTrimResult,
    fold,
    fold_boundary,
    fold_then_trim,
)
from retain.archive.manifest import FORMAT_VERSION, Manifest, SegmentInfo
from retain.archive.plan import FoldTrimPlan, plan_fold_trim, trim_past
from retain.archive.read import read
from retain.archive.store import Archive
from retain.errors import (
    ArchiveAccessDenied,
    ArchiveCorrupt,
    ArchiveError,
    ArchiveObjectExists,
    ArchiveObjectMissing,
    ArchiveUnavailable,
    InvalidArchive,
    InvalidStreamId,
    UnarchivableEntry,
)
from retain.ids import StreamId

__all__ = [
    "FORMAT_VERSION",
    "Archive",
    "ArchiveAccessDenied",
    "ArchiveCorrupt",
    "ArchiveError",
    "ArchiveObjectExists",
    "ArchiveObjectMissing",
    "ArchiveUnavailable",
    "FoldProgress",
    "FoldResult",
    "FoldTrimPlan",
    "FoldTrimResult",
    "InvalidArchive",
    "InvalidStreamId",
    "Manifest",
    "SegmentInfo",
    "StreamId",
    "UnarchivableEntry",
    "fold",
    "fold_boundary",
    "fold_then_trim",
    "plan_fold_trim",
    "read",
    "trim_past",
]
