"""What the four daemons share on the operator's side: ``--http`` and ``--log-format``, and each daemon's ops.

:mod:`retain.ops` knows nothing of the parts (it sits on the vocabulary and the wire);
this module joins them: for each daemon the readiness checks, the metrics registry
and the dashboard snapshot that :class:`~retain.ops.OpsServer` (or logd's own HTTP
app) serves.

- ``retain streams run``: its endpoints are the library's
  (:mod:`retain.retention.endpoints`), assembled by :func:`retain.retention.run`;
- ``retain logd serve``: :func:`logd_ops` -- the store openable, logd's metrics, its head
  commit and recent retain answers;
- ``retain logd schedule``: :class:`ScheduleOps` -- the beat, the logd it sends to;
- ``retain docd serve``: :func:`docd_ops` -- every owner down, docd's metrics.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from retain.logs import LOG_FORMATS
from retain.ops import (DashboardPage, Health, LogdPanel, OpsServer, Readiness, beat_check)
from retain.wire import Tokens, refuse_open

if TYPE_CHECKING:
    from retain.docd.mounts import MountTable
    from retain.logd import Store
    from retain.logd.metrics import LogdMetrics

__all__ = ["ScheduleOps", "docd_ops", "http_address", "http_option",
           "log_format_option", "logd_readiness", "ops_tokens", "ops_tokens_options"]

log = logging.getLogger("retain.ops")


def http_option(function: Any) -> Any:
    return click.option("--http", "http", metavar="HOST:PORT",
                        help="Serve /healthz, /readyz, /metrics and the dashboard (/) on HOST:PORT.")(function)


def ops_tokens_options(function: Any) -> Any:
    """--tokens and --insecure for a daemon whose only listening address is --http."""
    function = click.option("--insecure", is_flag=True,
                            help="Serve a non-loopback --http without --tokens (anyone may read the metrics).")(function)
    return click.option("--tokens", "ops_tokens_file", type=click.Path(dir_okay=False),
                        help="TOML token file: /metrics and the dashboard then need a bearer token that may read "
                             "(docs/operating.md).")(function)


def ops_tokens(tokens_file: str | None, insecure: bool, address: tuple[str, int] | None) -> Tokens | None:
    """The tokens guarding the ops address; a non-loopback address without them is refused unless ``insecure``."""
    tokens = Tokens.load(tokens_file) if tokens_file else None
    if tokens is not None and address is None:
        raise click.UsageError("--tokens guards the --http address: give --http too")
    refuse_open([address[0] if address else None], tokens, insecure)
    return tokens


def log_format_option(function: Any) -> Any:
    return click.option("--log-format", type=click.Choice(LOG_FORMATS), default="text", show_default=True,
                        help="How the daemon logs to stderr: text lines, or one JSON object per line.")(function)


def http_address(text: str, option: str = "--http") -> tuple[str, int]:
    """``HOST:PORT`` (``:9464``: loopback) as an address to bind; anything else is a usage error naming ``option``."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) < 65536:
        raise click.BadParameter(f"expected HOST:PORT such as 127.0.0.1:9464 (got {text!r})", param_hint=option)
    return host.strip("[]") or "127.0.0.1", int(port)


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
                             not_ready=not_ready(health.readiness()))

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

    def answered(self, now: datetime, answer: dict[str, Any], summary: str, seconds: float) -> None:
        error = answer.get("error")
        self.beats.labels("ok" if error is None else "error").inc()
        self.duration.observe(seconds)
        self.last_beat.set(now.timestamp())
        body = answer.get("result", {}).get("retain", {}) if isinstance(answer.get("result"), dict) else {}
        if isinstance(body, dict):
            self.deleted.inc(int(body.get("deleted", 0) or 0))
        with self._lock:
            self._last, self._error = now.timestamp(), None
            if isinstance(body, dict) and isinstance(body.get("commit"), int):
                self._head = body["commit"]
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
                             not_ready=not_ready(readiness))


def docd_ops(table: MountTable, address: tuple[str, int],
             tokens: Tokens | None = None) -> tuple[OpsServer, Callable[[str, str, float], None]]:
    """docd's ops server (ready while some owner answers) and the hook its server reports owner calls to."""
    from retain.docd.metrics import DocdMetrics, owners_check

    metrics, health = DocdMetrics(), Health()
    health.check("owners", owners_check(table))

    def page() -> DashboardPage:
        return DashboardPage(f"retain docd serve {table.source}", not_ready=not_ready(health.readiness()))

    return OpsServer(address, health, metrics.registry, page, tokens), metrics.observe


def not_ready(readiness: Readiness) -> Sequence[str]:
    """The reasons as the dashboard lists them: ``redis: Redis unavailable: ...``."""
    return [f"{name}: {reason}" for name, reason in readiness.reasons.items()]
