"""Format-1 archives (manifests and segments) as the first retain wrote them, for the tests that read and
migrate them: retain itself no longer writes this format."""

from __future__ import annotations

from typing import Any

import obstore
import pyarrow as pa
import pyarrow.parquet as pq

from retain.archive.legacy.layout import manifest_path, segment_name, stream_dir
from retain.archive.legacy.manifest import Manifest, SegmentInfo
from retain.archive.legacy.segments import SCHEMA
from retain.archive.location import Location
from retain.ids import StreamId

__all__ = ["segment_bytes", "write_legacy"]

Entry = tuple[bytes, dict[bytes, bytes]]


def segment_bytes(key: str, entries: list[Entry], row_group_rows: int = 10_000) -> bytes:
    """A format-1 segment: ms, seq and the fields as a map of bytes, zstd, ``retain.format`` 1."""
    ids = [StreamId.parse(entry_id) for entry_id, _ in entries]
    table = pa.table({"ms": [entry.ms for entry in ids], "seq": [entry.seq for entry in ids],
                      "fields": pa.array([[(name.decode(), value) for name, value in fields.items()]
                                          for _, fields in entries], pa.map_(pa.string(), pa.binary()))},
                     schema=SCHEMA.with_metadata({b"retain.format": b"1", b"retain.stream": key.encode()}))
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="zstd", row_group_size=row_group_rows)
    return bytes(sink.getvalue().to_pybytes())


def write_legacy(url: str, streams: dict[str, list[list[Entry]]], **options: Any) -> dict[str, Manifest]:
    """Write a format-1 archive at ``url``: per stream key, its segments (each a list of entries, in id
    order) and the manifest series that lists them one by one. Returns each stream's last manifest."""
    store = Location.of(url, **options).store
    manifests = {}
    for key, segments in streams.items():
        manifest = Manifest(key)
        for entries in segments:
            first, last = StreamId.parse(entries[0][0]), StreamId.parse(entries[-1][0])
            data = segment_bytes(key, entries)
            info = SegmentInfo(segment_name(first, last), first, last, len(entries), len(data))
            obstore.put(store, f"{stream_dir(key)}/{info.name}", data)
            manifest = manifest.advance(info, "test-writer")
            obstore.put(store, manifest_path(key, manifest.number), manifest.to_json())
        manifests[key] = manifest
    return manifests
