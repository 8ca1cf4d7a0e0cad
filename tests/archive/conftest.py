"""Archives on every store kind, alike: a local directory, memory, and S3 on a real SeaweedFS."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import obstore
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from retain.archive import Archive
from retain.streams import Stream, StreamRef

STORES = ["local", "memory", "s3"]
#: stores another process can open too (memory:// lives in one process)
SHARED_STORES = ["local", "s3"]


def open_archive(kind: str, tmp_path, seaweed_server) -> tuple[Archive, str, dict]:
    """A fresh, empty archive of ``kind``, with the URL and options that open it again."""
    if kind == "local":
        url, options = f"file://{tmp_path / f'archive-{uuid.uuid4().hex[:8]}'}", {}
    elif kind == "memory":
        url, options = "memory://", {}
    else:
        url, options = seaweed_server.archive_url(f"test-{uuid.uuid4().hex}"), seaweed_server.archive_options()
    return Archive(url, **options), url, options


@pytest.fixture(params=STORES)
def store_kind(request) -> str:
    return request.param


@pytest.fixture
def archive(store_kind, tmp_path, request) -> Archive:
    """An empty archive on the store kind of the test's parameter."""
    seaweed = request.getfixturevalue("seaweed_server") if store_kind == "s3" else None
    return open_archive(store_kind, tmp_path, seaweed)[0]


@pytest.fixture
def stream() -> StreamRef:
    return StreamRef("game", f"feed-{uuid.uuid4().hex[:8]}")


@pytest.fixture
def append(redis_conn) -> Callable[..., list[bytes]]:
    """append(stream, n, start=0) adds n entries {i, blob} and returns their ids in order."""

    def add(stream: StreamRef, count: int, start: int = 0) -> list[bytes]:
        pipe = redis_conn.pipeline(transaction=False)
        for index in range(start, start + count):
            pipe.xadd(stream.key, {"i": str(index), "blob": bytes([index % 256, 0, 255])})
        return list(pipe.execute())

    return add


def numeric(entry_id: bytes | str) -> tuple[int, int]:
    text = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
    ms, seq = text.split("-")
    return int(ms), int(seq)


def archived_ids(archive: Archive, stream: Stream) -> list[tuple[int, int]]:
    """Every row's id, ``(ms, seq)``, of every segment the current manifest lists, read straight from the store."""
    rows: list[tuple[int, int]] = []
    for segment in archive.manifest(stream).segments:
        data = bytes(obstore.get(archive.store, archive.segment_path(stream, segment)).bytes())
        table = pq.read_table(pa.BufferReader(data), columns=["ms", "seq"])
        rows += zip(table.column("ms").to_pylist(), table.column("seq").to_pylist())
    return rows
