"""Fixtures for logd: a store on a real SQLite file in a temp dir, a clock the test moves, the store served."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from retain.logd import ServerThread, Store
from retain.logd.settings import Settings
from tests.helpers.logd import LIMITS, FakeClock


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def open_store(tmp_path, clock):
    """``open_store(**settings)``: a store on a fresh SQLite file, closed at the end."""
    opened: list[Store] = []

    def make(name: str = "logd.sqlite3", **settings) -> Store:
        store = Store.open(str(tmp_path / name), settings=Settings(synchronous="normal", **settings), clock=clock)
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
