"""The metrics every Prometheus exporter has: the process's own (``process_*``) and what build it runs.

- ``process_cpu_seconds_total``, ``process_resident_memory_bytes``, ``process_virtual_memory_bytes``,
  ``process_open_fds``, ``process_max_fds``, ``process_start_time_seconds``: prometheus_client's
  ``ProcessCollector`` (read from ``/proc`` at each scrape; absent where there is none);
- ``retain_build_info{version, python, redis_py, deltalake}``: always 1, the labels say what runs
  (``none`` for a package that is not installed), so a dashboard can join any series on the build.

:func:`standard_metrics` adds both to a daemon's registry; :func:`retain.ops.ops_routes` calls it, so
every daemon's ``/metrics`` has them.
"""

from __future__ import annotations

import platform
import weakref
from importlib import metadata

from prometheus_client import CollectorRegistry, Gauge, ProcessCollector

from retain import __version__

__all__ = ["build_labels", "standard_metrics"]

#: registries that have them already: a registry refuses a second collector of the same names
_DONE: weakref.WeakSet[CollectorRegistry] = weakref.WeakSet()


def build_labels() -> dict[str, str]:
    """The labels of ``retain_build_info``: retain's version, Python's, redis-py's and deltalake's."""
    return {"version": __version__, "python": platform.python_version(), "redis_py": _version("redis"),
            "deltalake": _version("deltalake")}


def _version(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "none"


def standard_metrics(registry: CollectorRegistry) -> None:
    """Add the process metrics and ``retain_build_info`` to ``registry`` (once; a second call does nothing)."""
    if registry in _DONE:
        return
    ProcessCollector(registry=registry)
    labels = build_labels()
    Gauge("retain_build_info", "The build that runs: always 1, its versions as labels.", list(labels),
          registry=registry).labels(**labels).set(1)
    _DONE.add(registry)
