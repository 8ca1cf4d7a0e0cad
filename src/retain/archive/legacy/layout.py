"""Format 1 (read-only until migrated): where each object of the first archive lives (pure).

Under the archive's root, one folder per stream, named by the stream's key as
:func:`retain.archive.layout.stream_dir` writes it (every byte outside
``A-Z a-z 0-9 . _ -`` as ``!XX``)::

    <stream>/segments/<first>_<last>.parquet     immutable, named by the id range it holds
    <stream>/manifest/<number>.json              the numbered series; the highest is current

Ids in names are ``<ms>-<seq>`` with both parts zero-padded to 20 digits and
manifest numbers are zero-padded to 20 digits, so that names sort as numbers.

Example:
    >>> manifest_path("emq:{q}:stream:s", 42)
    'emq!3A!7Bq!7D!3Astream!3As/manifest/00000000000000000042.json'
"""

from __future__ import annotations

import re

from retain.archive.layout import stream_dir
from retain.ids import StreamId

__all__ = [
    "MANIFEST_DIR",
    "SEGMENT_DIR",
    "manifest_number",
    "manifest_path",
    "segment_name",
    "stream_dir",
]

SEGMENT_DIR = "segments"
MANIFEST_DIR = "manifest"
_MANIFEST_FILE = re.compile(r"([0-9]{20})\.json")


def _padded(entry_id: StreamId) -> str:
    return f"{entry_id.ms:020d}-{entry_id.seq:020d}"


def segment_name(first: StreamId, last: StreamId) -> str:
    """The name, relative to the stream's folder, of the segment holding ids ``first..last``."""
    return f"{SEGMENT_DIR}/{_padded(first)}_{_padded(last)}.parquet"


def manifest_path(key: str, number: int) -> str:
    """The full path of manifest ``number`` of stream ``key``."""
    return f"{stream_dir(key)}/{MANIFEST_DIR}/{number:020d}.json"


def manifest_number(path: str) -> int | None:
    """The number of the manifest at ``path``, or None if the name is not a manifest's."""
    found = _MANIFEST_FILE.fullmatch(path.rsplit("/", 1)[-1])
    return int(found[1]) if found else None
