"""HTTP: ``POST /`` with one document, answered in kind, served by uvicorn on a socket of its own.

:func:`http_app` is the transport, parameterised by a handler: it reads the body (at
most :attr:`~retain.wire.bounds.WireLimits.max_bytes`; more is answered 413), loads it --
JSON by ``Content-Type: application/json``, else YAML, JSON being read as JSON either
way -- and awaits ``handler(request, fmt, headers)`` for the answer document. A failure
is answered as on a stream (:func:`~retain.wire.requests.answer_failure`), with the
HTTP status of its code (:data:`HTTP_STATUS`). HTTP cannot stream, so whatever needs
a stream is the handler's to refuse.

:class:`HttpServer` binds the socket at :meth:`~HttpServer.start` and runs uvicorn on it
until :meth:`~HttpServer.aclose`, over TLS when given a certificate and key. Its connections
are bounded in time (:class:`HttpTimeouts`): an idle keep-alive connection is
closed after ``idle`` seconds (uvicorn's ``timeout_keep_alive``); a request whose headers
are not complete ``headers`` seconds after its first byte is dropped (slowloris); a body
still arriving ``body`` seconds after the headers is answered 408 and the connection closed.
A request's line and headers are at most 64 KiB however they arrive (h11 bounds a head still
incomplete; each complete one is measured too), else 400 and the connection closed.

As on a stream (:mod:`retain.wire.connection`), a body longer than ``inline_bytes`` is loaded and an
answer weighing more is dumped on :mod:`retain.wire.offload`'s pool, a big answer goes out in drained
64 KiB chunks, and a body stays counted in the budget, at its length plus its loaded size, until its
answer is written.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import h11
import uvicorn
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route
from uvicorn.protocols.http.h11_impl import H11Protocol

from retain.errors import InvalidDocument, InvalidInput, Unavailable
from retain.wire.bounds import ByteBudget, TooLarge, WireLimits
from retain.wire.documents import Format, dump
from retain.wire.offload import dump_answer, load_request
from retain.wire.requests import Answer, answer_failure
from retain.wire.sockets import HostPort, binding

__all__ = ["HTTP_STATUS", "HttpHandler", "HttpServer", "HttpTimeouts", "http_app"]

#: error code -> HTTP status, for curl users and proxies.
HTTP_STATUS = {"invalid_request": 400, "invalid_retain": 400, "limit_exceeded": 413, "unauthenticated": 401,
               "forbidden": 403, "not_found": 404, "precondition_failed": 409, "compacted": 410,
               "schema_violation": 422, "unsupported": 501, "storage_error": 500, "unavailable": 503}
TOO_LARGE = 413
TOO_SLOW = 408
_MAX_HEADER_BYTES = 64 * 1024
_CHUNK = 64 * 1024  # a big answer's body goes out in pieces this size, each drained before the next


@dataclass(frozen=True, slots=True)
class HttpTimeouts:
    """Seconds an HTTP connection may idle between requests, take over its headers, take over its body."""

    idle: float = 5.0
    headers: float = 10.0
    body: float = 30.0

    def __post_init__(self) -> None:
        for name in ("idle", "headers", "body"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not value > 0:
                raise InvalidInput(f"HTTP timeout {name} is a positive number of seconds (got {value!r})")
_MEDIA = {"json": "application/json", "yaml": "application/yaml"}

#: ``handler(request, fmt, headers) -> answer document``; it may raise (answered as on a stream).
HttpHandler = Callable[[Any, Format, Mapping[str, str]], Awaitable[Answer]]


def http_app(handler: HttpHandler, limits: WireLimits = WireLimits(), timeouts: HttpTimeouts = HttpTimeouts(),
             budget: ByteBudget | None = None) -> Starlette:
    """The HTTP transport: ``POST /`` with one document, answered by ``handler``; bodies being read draw on
    ``budget`` (past it: 503 ``unavailable``)."""
    budget = budget if budget is not None else ByteBudget()

    async def post(request: Request) -> Response:
        held = [0]
        try:
            return await _post(request, held)
        finally:
            budget.give(held[0])

    async def _post(request: Request, held: list[int]) -> Response:
        fmt: Format = "json" if "json" in request.headers.get("content-type", "") else "yaml"
        try:
            async with asyncio.timeout(timeouts.body):
                document = await _body(request, limits, budget, held)
        except TimeoutError:
            failure = answer_failure(InvalidDocument(f"the body did not arrive within {timeouts.body:g}s"))
            return Response(dump(failure, fmt), TOO_SLOW, media_type=_MEDIA[fmt], headers={"connection": "close"})
        too_large = document if isinstance(document, TooLarge) else None
        try:
            loaded = await load_request(document, limits)
            del document  # loaded: its bytes are no longer needed (still counted until the answer is out)
            spent = budget.short(loaded.size)
            if spent is not None:
                raise Unavailable(f"the server cannot hold this request: it loads to {loaded.size} bytes and "
                                  f"{spent} is spent; send it again later")
            held[0] += loaded.size
            if fmt == "json" and loaded.fmt != "json":
                raise InvalidDocument("Content-Type says JSON but the body is not JSON")
            fmt = loaded.fmt
            answer: Answer = await handler(loaded.value, fmt, request.headers)
        except Exception as exc:  # a bug must not take the server down
            answer = answer_failure(exc)
        if too_large is not None:
            status = HTTP_STATUS["unavailable"] if too_large.overloaded else TOO_LARGE
        else:
            status = HTTP_STATUS.get(answer["error"]["code"], 500) if "error" in answer else 200
        body = await dump_answer(answer, fmt, limits)
        if len(body) <= _CHUNK:
            return Response(body, status, media_type=_MEDIA[fmt])
        return StreamingResponse(_chunks(body), status, media_type=_MEDIA[fmt],
                                 headers={"content-length": str(len(body))})

    return Starlette(routes=[Route("/", post, methods=["POST"])])


async def _chunks(body: bytes) -> AsyncIterator[bytes]:
    """A big answer in pieces: uvicorn drains each before the next is asked for."""
    for start in range(0, len(body), _CHUNK):
        yield body[start:start + _CHUNK]


async def _body(request: Request, limits: WireLimits, budget: ByteBudget, held: list[int]) -> bytes | TooLarge:
    """The body, or a :class:`TooLarge` once it outgrows ``limits`` or ``budget`` (the rest is not read); the
    bytes it reserved from ``budget`` are added to ``held[0]``."""
    # The ASGI messages themselves, not Request.stream() (an async generator made and driven per request), and a
    # body that came in one message (nearly all) kept as it came, not copied: this runs for every request.
    body: bytes | bytearray = b""
    more = True
    while more:
        message = await request.receive()
        if message["type"] != "http.request":  # http.disconnect, as Request.stream() raises it
            raise ClientDisconnect()
        chunk, more = message.get("body", b""), message.get("more_body", False)
        if not chunk:
            continue
        if not body:
            body = chunk
        else:
            if not isinstance(body, bytearray):
                body = bytearray(body)
            body += chunk  # in place: a body of many chunks is not copied over and over
        if len(body) > limits.max_bytes:
            return TooLarge(len(body))
        spent = budget.short(len(chunk))
        if spent is not None:
            return TooLarge(len(body), overloaded=True, spent=spent)
        held[0] += len(chunk)
    return bytes(body) if isinstance(body, bytearray) else body


class _Guarded(H11Protocol):
    """uvicorn's h11 protocol, closing a connection whose request headers take longer than ``headers_timeout``."""

    headers_timeout = HttpTimeouts().headers

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.transport = _OneWrite(transport, self.loop)  # type: ignore[assignment]
        self._headers_due: asyncio.TimerHandle | None = None
        self._await_headers()
        self.conn.next_event = _bounded_head(self.conn.next_event)  # type: ignore[method-assign]

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.cycle is None or self.cycle.response_complete:
            self._await_headers()  # the bytes of a request whose headers are not complete yet
        elif self._headers_due is not None:
            self._headers_due.cancel()
            self._headers_due = None

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self._headers_due is not None:  # idle now: uvicorn's keep-alive timeout takes over
            self._headers_due.cancel()
            self._headers_due = None

    def connection_lost(self, exc: Exception | None) -> None:
        if self._headers_due is not None:
            self._headers_due.cancel()
        super().connection_lost(exc)

    def _await_headers(self) -> None:
        if self._headers_due is None:
            self._headers_due = self.loop.call_later(self.headers_timeout, self._too_slow)

    def _too_slow(self) -> None:
        self._headers_due = None
        if self.cycle is None or self.cycle.response_complete:
            self.transport.close()


