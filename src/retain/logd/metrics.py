"""Prometheus metrics of a served logd, fed by the server's answer hook and the store's commit listener.

| metric | type | labels |
|---|---|---|
| ``retain_logd_commits_total`` | counter: commits made since the server started | |
| ``retain_logd_head_commit`` | gauge: the store's head commit | |
| ``retain_logd_request_duration_seconds`` | histogram: from a request's arrival to its answer | ``verb`` |
| ``retain_logd_requests_total`` | counter | ``verb``, ``outcome`` (``ok`` or the error code) |
| ``retain_logd_retain_deleted_total`` | counter: items retain requests deleted | |
| ``retain_logd_retain_skipped_total`` | counter: items skipped (their state moved under the pass, every try) | |
| ``retain_logd_retain_retried_total`` | counter: items tried again after their batch's guard failed | |
| ``retain_logd_retain_unreadable_total`` | counter: items a rule could not read | |
| ``retain_logd_store_size_bytes`` | gauge, read at scrape: the SQLite file with its WAL | |

A request that is not one verb (``[]``, ``{a: 1, b: 2}``) counts as verb ``invalid``.
:attr:`LogdMetrics.retains` keeps the last few retain answers, newest first, for the dashboard.

Example:
    >>> metrics = LogdMetrics(store_path="logd.sqlite3")
    >>> server = LogdServer(store, listen=("127.0.0.1", 7420), observe=metrics.observe)
    >>> store.listen(metrics.committed)
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from retain.wire.requests import Answer

__all__ = ["LogdMetrics", "verb_of"]

#: requests are usually sub-millisecond to a few ms; a retain pass may take seconds
REQUEST_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
#: retain answers the dashboard lists
RECENT_RETAINS = 10


def verb_of(request: Any) -> str:
    """The verb of a request document (``{get: {...}}`` -> ``get``); ``invalid`` when it is not one verb."""
    if isinstance(request, dict) and len(request) == 1:
        verb = next(iter(request))
        if isinstance(verb, str) and verb.isidentifier():
            return verb
    return "invalid"


class LogdMetrics:
    """A logd's metrics in a registry of their own; :meth:`observe` is the server's answer hook."""

    def __init__(self, store_path: str | None = None, head: Callable[[], int] | None = None,
                 registry: CollectorRegistry | None = None, clock: Callable[[], float] = time.time) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.clock = clock
        self.commits = Counter("retain_logd_commits", "Commits the store made since the server started.",
                               registry=self.registry)
        self.duration = Histogram("retain_logd_request_duration_seconds",
                                  "Seconds from a request's arrival to its answer, by verb.", ["verb"],
                                  buckets=REQUEST_BUCKETS, registry=self.registry)
        self.requests = Counter("retain_logd_requests", "Requests answered, by verb and outcome (ok or error code).",
                                ["verb", "outcome"], registry=self.registry)
        self.deleted = Counter("retain_logd_retain_deleted", "Items retain requests deleted.", registry=self.registry)
        self.skipped = Counter("retain_logd_retain_skipped",
                               "Items retain requests skipped because they changed under the pass.",
                               registry=self.registry)
        self.retried = Counter("retain_logd_retain_retried",
                               "Items retain requests read again and tried again after their batch's guard failed.",
                               registry=self.registry)
        self.unreadable = Counter("retain_logd_retain_unreadable", "Items retain rules could not read.",
                                  registry=self.registry)
        self.registry.register(_StoreCollector(store_path, head))
        self._recent: deque[tuple[float, str]] = deque(maxlen=RECENT_RETAINS)
        # Each label set's child, looked up once: labels() validates and locks on every call (no more entries
        # than the registry holds children already).
        self._children: dict[tuple[object, ...], Any] = {}
        self._lock = threading.Lock()

    def committed(self, record: object) -> None:
        """A store listener: count one commit."""
        self.commits.inc()

    def observe(self, request: Any, answer: Answer, seconds: float) -> None:
        """Count one answered request; a retain answer adds its deleted, skipped, retried and unreadable items."""
        verb = verb_of(request)
        outcome = answer["error"]["code"] if "error" in answer else "ok"
        self._child(self.duration, verb).observe(seconds)
        self._child(self.requests, verb, outcome).inc()
        if verb != "retain":
            return
        if "error" in answer:
            self._remember(f"error {outcome}: {answer['error']['message']}")
            return
        body: Mapping[str, Any] = answer["result"]["retain"]  # this server's retain: a RetainPassResult
        for rule in body["rules"]:
            self.deleted.inc(int(rule.get("deleted", 0)))
            self.skipped.inc(int(rule.get("skipped", 0)))
            self.retried.inc(int(rule.get("retried", 0)))
            self.unreadable.inc(int(rule.get("unreadable", 0)))
        self._remember(_summary(body))

    def _child(self, metric: Counter | Histogram, *labels: str) -> Any:
        """``metric.labels(*labels)``, looked up once per label set."""
        child = self._children.get((metric, *labels))
        if child is None:
            child = self._children[(metric, *labels)] = metric.labels(*labels)
        return child

    def recent_retains(self) -> list[tuple[float, str]]:
        """The last retain answers as ``(epoch seconds, summary)``, newest first."""
        with self._lock:
            return list(reversed(self._recent))

    def _remember(self, summary: str) -> None:
        with self._lock:
            self._recent.append((self.clock(), summary))


def _summary(body: Mapping[str, Any]) -> str:
    rules = "; ".join(f"{rule.get('path')}: {rule.get('deleted', 0)}" for rule in body.get("rules", []))
    return f"deleted {body.get('deleted', 0)} at {body.get('now', '?')}, commit {body.get('commit', '?')}" + \
        (f" ({rules})" if rules else "")


class _StoreCollector(Collector):
    """The store's size on disk and head commit, read when scraped (never stale, no thread of its own)."""

    def __init__(self, store_path: str | None, head: Callable[[], int] | None) -> None:
        self.store_path, self.head = store_path, head

    def collect(self) -> Iterator[GaugeMetricFamily]:
        if self.store_path and self.store_path != ":memory:":
            size = sum(os.stat(self.store_path + suffix).st_size for suffix in ("", "-wal", "-shm")
                       if os.path.exists(self.store_path + suffix))
            yield GaugeMetricFamily("retain_logd_store_size_bytes", "Bytes the store's SQLite files take on disk.",
                                    value=size)
        if self.head is not None:
            yield GaugeMetricFamily("retain_logd_head_commit", "The store's head commit.", value=self.head())
