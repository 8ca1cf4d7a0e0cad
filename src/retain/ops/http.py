"""The operator's HTTP endpoints of a daemon: ``/healthz``, ``/readyz``, ``/metrics`` and the dashboard at ``/``.

:func:`ops_routes` gives the routes, so logd can add them to the HTTP app it
already serves; :class:`OpsServer` serves them alone on an address of their own
(the retention driver's and the schedule's ``--http``), as a service
:func:`retain.daemon.run_daemon` starts and stops.

With ``tokens``, ``/metrics`` and the dashboard need ``Authorization: Bearer SECRET``
of a token that may ``read`` (401 without one, 403 without the permission), as every
server that listens does (INV-AUTH); ``/healthz`` and ``/readyz`` stay open for the
probes of a supervisor, which carry no credentials.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

from prometheus_client import CollectorRegistry, disable_created_metrics
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import BaseRoute, Route

from retain.errors import Forbidden, Unauthenticated
from retain.ops.dashboard import DashboardPage, render_dashboard
from retain.ops.health import Health
from retain.ops.process import standard_metrics
from retain.wire import ThreadedServer, Tokens
from retain.wire.http import HttpServer
from retain.wire.sockets import HostPort

__all__ = ["OpsServer", "ops_routes"]

# A counter's or histogram's creation time is no series anyone graphs: without this every daemon's /metrics
# exports each one again as a separate *_created gauge (a process-wide switch of prometheus_client).
disable_created_metrics()  # type: ignore[no-untyped-call]  # prometheus_client leaves it unannotated


Endpoint = Callable[[Request], Awaitable[Response]]


def _guarded(endpoint: Endpoint, tokens: Tokens | None, what: str) -> Endpoint:
    """``endpoint`` behind a bearer token that may ``read`` (no tokens: open)."""
    if tokens is None:
        return endpoint
    known = tokens

    async def guarded(request: Request) -> Response:
        try:
            known.bearer(request.headers).require("read", what)
        except Unauthenticated as exc:
            return Response(json.dumps({"error": {"code": exc.code, "message": str(exc)}}), 401,
                            media_type="application/json", headers={"WWW-Authenticate": "Bearer"})
        except Forbidden as exc:
            return Response(json.dumps({"error": {"code": exc.code, "message": str(exc)}}), 403,
                            media_type="application/json")
        return await endpoint(request)

    return guarded


def ops_routes(health: Health, registry: CollectorRegistry,
               dashboard: Callable[[], DashboardPage] | None = None, tokens: Tokens | None = None) -> list[BaseRoute]:
    """``GET /healthz``, ``/readyz``, ``/metrics`` and, given a snapshot function, ``/`` (the dashboard); with
    ``tokens``, the last two need a bearer token that may ``read``. ``registry`` gets the metrics every
    exporter has (:func:`~retain.ops.process.standard_metrics`)."""
    standard_metrics(registry)

    async def healthz(request: Request) -> Response:
        return Response(json.dumps({"alive": True}), 200, media_type="application/json")

    async def readyz(request: Request) -> Response:
        readiness = health.readiness()
        return Response(json.dumps(readiness.to_document()), 200 if readiness.ready else 503,
                        media_type="application/json")

    async def metrics(request: Request) -> Response:
        return Response(generate_latest(registry), 200, media_type=CONTENT_TYPE_LATEST)

    routes: list[BaseRoute] = [Route("/healthz", healthz, methods=["GET"]), Route("/readyz", readyz, methods=["GET"]),
                               Route("/metrics", _guarded(metrics, tokens, "read the metrics"), methods=["GET"])]
    if dashboard is not None:
        snapshot = dashboard

        async def page(request: Request) -> Response:
            return HTMLResponse(render_dashboard(snapshot()))

        routes.append(Route("/", _guarded(page, tokens, "read the dashboard"), methods=["GET"]))
    return routes


class OpsServer:
    """The ops routes on ``address`` (port 0: any free one), in a thread: ``start()`` binds, ``stop()`` closes."""

    def __init__(self, address: HostPort, health: Health, registry: CollectorRegistry,
                 dashboard: Callable[[], DashboardPage] | None = None, tokens: Tokens | None = None) -> None:
        self._running = ThreadedServer(HttpServer(Starlette(routes=ops_routes(health, registry, dashboard, tokens)),
                                                  address))

    @property
    def address(self) -> HostPort:
        """The address bound, once started."""
        bound = self._running.server.address
        assert bound is not None, "the ops server is not started"
        return bound

    def start(self) -> None:
        self._running.start()

    def stop(self) -> None:
        self._running.stop()
