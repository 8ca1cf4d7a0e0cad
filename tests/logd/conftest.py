"""Fixtures for logd: a store on each backend -- a real SQLite file in a temp dir, a database of its own on the
session's real PostgreSQL -- a clock the test moves, the store served.

``open_store`` and everything built on it (``store``, ``served``) is parametrized over both backends, so each
test that takes them runs twice with the same assertions. Where a test looks past the store at its storage
(what compaction leaves), :func:`tests.helpers.postgres.raw_scalar` reads either; the horizon test checks
SQLite's file bytes and PostgreSQL's row versions after VACUUM.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from retain.logd import ServerThread, Store
from retain.logd.settings import Settings
from tests.helpers.logd import LIMITS, FakeClock
from tests.helpers.postgres import Databases

BACKENDS = ("sqlite", "postgres")


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(scope="session")
def pg_databases(postgres_server) -> Iterator[Databases]:
    """Databases on the session's PostgreSQL, made and dropped per test."""
    with Databases(postgres_server) as databases:
        yield databases


@pytest.fixture(params=BACKENDS)
def backend_name(request) -> str:
    return request.param


_numbers = itertools.count()


@pytest.fixture
def store_target(backend_name, tmp_path, request) -> Iterator:
    """``store_target(name)``: where a store called ``name`` lives in this test -- a file path or a database URL
    (the same name is the same store, so a test can reopen it)."""
    if backend_name == "sqlite":
        yield lambda name="logd.sqlite3": str(tmp_path / name)
        return
    databases: Databases = request.getfixturevalue("pg_databases")
    made: dict[str, str] = {}

    def target(name: str = "logd.sqlite3") -> str:
        if name not in made:
            made[name] = databases.create(f"t{next(_numbers)}")
        return made[name]

    try:
        yield target
    finally:
        for url in made.values():
            databases.drop(url)


@pytest.fixture
def open_store(store_target, clock):
    """``open_store(name, **settings)``: a store on a fresh SQLite file or PostgreSQL database, closed at the end."""
    opened: list[Store] = []

    def make(name: str = "logd.sqlite3", **settings) -> Store:
        store = Store.open(store_target(name), settings=Settings(synchronous="normal", **settings), clock=clock)
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()


@pytest.fixture
def store(open_store) -> Iterator[Store]:
    yield open_store()


@pytest.fixture
def served(store, tmp_path) -> Iterator[ServerThread]:
    """``store`` served on loopback TCP, a Unix socket (``served.socket_path``) and HTTP, with :data:`LIMITS`."""
    socket_path = str(tmp_path / "logd.sock")
    with ServerThread(store, listen=("127.0.0.1", 0), http=("127.0.0.1", 0), socket_path=socket_path,
                      limits=LIMITS) as running:
        running.socket_path = socket_path
        yield running