class _OneWrite:
    """A transport that sends a response's status line and headers with the first body bytes, in one write.

    uvicorn writes the head and the body apart: two sends per answer, and in a server with other threads (logd's
    writer) each send hands the GIL over and waits to get it back. The head is held until the next write, or
    until the loop comes round once (a response whose body comes later still starts at once)."""

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport, self._loop = transport, loop
        self._held: bytes | None = None

    def write(self, data: bytes) -> None:
        if self._held is not None:
            data, self._held = self._held + data, None
        elif data.startswith(b"HTTP/1.1 ") and not data.startswith(b"HTTP/1.1 1"):  # a head, not 100 Continue
            self._held = data
            self._loop.call_soon(self._flush)
            return
        if data:
            self._transport.write(data)

    def _flush(self) -> None:
        if self._held is not None:
            data, self._held = self._held, None
            if not self._transport.is_closing():
                self._transport.write(data)

    def close(self) -> None:
        self._flush()
        self._transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


def _bounded_head(next_event: Callable[[], Any]) -> Callable[[], Any]:
    """h11's ``next_event``, refusing a request whose line and headers pass :data:`_MAX_HEADER_BYTES`.

    h11 bounds only an *incomplete* head: headers that arrive whole in one read (100 KiB did) were
    accepted. uvicorn answers the refusal 400 and closes the connection."""
    def bounded() -> Any:
        event = next_event()
        if isinstance(event, h11.Request):
            size = len(event.method) + len(event.target) + 12 + sum(len(name) + len(value) + 4
                                                                    for name, value in event.headers)
            if size > _MAX_HEADER_BYTES:
                raise h11.RemoteProtocolError(f"request line and headers of {size} bytes; at most "
                                              f"{_MAX_HEADER_BYTES}", error_status_hint=431)
        return event
    return bounded


