"""``retain streams run``'s operator endpoints: the driver's metrics, a status monitor, readiness and the dashboard.

The driver never waits on them: the monitor reads each declared stream's status every
:data:`STATUS_INTERVAL` seconds on a beat of its own (never inside the driver's beat),
the metrics take the driver's reports, and readiness asks for a beat no older than three
ticks, Redis and the archive reachable.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from retain._redis import RedisLike, translate_errors
from retain.beats import Beat
from retain.clock import utc_now
from retain.errors import ArchiveError, RetainError
from retain.ops import DashboardPage, Health, OpsServer, ReplicaPanel, Samples, StreamRow, beat_check
from retain.retention.metrics import DriverMetrics
from retain.retention.status import StreamStatus, stream_status

if TYPE_CHECKING:
    from retain.archive import Archive
    from retain.retention.driver import RetentionDriver
    from retain.retention.policy import Policy
    from retain.retention.policyfile import PolicyFile
    from retain.retention.report import SweepReport
    from retain.wire import Tokens

__all__ = ["STATUS_INTERVAL", "StreamsOps"]

#: seconds between two status reads of the streams (the dashboard's points: 720 of them fill its hour)
STATUS_INTERVAL = 5.0


class StreamsOps:
    """``retain streams run``'s ops: the driver's metrics, a status monitor, readiness and the dashboard.

    Hand :meth:`on_report` the driver's reports; :meth:`services` are the monitor and the HTTP server.
    """

    def __init__(self, conn: RedisLike, policy_file: PolicyFile, archive: Archive | None,
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
                             not_ready=readiness.listed())
