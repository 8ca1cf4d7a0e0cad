"""The archive: fold what a trim will drop into Parquet segments first, and read archive and live as one log.

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
    trim_past,
)
from retain.ids import StreamId
from retain.archive.manifest import FORMAT_VERSION, Manifest, SegmentInfo
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
    "read",
    "trim_past",
]
