"""Format 1 (read-only until migrated): a store's per-stream manifests and segments, read.

Writing format 1 is over: :class:`~retain.archive.Archive` reads such an archive
through this module until ``retain archive migrate`` turns it into the table
(:mod:`retain.archive.migrate`), and refuses to fold into it.

Example:
    >>> LegacyStore(Location.of("/var/lib/retain")).manifest("emq:{q}:stream:s").watermark
    StreamId(ms=1789171200999, seq=0)
"""

from __future__ import annotations

import threading

from retain.archive.layout import key_of_dir
from retain.archive.legacy.layout import MANIFEST_DIR, manifest_number, manifest_path, stream_dir
from retain.archive.legacy.manifest import Manifest, SegmentInfo
from retain.archive.location import Location
from retain.errors import ArchiveError, ArchiveNeedsMigration

__all__ = ["LegacyStore"]


class LegacyStore:
    """The format-1 objects of one store: each stream's numbered manifests and the segments they list."""

    def __init__(self, location: Location) -> None:
        self.location = location
        self._latest: dict[str, Manifest] = {}
        self._lock = threading.Lock()

    def streams(self) -> list[str]:
        """The keys of every stream with a manifest folder, sorted."""
        found = []
        for folder in self.location.folders():
            if folder.startswith("_") or "=" in folder:
                continue  # the table's log, the table's partitions
            if self.location.listing(f"{folder}/{MANIFEST_DIR}/"):
                found.append(key_of_dir(folder))
        return sorted(found)

    def manifest(self, key: str) -> Manifest:
        """The current manifest of ``key``: the highest-numbered one (number 0 if none).

        Lists only the manifests after the last one this store saw.
        """
        with self._lock:
            known = self._latest.get(key) or Manifest(key)
        prefix = f"{stream_dir(key)}/{MANIFEST_DIR}/"
        offset = manifest_path(key, known.number) if known.number else None
        listed = self.location.listing(prefix, offset=offset)
        numbers = [number for item in listed if (number := manifest_number(item["path"])) is not None]
        highest = max(numbers, default=0)
        if highest <= known.number:
            return known
        return self._remember(self.manifest_at(key, highest))

    def manifest_at(self, key: str, number: int) -> Manifest:
        """Manifest ``number`` of ``key`` (0: the empty one), whether or not it is the highest."""
        if not number:
            return Manifest(key)
        data = self.location.get(manifest_path(key, number))
        return Manifest.from_json(data, stream=key, number=number)

    def _remember(self, manifest: Manifest) -> Manifest:
        with self._lock:
            known = self._latest.get(manifest.stream)
            if known is None or known.number < manifest.number:
                self._latest[manifest.stream] = manifest
        return manifest

    def segment_path(self, key: str, segment: SegmentInfo) -> str:
        """The object path of ``segment`` of ``key``."""
        return f"{stream_dir(key)}/{segment.name}"

    def refuse_writes(self) -> ArchiveError:
        """The error for a write into a format-1 archive."""
        return ArchiveNeedsMigration(f"{self.location.url!r} is a format-1 archive (manifests and segments): it is "
                                     "read-only until `retain archive migrate` turns it into the table")
