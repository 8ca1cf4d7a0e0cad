"""Where each part of the archive's table lives, and the names of its app transactions, in one place (pure).

The archive is one Delta Lake table at the archive's root::

    _delta_log/<version>.json                  the commits (Delta's log; checkpoints beside them)
    stream=<stream>/<first>_<last>.<token>.parquet
                                               the data files of one stream, immutable

``<stream>`` is the stream's key with every byte outside ``A-Z a-z 0-9 . _ -``
written ``!XX`` (its UTF-8 in hex), so that a key is one path segment of
characters every object store and file system takes as they are
(``emq:{codemojex}:stream:activity`` is
``emq!3A!7Bcodemojex!7D!3Astream!3Aactivity``). The partition value in the
log is the key itself. ``<first>`` and ``<last>`` are the ids the file holds
from and to, ``<ms>-<seq>`` as Redis writes them (a reader knows a file's
exact range from its name, and orders files by it: the names themselves do
not sort as ids); ``<token>`` is 12 random hex digits per file, so two writers
never write the same name. Every file and tombstone is named in the log and
its checkpoints: short names keep them small.

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
    'stream=emq!3A!7Bq!7D!3Astream!3As/1789171200000-0_1789171200999-2.a1b2c3d4e5f6.parquet'
"""

from __future__ import annotations

import re

from retain.ids import StreamId

__all__ = [
    "DELTA_LOG",
    "PARTITION",
    "commit_path",
    "expired_txn",
    "file_name",
    "file_range",
    "key_of_dir",
    "ordinal_txn",
    "rewrite_txn",
    "stream_dir",
    "watermark_txns",
]

DELTA_LOG = "_delta_log"
#: the partition column: one folder per stream
PARTITION = "stream"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_ESCAPED = re.compile(r"(?:![0-9A-F]{2})+")
_FILE = re.compile(r"([0-9]{1,20})-([0-9]{1,20})_([0-9]{1,20})-([0-9]{1,20})\.[0-9a-f]+\.parquet")


def stream_dir(key: str) -> str:
    """The folder name of stream ``key``: unsafe bytes (``/`` and ``!`` included) written ``!XX``."""
    return _UNSAFE.sub(lambda run: "".join(f"!{byte:02X}" for byte in run[0].encode()), key)


def key_of_dir(folder: str) -> str:
    """The stream key a folder name stands for (the inverse of :func:`stream_dir`)."""
    return _ESCAPED.sub(lambda run: bytes.fromhex(run[0].replace("!", "")).decode(errors="replace"), folder)


def file_name(key: str, first: StreamId, last: StreamId, token: str) -> str:
    """The path, relative to the table's root, of a data file of ``key`` holding ids ``first..last``."""
    return f"{PARTITION}={stream_dir(key)}/{first}_{last}.{token}.parquet"


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
