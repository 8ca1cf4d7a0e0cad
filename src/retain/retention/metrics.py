"""Prometheus metrics for the retention driver, fed one :class:`SweepReport` at a time.

| metric | type | labels |
|---|---|---|
| ``retain_stream_removed_total`` | counter | ``stream`` |
| ``retain_stream_trim_failures_total`` | counter | ``stream``, ``error`` (class name) |
| ``retain_stream_folded_total`` | counter (archived streams) | ``stream`` |
| ``retain_stream_fold_failures_total`` | counter (archived streams, then not trimmed) | ``stream``, ``error`` |
| ``retain_stream_unconsumed_trimmed_total`` | counter (entries a trim removed that a group had not been delivered or had not acknowledged) | ``stream``, ``group`` |
| ``retain_stream_length`` | gauge (after the last trim, or the last status read) | ``stream`` |
| ``retain_stream_failures_total`` | counter: trims, folds and status reads that failed | ``stream``, ``kind`` (trim, fold, read) |
| ``retain_stream_window_entries`` | gauge (length windows) | ``stream`` |
| ``retain_stream_window_seconds`` | gauge (age windows) | ``stream`` |
| ``retain_stream_oldest_entry_age_seconds`` | gauge (0 for an empty stream) | ``stream`` |
| ``retain_stream_watermark_age_seconds`` | gauge: now less W's time (archived streams with a W) | ``stream`` |
| ``retain_stream_fold_lag_entries`` | gauge: entries the window drops not yet archived (archived streams) | ``stream`` |
| ``retain_beat_duration_seconds`` | histogram | |
| ``retain_beats_total`` | counter | |
| ``retain_last_beat_timestamp_seconds`` | gauge (the beat's clock instant) | |
| ``retain_replica_shards`` | gauge: shards this replica holds now (with replicas) | |
| ``retain_replica_members`` | gauge: live replicas of the policy, this one included | |
| ``retain_lease_takeovers_total`` | counter: shards taken over from a replica that stopped renewing them | |
| ``retain_lease_renew_failures_total`` | counter: lease renewals that did not go through (lost, or failed) | |
| ``retain_fold_races_lost_total`` | counter: folds that found another folder had committed W first | |
| ``retain_redis_up`` | gauge: 1 when Redis answered the last probe, else 0 | |
| ``retain_archive_up`` | gauge: 1 when the archive answered the last probe, else 0 (a policy with an archive) | |

The gauges after ``retain_stream_failures_total`` come from :meth:`DriverMetrics.observe_status`,
fed by the daemon's ops monitor (:func:`~retain.retention.status.stream_status`); ``retain_redis_up``
and ``retain_archive_up`` from :meth:`DriverMetrics.observe_reachable`, fed by the same monitor.

A failure is counted once: as a fold failure when an archived stream's fold
failed (so it was not trimmed), else as a trim failure.
Each :class:`DriverMetrics` has a registry of its own, so two drivers (or two
tests) in one process never collide on the global one.

Example:
    >>> metrics = DriverMetrics()
    >>> driver = RetentionDriver(conn, policy, measure_lengths=True, on_report=metrics.observe)
    >>> server = metrics.serve(9464)   # GET http://127.0.0.1:9464/metrics
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
    start_http_server,
)

from retain.retention.report import SweepReport
from retain.retention.status import StreamStatus

__all__ = ["DriverMetrics", "MetricsServer"]

#: beats are usually milliseconds; the top buckets catch a slow or failing server
BEAT_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

# A counter's or histogram's creation time is no series anyone graphs: without this each one is exported
# again as a separate *_created gauge.
disable_created_metrics()  # type: ignore[no-untyped-call]  # prometheus_client leaves it unannotated


class DriverMetrics:
    """The driver's metrics in a registry of their own; :meth:`observe` is an ``on_report`` hook."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.removed = Counter("retain_stream_removed", "Entries the retention driver removed from a stream.",
                               ["stream"], registry=self.registry)
        self.failures = Counter("retain_stream_trim_failures", "Trims of a stream that failed, by error.",
                                ["stream", "error"], registry=self.registry)
        self.folded = Counter("retain_stream_folded", "Entries the retention driver folded into the archive.",
                              ["stream"], registry=self.registry)
        self.fold_failures = Counter("retain_stream_fold_failures",
                                     "Folds of an archived stream that failed, so it was not trimmed, by error.",
                                     ["stream", "error"], registry=self.registry)
        self.unconsumed = Counter("retain_stream_unconsumed_trimmed",
                                  "Entries a trim removed that a consumer group had not been delivered or had not "
                                  "acknowledged.", ["stream", "group"], registry=self.registry)
        self.length = Gauge("retain_stream_length", "Length of a stream right after its last trim.",
                            ["stream"], registry=self.registry)
        self.duration = Histogram("retain_beat_duration_seconds",
                                  "Time from sending a beat's trims to the last answer.",
                                  buckets=BEAT_BUCKETS, registry=self.registry)
        self.failures_by_kind = Counter("retain_stream_failures",
                                        "Trims, folds and status reads of a stream that failed, by kind.",
                                        ["stream", "kind"], registry=self.registry)
        self.window_entries = Gauge("retain_stream_window_entries", "Entries a length window keeps.", ["stream"],
                                    registry=self.registry)
        self.window_seconds = Gauge("retain_stream_window_seconds", "Age an age window keeps, in seconds.",
                                    ["stream"], registry=self.registry)
        self.oldest_age = Gauge("retain_stream_oldest_entry_age_seconds",
                                "Seconds since the oldest entry of a stream was minted (0 when empty).", ["stream"],
                                registry=self.registry)
        self.watermark_age = Gauge("retain_stream_watermark_age_seconds",
                                   "Seconds between now and the time of the archive's watermark W.", ["stream"],
                                   registry=self.registry)
        self.fold_lag = Gauge("retain_stream_fold_lag_entries",
                              "Entries outside the window not yet folded into the archive.", ["stream"],
                              registry=self.registry)
        self.beats = Counter("retain_beats", "Beats the retention driver completed.", registry=self.registry)
        self.shards = Gauge("retain_replica_shards", "Shards of the policy this replica holds now.",
                            registry=self.registry)
        self.members = Gauge("retain_replica_members", "Live replicas of the policy, this one included.",
                             registry=self.registry)
        self.takeovers = Counter("retain_lease_takeovers",
                                 "Shards this replica took over from one that had stopped renewing their lease.",
                                 registry=self.registry)
        self.renew_failures = Counter("retain_lease_renew_failures",
                                      "Lease renewals that did not go through: the lease was lost, or the command "
                                      "failed.", registry=self.registry)
        self.races_lost = Counter("retain_fold_races_lost",
                                  "Folds that found another folder had committed W first (they read on from it).",
                                  registry=self.registry)
        self.last_beat = Gauge("retain_last_beat_timestamp_seconds", "Clock instant of the last completed beat.",
                               registry=self.registry)
        self.redis_up = Gauge("retain_redis_up", "1 when Redis answered the last probe, else 0.",
                              registry=self.registry)
        #: made at the first probe of an archive: a policy without one exports no series that reads as down
        self.archive_up: Gauge | None = None

    def observe(self, report: SweepReport) -> None:
        """Add one beat's report to the metrics."""
        for key, removed in report.removed_by.items():
            self.removed.labels(key).inc(removed)
        for key, folded in report.folded_by.items():
            self.folded.labels(key).inc(folded)
        for key, error in report.failures.items():
            counter = self.fold_failures if key in report.fold_failures else self.failures
            counter.labels(key, type(error).__name__).inc()
            self.failures_by_kind.labels(key, "fold" if key in report.fold_failures else "trim").inc()
        for (key, group), taken in report.unconsumed.items():
            self.unconsumed.labels(key, group).inc(taken.total)
        for key, length in report.lengths.items():
            self.length.labels(key).set(length)
        self.races_lost.inc(sum(report.races_lost.values()))
        replica = report.replica
        if replica is not None:
            self.shards.set(len(replica.held))
            self.members.set(replica.members)
            self.takeovers.inc(sum(1 for takeover in replica.changes.takeovers if takeover.expired))
            self.renew_failures.inc(replica.changes.renew_failures)
        self.duration.observe(report.elapsed)
        self.beats.inc()
        self.last_beat.set(report.at.timestamp())

    def observe_reachable(self, redis: bool, archive: bool | None = None) -> None:
        """Set ``retain_redis_up`` and, for a policy with an archive (``archive`` not None), ``retain_archive_up``."""
        self.redis_up.set(1 if redis else 0)
        if archive is None:
            return
        if self.archive_up is None:
            self.archive_up = Gauge("retain_archive_up", "1 when the archive answered the last probe, else 0.",
                                    registry=self.registry)
        self.archive_up.set(1 if archive else 0)

    def observe_status(self, statuses: Iterable[StreamStatus]) -> None:
        """Set the per-stream gauges from one status read; a stream whose read failed counts a ``read`` failure
        and keeps its last figures."""
        for status in statuses:
            key = status.key
            if status.error is not None:
                self.failures_by_kind.labels(key, "read").inc()
                continue
            self.length.labels(key).set(status.length)
            if status.window_entries is not None:
                self.window_entries.labels(key).set(status.window_entries)
            if status.window_seconds is not None:
                self.window_seconds.labels(key).set(status.window_seconds)
            self.oldest_age.labels(key).set(status.oldest_age_s or 0.0)
            if status.archived:
                self.fold_lag.labels(key).set(status.fold_lag)
                if status.watermark_age_s is not None:
                    self.watermark_age.labels(key).set(status.watermark_age_s)

    def exposition(self) -> bytes:
        """The metrics in the Prometheus text format, as ``/metrics`` serves them."""
        return generate_latest(self.registry)

    def serve(self, port: int, addr: str = "127.0.0.1") -> Any:
        """Serve ``/metrics`` over HTTP on a daemon thread; returns the server (``.shutdown()`` stops it)."""
        server, _thread = start_http_server(port, addr=addr, registry=self.registry)
        return server

    def server(self, port: int, addr: str = "127.0.0.1") -> MetricsServer:
        """``/metrics`` on ``addr:port`` as a service a daemon starts and stops (:mod:`retain.daemon`)."""
        return MetricsServer(self, port, addr)


class MetricsServer:
    """A :class:`DriverMetrics`' ``/metrics`` endpoint, not yet listening: :meth:`start`, :meth:`stop`."""

    def __init__(self, metrics: DriverMetrics, port: int, addr: str) -> None:
        self.metrics, self.port, self.addr = metrics, port, addr
        self._server: Any = None

    def start(self) -> None:
        """Listen; an address in use raises OSError."""
        self._server = self.metrics.serve(self.port, self.addr)

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server = None
