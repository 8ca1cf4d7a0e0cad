"""ops: what lets people see into a running daemon -- health, readiness, metrics and a dashboard.

Every daemon (``retain streams run``, ``retain logd serve``, ``retain logd schedule``,
``retain docd serve``) serves on one HTTP address:

- ``GET /healthz``: 200 while the process runs;
- ``GET /readyz``: 200 when it can do its job, else 503 with a JSON reason per failing
  check (:class:`Health`: the last beat older than three ticks, Redis or the archive
  unreachable, the store unopenable, every owner down);
- ``GET /metrics``: Prometheus' text format from the daemon's own registry;
- ``GET /``: a dashboard page, server-rendered HTML with inline SVG, no script and no
  CDN, so it works offline (:mod:`retain.ops.dashboard`).

The pieces are pure where they can be: :class:`Health` gathers checks the daemon
registers, :class:`Samples` keeps a process's own samples for the last hour, the
dashboard renders a snapshot to HTML; :class:`OpsServer` serves them (a service for
:func:`retain.daemon.run_daemon`).

Imports: the vocabulary and :mod:`retain.wire` (its uvicorn runner); each part that
runs a daemon composes it with its own state in the module that assembles that daemon
(:mod:`retain.retention.endpoints`), imported only when the endpoints are served.
"""

from retain.ops.dashboard import DashboardPage, LogdPanel, ReplicaPanel, StreamRow, render_dashboard
from retain.ops.health import Health, Readiness, beat_check
from retain.ops.http import OpsServer, ops_routes
from retain.ops.samples import Samples

__all__ = [
    "DashboardPage",
    "ReplicaPanel",
    "Health",
    "LogdPanel",
    "OpsServer",
    "Readiness",
    "Samples",
    "StreamRow",
    "beat_check",
    "ops_routes",
    "render_dashboard",
]
