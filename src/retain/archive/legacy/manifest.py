"""Format 1 (read-only until migrated): the manifest, which segments hold a stream's past, and W (pure).

A manifest is a JSON object, written once under its number and never changed::

    {
      "format": 1,
      "stream": "emq:{codemojex}:stream:activity",
      "number": 42,
      "watermark": "1789171200999-0",
      "entries": 120000,
      "bytes": 1830411,
      "segments": [
        {"name": "segments/<first>_<last>.parquet", "first": "1789171100000-0",
         "last": "1789171200999-0", "count": 1000, "bytes": 15203},
        ...
      ],
      "writer": "5f0c8e7a3b2d4c1e9f8a7b6c5d4e3f2a"
    }

``watermark`` is the last id of the last segment: every entry of the stream
with an id at or below it is in exactly one listed segment. Segments are listed
in id order and never overlap. ``writer`` is a random token per fold call, so a
writer can tell its own manifest from a rival's. Manifest 0 is implicit: an
empty archive, no object.
"""

from __future__ import annotations

import json
from bisect import bisect_left
from dataclasses import dataclass, field

from retain.errors import ArchiveCorrupt, InvalidStreamId
from retain.ids import StreamId

__all__ = ["FORMAT_VERSION", "Manifest", "SegmentInfo"]

FORMAT_VERSION = 1


@dataclass(frozen=True)
class SegmentInfo:
    """One segment as a manifest lists it: its name, id range, entry count and size in bytes."""

    name: str
    first: StreamId
    last: StreamId
    count: int
    #: the stored object's size in bytes (``"bytes"`` in the manifest's JSON)
    size: int

    def to_dict(self) -> dict[str, object]:
        """The segment's line in the manifest's JSON."""
        return {"name": self.name, "first": str(self.first), "last": str(self.last),
                "count": self.count, "bytes": self.size}


@dataclass(frozen=True)
class Manifest:
    """The state of one stream's archive as of manifest ``number`` (0: nothing archived yet)."""

    stream: str
    number: int = 0
    segments: tuple[SegmentInfo, ...] = ()
    writer: str = ""
    #: the sum of the segments' counts and of their sizes in bytes (``"bytes"`` in the JSON)
    entries: int = field(init=False, compare=False)
    size: int = field(init=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "entries", sum(segment.count for segment in self.segments))
        object.__setattr__(self, "size", sum(segment.size for segment in self.segments))

    @property
    def watermark(self) -> StreamId | None:
        """W: the highest archived id, or None when nothing is archived."""
        return self.segments[-1].last if self.segments else None

    def advance(self, segment: SegmentInfo, writer: str) -> Manifest:
        """The next manifest: this one plus ``segment``, which must start after W."""
        if self.watermark is not None and segment.first <= self.watermark:
            raise ArchiveCorrupt(f"segment {segment.name} starts at {segment.first}, "
                                 f"not after the watermark {self.watermark} of {self.stream!r}")
        return Manifest(self.stream, self.number + 1, (*self.segments, segment), writer)

    def covering(self, low: StreamId, high: StreamId) -> list[SegmentInfo]:
        """The segments whose id range meets ``low..high`` (both included), in id order."""
        start = bisect_left(self.segments, low, key=lambda segment: segment.last)
        found = []
        for segment in self.segments[start:]:
            if segment.first > high:
                break
            found.append(segment)
        return found

    def to_json(self) -> bytes:
        """The manifest as stored: UTF-8 JSON, keys in a fixed order."""
        return json.dumps({
            "format": FORMAT_VERSION,
            "stream": self.stream,
            "number": self.number,
            "watermark": str(self.watermark) if self.watermark is not None else None,
            "entries": self.entries,
            "bytes": self.size,
            "segments": [segment.to_dict() for segment in self.segments],
            "writer": self.writer,
        }, ensure_ascii=False, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, data: bytes, *, stream: str, number: int) -> Manifest:
        """Read manifest ``number`` of ``stream``, checking it holds what its name says.

        Raises:
            ArchiveCorrupt: not JSON, an unknown format version, another stream or
                number, segments out of order or overlapping, a watermark that is
                not the last segment's end.
        """
        where = f"manifest {number} of {stream!r}"
        try:
            document = json.loads(data)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ArchiveCorrupt(f"{where} is not JSON: {exc}") from exc
        if not isinstance(document, dict):
            raise ArchiveCorrupt(f"{where} is not a JSON object")
        if document.get("format") != FORMAT_VERSION:
            raise ArchiveCorrupt(f"{where} has format {document.get('format')!r}; "
                                 f"this retain reads format {FORMAT_VERSION}")
        if document.get("stream") != stream or document.get("number") != number:
            raise ArchiveCorrupt(f"{where} says it is manifest {document.get('number')!r} "
                                 f"of {document.get('stream')!r}")
        try:
            segments = tuple(SegmentInfo(str(item["name"]), StreamId.parse(item["first"]),
                                         StreamId.parse(item["last"]), int(item["count"]), int(item["bytes"]))
                             for item in document["segments"])
            manifest = cls(stream, number, segments, str(document.get("writer", "")))
            watermark = document["watermark"]
        except (KeyError, TypeError, ValueError, InvalidStreamId) as exc:
            raise ArchiveCorrupt(f"{where} has a malformed field: {exc!r}") from exc
        previous: StreamId | None = None
        for segment in segments:
            if segment.last < segment.first or (previous is not None and segment.first <= previous):
                raise ArchiveCorrupt(f"{where} lists segment {segment.name} out of order or overlapping")
            previous = segment.last
        if watermark != (str(manifest.watermark) if manifest.watermark is not None else None):
            raise ArchiveCorrupt(f"{where} has watermark {watermark!r} but its last segment ends at "
                                 f"{manifest.watermark}")
        return manifest