class HttpServer:
    """An ASGI ``app`` served by uvicorn on ``address`` (port 0: any free one), from :meth:`start` to :meth:`aclose`.

    With ``tls=(certfile, keyfile)`` it serves HTTPS.
    """

    def __init__(self, app: Any, address: HostPort, *, tls: tuple[str, str] | None = None,
                 timeouts: HttpTimeouts = HttpTimeouts()) -> None:
        self.app, self.listen, self.tls, self.timeouts = app, address, tls, timeouts
        self.address: HostPort | None = None  # the address bound, once started
        self._server: uvicorn.Server | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        # proto IPPROTO_TCP, not 0: asyncio turns Nagle off only on sockets that say they are TCP, and a
        # socket made with proto 0 (and every connection it accepts) kept it on: a ~44 ms floor per
        # keep-alive request, the response's second write waiting for the client's delayed ACK.
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            with binding(self.listen):
                sock.bind(self.listen)
        except BaseException:
            sock.close()
            raise
        self.address = sock.getsockname()[:2]
        protocol = type("GuardedH11", (_Guarded,), {"headers_timeout": self.timeouts.headers})
        certfile, keyfile = self.tls if self.tls is not None else (None, None)
        config = uvicorn.Config(self.app, log_level="warning", access_log=False, lifespan="off", http=protocol,
                                timeout_keep_alive=max(1, round(self.timeouts.idle)),
                                h11_max_incomplete_event_size=_MAX_HEADER_BYTES,
                                ssl_certfile=certfile, ssl_keyfile=keyfile)
        self._server = uvicorn.Server(config)
        self._task = asyncio.create_task(self._server.serve(sockets=[sock]))
        while not self._server.started and not self._task.done():
            await asyncio.sleep(0.01)
        if self._task.done():
            self._task.result()  # what stopped uvicorn before it served (was silent: no HTTP listener, no error)
            raise OSError(f"the HTTP server on {self.address[0]}:{self.address[1]} stopped before it served")

    async def aclose(self) -> None:
        if self._server is not None and self._task is not None:
            self._server.should_exit = True
            await self._task
