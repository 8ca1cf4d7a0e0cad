"""Fixtures for logd: a store on a real SQLite file in a temp dir, and a clock the test moves."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta, timezone

import pytest

from retain.logd import Store
from retain.logd.settings import Settings

START = datetime(2026, 9, 12, 8, 0, tzinfo=timezone.utc)


class FakeClock:
    """A clock that only moves when the test says so."""

    def __init__(self, start: datetime = START) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, delta: timedelta) -> None:
        self.now += delta


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
