"""HTTP: ``POST /`` with one document, answered in kind, served by uvicorn on a socket of its own.

:func:`http_app` is the transport, parameterised by a handler: it reads the body (at
most :attr:`~retain.wire.bounds.Limits.max_bytes`; more is answered 413), loads it --
JSON by ``Content-Type: application/json``, else YAML, JSON being read as JSON either
way -- and awaits ``handler(request, fmt, headers)`` for the answer document. A failure
is answered as on a stream (:func:`~retain.wire.requests.answer_failure`), with the
HTTP status of its code (:data:`HTTP_STATUS`). HTTP cannot stream, so whatever needs
a stream is the handler's to refuse.

:class:`HttpServer` binds the socket at :meth:`~HttpServer.start` and runs uvicorn on it
until :meth:`~HttpServer.aclose`.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from retain.errors import InvalidDocument
from retain.wire.bounds import Limits, TooLarge
from retain.wire.documents import Format, dump, receive
from retain.wire.requests import answer_failure
from retain.wire.sockets import HostPort

__all__ = ["HTTP_STATUS", "HttpHandler", "HttpServer", "http_app"]

#: error code -> HTTP status, for curl users and proxies.
HTTP_STATUS = {"invalid_request": 400, "invalid_retain": 400, "not_found": 404, "precondition_failed": 409,
               "compacted": 410, "schema_violation": 422, "unsupported": 501, "storage_error": 500}
TOO_LARGE = 413
_MEDIA = {"json": "application/json", "yaml": "application/yaml"}

#: ``handler(request, fmt, headers) -> answer document``; it may raise (answered as on a stream).
HttpHandler = Callable[[Any, Format, Mapping[str, str]], Awaitable[dict[str, Any]]]


def http_app(handler: HttpHandler, limits: Limits = Limits()) -> Starlette:
    """The HTTP transport: ``POST /`` with one document, answered by ``handler``."""

    async def post(request: Request) -> Response:
        fmt: Format = "json" if "json" in request.headers.get("content-type", "") else "yaml"
        document = await _body(request, limits)
        try:
            value, loaded = receive(document, limits)
            if fmt == "json" and loaded != "json":
                raise InvalidDocument("Content-Type says JSON but the body is not JSON")
            fmt = loaded
            answer = await handler(value, fmt, request.headers)
        except Exception as exc:  # a bug must not take the server down
            answer = answer_failure(exc)
        if isinstance(document, TooLarge):
            status = TOO_LARGE
        else:
            status = HTTP_STATUS.get(answer["error"]["code"], 500) if "error" in answer else 200
        return Response(dump(answer, fmt), status, media_type=_MEDIA[fmt])

    return Starlette(routes=[Route("/", post, methods=["POST"])])


async def _body(request: Request, limits: Limits) -> bytes | TooLarge:
    """The body, or a :class:`TooLarge` once it outgrows ``limits`` (the rest is not read)."""
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limits.max_bytes:
            return TooLarge(len(body))
    return bytes(body)


class HttpServer:
    """An ASGI ``app`` served by uvicorn on ``address`` (port 0: any free one), from :meth:`start` to :meth:`aclose`."""

    def __init__(self, app: Any, address: HostPort) -> None:
        self.app, self.listen = app, address
        self.address: HostPort | None = None  # the address bound, once started
        self._server: uvicorn.Server | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(self.listen)
        self.address = sock.getsockname()[:2]
        config = uvicorn.Config(self.app, log_level="warning", access_log=False, lifespan="off")
        self._server = uvicorn.Server(config)
        self._task = asyncio.create_task(self._server.serve(sockets=[sock]))
        while not self._server.started and not self._task.done():
            await asyncio.sleep(0.01)

    async def aclose(self) -> None:
        if self._server is not None and self._task is not None:
            self._server.should_exit = True
            await self._task
