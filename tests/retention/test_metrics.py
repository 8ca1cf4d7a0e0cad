"""retain.retention.metrics: a beat's report becomes Prometheus metrics, served over HTTP."""

from __future__ import annotations

import urllib.request

from retain.retention import DriverMetrics, RetentionDriver
from retain.servers import free_port
from retain.streams import RawKey
from retain.windows import MaxLen
from tests.helpers.retention import samples


class TestDriverMetrics:
    def test_reports_become_metrics(self, redis_conn):
        """Removed per stream, failures by error, lengths, beats and their duration add up over beats."""
        for index in range(30):
            redis_conn.xadd("good", {"i": str(index)})
        redis_conn.set("bad", "x")
        metrics = DriverMetrics()
        driver = RetentionDriver(redis_conn, [(RawKey("good"), MaxLen(10, approx=False)), (RawKey("bad"), MaxLen(1))],
                                 measure_lengths=True, on_report=metrics.observe)
        for _ in range(2):
            metrics.observe(driver.sweep())
        found = samples(metrics.exposition())
        assert found[("retain_stream_removed_total", (("stream", "good"),))] == 20
        assert found[("retain_stream_trim_failures_total", (("error", "WrongTypeError"), ("stream", "bad")))] == 2
        assert found[("retain_stream_length", (("stream", "good"),))] == 10
        assert found[("retain_beats_total", ())] == 2
        assert found[("retain_beat_duration_seconds_count", ())] == 2
        assert found[("retain_last_beat_timestamp_seconds", ())] > 1.7e9

    def test_registries_are_separate(self):
        """Two DriverMetrics in one process do not collide."""
        DriverMetrics()
        DriverMetrics()

    def test_serves_metrics_over_http(self):
        """serve() answers GET /metrics on loopback; shutdown() stops it."""
        metrics = DriverMetrics()
        port = free_port()
        server = metrics.serve(port)
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
                assert b"retain_beats_total 0.0" in response.read()
        finally:
            server.shutdown()
            server.server_close()
