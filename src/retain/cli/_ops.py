"""What the four daemons share on the operator's side: ``--http`` and ``--log-format``, and each daemon's ops.

:mod:`retain.ops` knows nothing of the parts (it sits on the vocabulary and the wire);
this module joins them: for each daemon the readiness checks, the metrics registry
and the dashboard snapshot that :class:`~retain.ops.OpsServer` (or logd's own HTTP
app) serves.

- ``retain streams run``: :class:`StreamsOps` -- a monitor reading each declared
  stream's status every :data:`STATUS_INTERVAL` seconds (never inside a beat), the
  driver's metrics, a beat no older than three ticks, Redis and the archive reachable;
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

from retain._redis import translate_errors
from retain.beats import Beat
from retain.clock import utc_now
from retain.errors import ArchiveError, RetainError
from retain.logs import LOG_FORMATS
from retain.ops import (DashboardPage, Health, LogdPanel, OpsServer, Readiness, ReplicaPanel, Samples, StreamRow,
                        beat_check)
from retain.retention import (DriverMetrics, Policy, PolicyFile, RetentionDriver, StreamStatus, SweepReport,
                              stream_status)
from retain.wire import Tokens, refuse_open

if TYPE_CHECKING:
    from retain.archive import Archive
    from retain.docd.mounts import MountTable
    from retain.logd import Store
    from retain.logd.metrics import LogdMetrics

__all__ = ["STATUS_INTERVAL", "ScheduleOps", "StreamsOps", "docd_ops", "http_address", "http_option",
           "log_format_option", "logd_readiness", "ops_tokens", "ops_tokens_options"]

#: seconds between two status reads of the streams (the dashboard's points: 720 of them fill its hour)
STATUS_INTERVAL = 5.0

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


class StreamsOps:
    """``retain streams run``'s ops: the driver's metrics, a status monitor, readiness and the dashboard.

    Hand :meth:`on_report` the driver's reports; :meth:`services` are the monitor and the HTTP server.
    """

    def __init__(self, conn: Any, policy_file: PolicyFile, archive: Archive | None,
                 clock: Callable[[], datetime] = utc_now) -> None:
        self.conn, self.policy_file, self.archive, self.clock = conn, policy_file, archive, clock
        #: the running driver (:meth:`attach`): whose streams the status reads and the page show
        self.driver: RetentionDriver | None = None
        self.metrics = DriverMetrics()
        self.samples = Samples()
        self.health = Health()
        self._statuses: tuple[StreamStatus, ...] = ()
        self._report: SweepReport | None = None
        self._lock = threading.Lock()
        self.monitor = Beat(self._read_status, tick=max(policy_file.tick, STATUS_INTERVAL),
                            max_backoff=max(policy_file.tick, STATUS_INTERVAL), name="stream-status")
        self.health.check("beat", beat_check(self._last_beat, tick=policy_file.tick))
        self.health.check("redis", self._redis_reachable)
        if archive is not None:
            self.health.check("archive", self._archive_reachable)
        self.health.detail("replica", self._replica)

    def attach(self, driver: RetentionDriver) -> None:
        """Follow ``driver``: its streams (with replicas, those of the shards it holds) are the ones shown."""
        self.driver = driver

    def _policy(self) -> Policy:
        """The streams this daemon trims now: its driver's (patterns expanded, its shards only), else the file's."""
        return self.driver.held_policy() if self.driver is not None else self.policy_file.policy

    def _replica(self) -> dict[str, object] | None:
        """``/readyz``'s ``details.replica``: this replica's name and the shards it held at the last beat."""
        with self._lock:
            replica = self._report.replica if self._report is not None else None
        if replica is None:
            return None
        return {"name": replica.name, "shards": sorted(replica.held), "of": replica.shards,
                "members": replica.members}

    def on_report(self, report: SweepReport) -> None:
        """The driver's hook: its metrics and the last beat."""
        self.metrics.observe(report)
        with self._lock:
            self._report = report
            read = {status.key for status in self._statuses}
        # A rescan (the first beat's included) changes the streams: read their status now rather than at the
        # next status tick, or a pattern's streams go up to STATUS_INTERVAL without gauges or a dashboard row.
        if {entry.key for entry in self._policy().entries} != read:
            self.monitor.poke()

    def services(self, address: tuple[str, int], tokens: Tokens | None = None) -> list[Any]:
        """The HTTP server first (a port in use stops the start before anything runs), then the monitor."""
        return [OpsServer(address, self.health, self.metrics.registry, self.page, tokens), self.monitor]

    def _last_beat(self) -> float | None:
        with self._lock:
            return None if self._report is None else self._report.at.timestamp()

    def _read_status(self) -> bool:
        redis_up = self._answers(self._redis_reachable)
        statuses = stream_status(self.conn, self._policy(), now=self.clock(), archive=self.archive)
        # The archive's probe is the status read itself (W of every archived stream): no second round of reads
        # against a store that may be remote.
        archive_up = not any(isinstance(status.error, ArchiveError) for status in statuses)
        self.metrics.observe_reachable(redis_up, archive_up if self.archive is not None else None)
        self.metrics.observe_status(statuses)
        for status in statuses:
            if status.error is None:
                self.samples.add(status.key, status.at.timestamp(), status.length)
        with self._lock:
            self._statuses = statuses
        return False

    @staticmethod
    def _answers(check: Callable[[], str | None]) -> bool:
        """True when a reachability check passes: ``retain_redis_up`` and ``retain_archive_up``."""
        try:
            return check() is None
        except RetainError:
            return False

    def _redis_reachable(self) -> str | None:
        with translate_errors():
            self.conn.ping()
        return None

    def _archive_reachable(self) -> str | None:
        assert self.archive is not None
        for entry in self._policy().archived:
            self.archive.watermark(entry.stream)
        return None

    def page(self) -> DashboardPage:
        """The dashboard's snapshot: one row per declared stream, from the last status read and the last beat."""
        with self._lock:
            statuses, report = {status.key: status for status in self._statuses}, self._report
        readiness = self.health.readiness()
        rows = []
        for entry in self._policy().entries:
            status = statuses.get(entry.key)
            error = report.failures.get(entry.key) if report is not None else None
            if status is not None and status.error is not None:
                error = error or status.error
            good = status is not None and status.error is None
            rows.append(StreamRow(
                entry.key, entry.window.describe(), length=status.length if good and status else None,
                bound=status.window_entries if status else None, archived=entry.archive,
                watermark=str(status.watermark) if status and status.watermark else None,
                watermark_age_s=status.watermark_age_s if status else None,
                fold_lag=status.fold_lag if status and entry.archive else None,
                last_beat=report.at.timestamp() if report is not None else None,
                error=str(error) if error is not None else None, samples=self.samples.series(entry.key)))
        replica = report.replica if report is not None else None
        panel = None if replica is None else ReplicaPanel(replica.name, sorted(replica.held), replica.shards,
                                                          replica.members)
        return DashboardPage(f"retain streams run {self.policy_file.source}", rows, replica=panel,
                             not_ready=not_ready(readiness))


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
