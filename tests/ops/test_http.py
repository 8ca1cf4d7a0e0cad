"""retain.ops.http: the endpoints, served for real on loopback and asked over HTTP."""

from __future__ import annotations

import httpx
import pytest
from prometheus_client import CollectorRegistry, Counter

from retain.ops import DashboardPage, Health, OpsServer, StreamRow


@pytest.fixture
def served():
    health, registry = Health(), CollectorRegistry()
    Counter("retain_test_things", "Things counted by the test.", registry=registry).inc(3)
    reasons = {"redis": None}
    health.check("redis", lambda: reasons["redis"])
    server = OpsServer(("127.0.0.1", 0), health, registry,
                       lambda: DashboardPage("test", streams=[StreamRow("emq:{q}:stream:s", "MAXLEN ~ 5", length=4)]))
    server.start()
    try:
        yield f"http://{server.address[0]}:{server.address[1]}", reasons
    finally:
        server.stop()


class TestEndpoints:
    def test_health_ready_metrics_page(self, served):
        """healthz 200; readyz 200 then 503 with the reason; metrics in Prometheus' format; the page at /."""
        url, reasons = served
        assert httpx.get(f"{url}/healthz").json() == {"alive": True}
        assert httpx.get(f"{url}/readyz").status_code == 200
        reasons["redis"] = "Redis unavailable: connection refused"
        refused = httpx.get(f"{url}/readyz")
        assert refused.status_code == 503
        assert refused.json() == {"ready": False, "reasons": {"redis": "Redis unavailable: connection refused"}}
        metrics = httpx.get(f"{url}/metrics")
        assert metrics.headers["content-type"].startswith("text/plain") and "retain_test_things_total 3.0" in metrics.text
        page = httpx.get(f"{url}/")
        assert page.headers["content-type"].startswith("text/html") and 'data-length="4"' in page.text

    def test_only_gets(self, served):
        """The ops endpoints change nothing: anything but GET is refused."""
        url, _ = served
        assert httpx.post(f"{url}/readyz").status_code == 405
