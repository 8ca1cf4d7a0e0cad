"""pytest fixtures that start real servers; load them with ``pytest_plugins = ["retain.testing"]``.

- ``redis_server``: one :class:`~retain.servers.RedisServer` for the session.
- ``redis_conn``: a client of it, with the database flushed before each test.
- ``redis_cluster``: a 3-master :class:`~retain.servers.RedisCluster` for the session.
- ``seaweed_server``: one :class:`~retain.servers.SeaweedServer` (S3 on loopback) for the
  session; ``seaweed_server.archive(prefix)`` opens an Archive on its bucket.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from retain.servers import RedisCluster, RedisServer, SeaweedServer

__all__ = ["redis_cluster", "redis_conn", "redis_server", "seaweed_server"]


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    with RedisServer() as server:
        yield server


@pytest.fixture
def redis_conn(redis_server: RedisServer) -> Iterator[redis.Redis]:
    conn = redis_server.client()
    conn.flushall()
    try:
        yield conn
    finally:
        conn.close()


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[RedisCluster]:
    with RedisCluster(masters=3) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def seaweed_server() -> Iterator[SeaweedServer]:
    with SeaweedServer() as server:
        yield server
