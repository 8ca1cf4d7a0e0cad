"""Helpers for logd's tests: a clock the test moves, and the limits the served logd runs with."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from retain.wire import WireLimits

START = datetime(2026, 9, 12, 8, 0, tzinfo=UTC)

#: the limits of the ``served`` logd: a 1 MiB document at most
LIMITS = WireLimits(max_bytes=1024 * 1024, max_depth=64)


class FakeClock:
    """A clock that only moves when the test says so."""

    def __init__(self, start: datetime = START) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, delta: timedelta) -> None:
        self.now += delta
