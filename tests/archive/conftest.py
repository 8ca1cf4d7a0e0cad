"""Archives on every store kind, alike: a local directory, memory, and S3 on a real SeaweedFS."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pytest

from retain.archive import Archive
from retain.streams import StreamRef
from tests.helpers.archive import STORES, open_archive


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
