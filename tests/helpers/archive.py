"""What the archive tests share: a fresh archive on each store kind, and the ids a store holds, read straight."""

from __future__ import annotations

import uuid
from typing import Any

import obstore
import pyarrow as pa
import pyarrow.parquet as pq

from retain.archive import Archive
from retain.streams import Stream

__all__ = ["SHARED_STORES", "STORES", "archived_ids", "open_archive"]

STORES = ["local", "memory", "s3"]
#: stores another process can open too (memory:// lives in one process)
SHARED_STORES = ["local", "s3"]


def open_archive(kind: str, tmp_path: Any, seaweed_server: Any) -> tuple[Archive, str, dict[str, Any]]:
    """A fresh, empty archive of ``kind``, with the URL and options that open it again."""
    if kind == "local":
        url, options = f"file://{tmp_path / f'archive-{uuid.uuid4().hex[:8]}'}", {}
    elif kind == "memory":
        url, options = "memory://", {}
    else:
        url, options = seaweed_server.archive_url(f"test-{uuid.uuid4().hex}"), seaweed_server.archive_options()
    return Archive(url, **options), url, options


def archived_ids(archive: Archive, stream: Stream) -> list[tuple[int, int]]:
    """Every row's id, ``(ms, seq)``, of every segment the current manifest lists, read straight from the store."""
    rows: list[tuple[int, int]] = []
    for segment in archive.manifest(stream).segments:
        data = bytes(obstore.get(archive.store, archive.segment_path(stream, segment)).bytes())
        table = pq.read_table(pa.BufferReader(data), columns=["ms", "seq"])
        rows += zip(table.column("ms").to_pylist(), table.column("seq").to_pylist())
    return rows
