"""pytest fixtures that start real servers; load them with ``pytest_plugins = ["retain.testing"]``.

- ``redis_server``: one :class:`~retain.servers.RedisServer` for the session.
- ``redis_conn``: a client of it, with the database flushed before each test.
- ``redis_cluster``: a 3-master :class:`~retain.servers.RedisCluster` for the session.
- ``seaweed_server``: one :class:`~retain.servers.SeaweedServer` (S3 on loopback) for the
  session; ``seaweed_server.archive(prefix)`` opens an Archive on its bucket.
- ``valkey_server``: one :class:`~retain.servers.ValkeyServer` for the session.
- ``postgres_server``: one :class:`~retain.servers.PostgresServer` for the session;
  ``postgres_server.create_database(name)`` makes a database and returns its URL.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from retain.servers import PostgresServer, RedisCluster, RedisServer, SeaweedServer, ValkeyServer

__all__ = ["postgres_server", "redis_cluster", "redis_conn", "redis_server", "seaweed_server", "valkey_server"]


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


@pytest.fixture(scope="session")
def valkey_server() -> Iterator[ValkeyServer]:
    with ValkeyServer() as server:
        yield server


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    with PostgresServer() as server:
        yield server
