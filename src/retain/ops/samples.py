"""A process's own samples over the last hour: what the dashboard draws its small time series from.

Each series (a stream's length, say) keeps ``(epoch seconds, value)`` pairs no
older than ``window`` seconds and at most ``limit`` of them (the oldest go first),
so memory stays bounded however long the daemon runs.
"""

from __future__ import annotations

import threading
from collections import deque

__all__ = ["Samples"]


class Samples:
    """Time series by name, each the last ``window`` seconds, at most ``limit`` points; safe across threads."""

    def __init__(self, window: float = 3600.0, limit: int = 720) -> None:
        self.window, self.limit = window, limit
        self._series: dict[str, deque[tuple[float, float]]] = {}
        self._lock = threading.Lock()

    def add(self, name: str, at: float, value: float) -> None:
        """Record ``value`` for ``name`` at ``at`` (epoch seconds); points older than the window are dropped."""
        with self._lock:
            series = self._series.setdefault(name, deque(maxlen=self.limit))
            series.append((at, value))
            while series and series[0][0] < at - self.window:
                series.popleft()

    def series(self, name: str) -> list[tuple[float, float]]:
        """The points of ``name``, oldest first (empty when none)."""
        with self._lock:
            return list(self._series.get(name, ()))
