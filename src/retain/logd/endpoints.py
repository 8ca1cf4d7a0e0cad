"""The operator endpoints of logd's two daemons: ``retain logd serve`` and ``retain logd schedule``.

- a served logd: ready while its store opens and answers a read; its dashboard shows the
  head commit and the recent retain answers (:func:`logd_readiness`, :func:`logd_page`);
- the schedule: its beats as metrics, ready while a beat is recent and logd answers
  (:class:`ScheduleOps`).
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from retain.ops import DashboardPage, Health, LogdPanel, beat_check

if TYPE_CHECKING:
    from retain.logd.metrics import LogdMetrics
    from retain.logd.store import Store
    from retain.wire.requests import Answer

__all__ = ["ScheduleOps", "logd_page", "logd_readiness"]


def logd_readiness(db: str) -> Health:
    """logd's readiness: its SQLite file opens and answers a read."""
    health = Health()

    def store_openable() -> str | None:
        if db == ":memory:":
            return None
        if not Path(db).exists():
            return f"the store {db} is gone"
        try:
            with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1.0) as conn:
                conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.Error as exc:
            return f"the store {db} cannot be opened: {exc}"
        return None

    health.check("store", store_openable)
    return health


def logd_page(db: str, store: Store, metrics: LogdMetrics, health: Health) -> Callable[[], DashboardPage]:
    """logd's dashboard: its head commit and recent retain answers."""
    def page() -> DashboardPage:
        return DashboardPage(f"retain logd serve {db}", logd=LogdPanel(store.head, metrics.recent_retains()),
                             not_ready=health.readiness().listed())

    return page


class ScheduleOps:
    """``retain logd schedule``'s ops: its beats as metrics, readiness (beat, logd reachable), the recent answers."""

    def __init__(self, source: str, every: float) -> None:
        self.source = source
        self.registry = CollectorRegistry()
        self.beats = Counter("retain_schedule_beats", "Retain requests the schedule sent, by outcome.", ["outcome"],
                             registry=self.registry)
        self.deleted = Counter("retain_schedule_deleted", "Items the schedule's retain requests deleted.",
                               registry=self.registry)
        self.duration = Histogram("retain_schedule_beat_duration_seconds",
                                  "Seconds from sending a retain request to its answer.", registry=self.registry,
                                  buckets=(0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0))
        self.last_beat = Gauge("retain_last_beat_timestamp_seconds", "Clock instant of the last beat.",
                               registry=self.registry)
        self.health = Health()
        self._last: float | None = None
        self._error: str | None = None
        self._head = 0
        self._answers: list[tuple[float, str]] = []
        self._lock = threading.Lock()
        self.health.check("beat", beat_check(lambda: self._last, tick=every))
        self.health.check("logd", lambda: self._error)

    def answered(self, now: datetime, answer: Answer, summary: str, seconds: float) -> None:
        self.beats.labels("error" if "error" in answer else "ok").inc()
        self.duration.observe(seconds)
        self.last_beat.set(now.timestamp())
        body: Mapping[str, Any] = {} if "error" in answer else answer["result"].get("retain", {})
        self.deleted.inc(int(body.get("deleted", 0) or 0))
        with self._lock:
            self._last, self._error = now.timestamp(), None
            if isinstance(commit := body.get("commit"), int):
                self._head = commit
            self._answers = [(time.time(), summary), *self._answers][:10]

    def failed(self, now: datetime, error: Exception) -> None:
        self.beats.labels("unreachable").inc()
        with self._lock:
            self._error = f"logd unreachable: {error}"

    def page(self) -> DashboardPage:
        readiness = self.health.readiness()
        with self._lock:
            panel = LogdPanel(self._head, list(self._answers))
        return DashboardPage(f"retain logd schedule {self.source}", logd=panel,
                             not_ready=readiness.listed())
