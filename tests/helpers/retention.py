"""What the retention tests share: a hook that keeps a driver's reports, and metrics read back as samples."""

from __future__ import annotations

import threading

from prometheus_client.parser import text_string_to_metric_families

from retain.retention import Replicas, SweepReport
from tests.helpers.waiting import wait_for

__all__ = ["SOLO", "Reports", "lag_known", "samples"]

#: a driver that shares with no replica: it trims every stream from its first beat and takes no lease. For tests
#: that count a beat's commands on the wire, or start a new driver for each beat (a restarted replica would
#: wait out the leases its former self still holds: a lease time)
SOLO = Replicas(enabled=False)


class Reports:
    """An on_report hook that keeps every report and lets a test wait for a count."""

    def __init__(self) -> None:
        self.items: list[SweepReport] = []
        self._lock = threading.Lock()

    def __call__(self, report: SweepReport) -> None:
        with self._lock:
            self.items.append(report)

    def __len__(self) -> int:
        with self._lock:
            return len(self.items)

    def since(self, start: int) -> list[SweepReport]:
        with self._lock:
            return self.items[start:]

    def wait_more(self, count: int, timeout: float = 20.0) -> list[SweepReport]:
        start = len(self)
        wait_for(lambda: len(self) >= start + count, f"{count} more beats", timeout)
        return self.since(start)


def samples(exposition: bytes) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """A Prometheus exposition as ``{(sample name, sorted labels): value}``."""
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(exposition.decode())
            for sample in family.samples}


def lag_known(conn) -> bool:
    """True when XINFO GROUPS gives a group's lag (Redis 7 and Valkey; not Redis 6.2): undelivered is counted."""
    info = conn.info("server")
    return "valkey_version" in info or int(str(info["redis_version"]).split(".")[0]) >= 7
