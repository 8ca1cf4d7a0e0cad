"""Where each part of the archive's table lives, and the names of its app transactions, in one place (pure).

The archive is one Delta Lake table at the archive's root::

    _delta_log/<version>.json                  the commits (Delta's log; checkpoints beside them)
    stream_digest=<digest>/<first>_<last>.<token>.parquet
                                               the data files of one stream, immutable

The table is partitioned by ``stream_digest``: ``sha256-`` and the first 16 hex
digits of the SHA-256 of the stream's key (UTF-8), so that every folder name is
characters every object store, file system and reader takes as they are, and
never reads as a number or a date to a reader that guesses partition types
(DuckDB's and Polars' hive partitioning). The key itself is the ``stream``
column, written in every file: every reader sees the same ``stream``, whether
it takes columns from the files or from the log (format 3). A SQL reader can
compute a key's folder itself: ``'sha256-' || left(sha256(key), 16)``.

``<first>`` and ``<last>`` are the ids the file holds from and to,
``<ms>-<seq>`` as Redis writes them (a reader knows a file's exact range from
its name, and orders files by it: the names themselves do not sort as ids);
``<token>`` is 12 random hex digits per file, so two writers never write the
same name. Every file and tombstone is named in the log and its checkpoints:
short names keep them small.

Format 2 (the table before ``stream_digest``) was partitioned by ``stream``
itself, the folder named ``stream=<key>`` with every byte outside
``A-Z a-z 0-9 . _ -`` written ``!XX``: a reader that takes partition values
from folder names saw ``emq!3A!7Bshop…``. ``retain archive migrate`` rewrites
it as format 3 (:mod:`retain.archive.relayout`); until then retain reads and
writes it as it is.

Each stream's state rides in the table's app transactions (Delta's ``txn``
actions, one version per app id), read in constant time from a snapshot:

- ``<key>/ms`` and ``<key>/seq``: the watermark W (the highest archived id);
- ``<key>/n``: the ordinal of W among every entry ever added to the live
  stream (Redis's ``entries-added``), 0 when unknown: how a gap between the
  archive and the live stream is seen (:mod:`retain.archive.gap`);
- ``<key>/rewrite``: how many rewrites (compaction, expiry) the stream's files
  have had: the fence between two maintainers;
- ``<key>/expired``: the millisecond before which the stream's rows expired.

Example:
    >>> file_name("emq:{q}:stream:s", StreamId(1789171200000, 0), StreamId(1789171200999, 2), "a1b2c3d4e5f6")
    'stream_digest=sha256-716c9482b68e28ff/1789171200000-0_1789171200999-2.a1b2c3d4e5f6.parquet'
"""

from __future__ import annotations

import hashlib
import re

from retain.ids import StreamId

__all__ = [
    "DELTA_LOG",
    "DIGEST",
    "FORMAT",
    "STREAM",
    "commit_path",
    "expired_txn",
    "file_name",
    "file_range",
    "key_of_dir",
    "ordinal_txn",
    "partition_column",
    "partition_values",
    "rewrite_txn",
    "stream_dir",
    "stream_digest",
    "watermark_txns",
]

DELTA_LOG = "_delta_log"
#: the table's format as this retain writes a new one: 3, partitioned by :data:`DIGEST` (2: by :data:`STREAM`)
FORMAT = 3
#: the stream's key: a column of every file (format 3), the partition column (format 2)
STREAM = "stream"
#: the partition column of format 3: one folder per stream, named by :func:`stream_digest`
DIGEST = "stream_digest"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_ESCAPED = re.compile(r"(?:![0-9A-F]{2})+")
_FILE = re.compile(r"([0-9]{1,20})-([0-9]{1,20})_([0-9]{1,20})-([0-9]{1,20})\.[0-9a-f]+\.parquet")


def stream_dir(key: str) -> str:
    """The folder name of stream ``key`` in format 2 (and format 1): unsafe bytes (``/`` and ``!`` included)
    written ``!XX``."""
    return _UNSAFE.sub(lambda run: "".join(f"!{byte:02X}" for byte in run[0].encode()), key)


def key_of_dir(folder: str) -> str:
    """The stream key a folder name stands for (the inverse of :func:`stream_dir`)."""
    return _ESCAPED.sub(lambda run: bytes.fromhex(run[0].replace("!", "")).decode(errors="replace"), folder)


def stream_digest(key: str) -> str:
    """The partition value of stream ``key`` (format 3): ``sha256-`` and 16 hex digits of its SHA-256."""
    return "sha256-" + hashlib.sha256(key.encode()).hexdigest()[:16]


def partition_column(table_format: int) -> str:
    """The partition column of a table of ``table_format`` (2 or 3)."""
    return DIGEST if table_format >= 3 else STREAM


def partition_values(key: str, table_format: int) -> dict[str, str | None]:
    """The partition values of ``key``'s files in a table of ``table_format``, as its log holds them."""
    return {DIGEST: stream_digest(key)} if table_format >= 3 else {STREAM: key}


def file_name(key: str, first: StreamId, last: StreamId, token: str, table_format: int = FORMAT) -> str:
    """The path, relative to the table's root, of a data file of ``key`` holding ids ``first..last``."""
    folder = f"{DIGEST}={stream_digest(key)}" if table_format >= 3 else f"{STREAM}={stream_dir(key)}"
    return f"{folder}/{first}_{last}.{token}.parquet"


def file_range(path: str) -> tuple[StreamId, StreamId] | None:
    """The ids a data file holds from and to, read from its name; None if the name is not one retain writes."""
    found = _FILE.fullmatch(path.rsplit("/", 1)[-1])
    if found is None:
        return None
    ms1, seq1, ms2, seq2 = (int(part) for part in found.groups())
    return StreamId(ms1, seq1), StreamId(ms2, seq2)


def commit_path(version: int) -> str:
    """The log entry of table version ``version``: written create-only, so versions have no gaps."""
    return f"{DELTA_LOG}/{version:020d}.json"


def watermark_txns(key: str) -> tuple[str, str]:
    """The app ids holding W of ``key``: its milliseconds and its sequence number."""
    return f"{key}/ms", f"{key}/seq"


def ordinal_txn(key: str) -> str:
    """The app id holding the ordinal of W of ``key``: W was the n-th entry ever added to the stream (0: unknown)."""
    return f"{key}/n"


def rewrite_txn(key: str) -> str:
    """The app id counting the rewrites of ``key``'s files (compaction, expiry)."""
    return f"{key}/rewrite"


def expired_txn(key: str) -> str:
    """The app id holding the millisecond before which ``key``'s rows expired."""
    return f"{key}/expired"
