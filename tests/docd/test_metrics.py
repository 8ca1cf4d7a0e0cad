"""docd's readiness over its owners, against real listening sockets."""

from __future__ import annotations

import socket

from retain.docd import MountTable
from retain.docd.metrics import DocdMetrics, owners_check


class TestOwnersCheck:
    def test_ready_while_one_owner_listens(self, tmp_path):
        """Every owner down: the reason names each one; one listening (a Unix socket here): ready."""
        sock_path = str(tmp_path / "ctl.sock")
        with socket.socket() as closed:
            closed.bind(("127.0.0.1", 0))
            port = closed.getsockname()[1]  # bound, never listening: refuses connections
            table = MountTable.of({"verse.ctl": f"unix:{sock_path}"}, logd=f"127.0.0.1:{port}")
            check = owners_check(table, timeout=1.0)
            reason = check()
            assert reason is not None and reason.startswith("every owner is down: logd (127.0.0.1:")
            assert f"verse.ctl ({sock_path}" in reason
            with socket.socket(socket.AF_UNIX) as listening:
                listening.bind(sock_path)
                listening.listen()
                assert check() is None


class TestDocdMetrics:
    def test_requests_by_owner_and_outcome(self):
        """Each owner call is counted by owner and outcome, and its latency observed."""
        metrics = DocdMetrics()
        metrics.observe("logd", "ok", 0.002)
        metrics.observe("verse.ctl", "unavailable", 1.5)
        sample = metrics.registry.get_sample_value
        assert sample("retain_docd_owner_requests_total", {"owner": "logd", "outcome": "ok"}) == 1
        assert sample("retain_docd_owner_requests_total", {"owner": "verse.ctl", "outcome": "unavailable"}) == 1
        assert sample("retain_docd_owner_request_duration_seconds_count", {"owner": "verse.ctl"}) == 1
