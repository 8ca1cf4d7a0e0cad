"""Prometheus metrics of a served docd, and the readiness check that its owners answer.

| metric | type | labels |
|---|---|---|
| ``retain_docd_owner_requests_total`` | counter | ``owner``, ``outcome`` (``ok`` or the error code, ``unavailable`` for an owner down) |
| ``retain_docd_owner_request_duration_seconds`` | histogram: from sending to an owner to its answer | ``owner`` |

:func:`owners_check` is docd's readiness: not ready when every owner (logd and each
mounted controller) refuses a connection.

Example:
    >>> metrics = DocdMetrics()
    >>> server = DocdServer(table, listen=("127.0.0.1", 7410), observe=metrics.observe)
"""

from __future__ import annotations

import socket
from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Histogram

from retain.docd.mounts import LOGD, MountTable
from retain.logd.client import Address

__all__ = ["DocdMetrics", "owners_check"]

OWNER_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
#: seconds a readiness probe waits for an owner's connection
PROBE_TIMEOUT = 1.0


class DocdMetrics:
    """docd's metrics in a registry of their own; :meth:`observe` is the server's owner hook."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.requests = Counter("retain_docd_owner_requests", "Requests docd sent to an owner, by outcome.",
                                ["owner", "outcome"], registry=self.registry)
        self.duration = Histogram("retain_docd_owner_request_duration_seconds",
                                  "Seconds from sending a request to an owner to its answer.", ["owner"],
                                  buckets=OWNER_BUCKETS, registry=self.registry)

    def observe(self, owner: str, outcome: str, seconds: float) -> None:
        """Count one request to ``owner`` and its latency."""
        self.requests.labels(owner, outcome).inc()
        self.duration.labels(owner).observe(seconds)


def owners_check(table: MountTable, timeout: float = PROBE_TIMEOUT) -> Callable[[], str | None]:
    """A readiness check: None while some owner accepts a connection, else the reason naming each one down."""
    owners = [(LOGD, table.logd), *((mount.name, mount.address) for mount in table.mounts)]

    def check() -> str | None:
        down = []
        for name, address in owners:
            reason = _unreachable(address, timeout)
            if reason is None:
                return None
            down.append(f"{name} ({reason})")
        return "every owner is down: " + "; ".join(down)

    return check


def _unreachable(address: Address, timeout: float) -> str | None:
    family = socket.AF_UNIX if isinstance(address, str) else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.settimeout(timeout)
        try:
            probe.connect(address)
        except OSError as exc:
            where = address if isinstance(address, str) else f"{address[0]}:{address[1]}"
            return f"{where}: {exc.strerror or exc}"
    return None
