"""logd on the network: a TCP or Unix stream socket of pipelined documents, and HTTP ``POST /``.

One writer thread applies every request, from every connection, in arrival order
(:data:`~concurrent.futures.ThreadPoolExecutor` with one worker: SQLite runs off the
event loop, and nothing else touches the store). Each connection reads documents as
they come and queues them on the writer without waiting for answers; a responder
task writes the answers back in request order. So a read sent behind a write on
the same connection is applied after it and sees it.

A ``watch`` subscribes the connection: after its answer, the backlog of deltas and
then every later commit touching the prefix arrive as ``{delta: {...}}`` documents,
interleaved with the answers to whatever else the connection sends.

HTTP ``POST /`` takes one document (YAML, or JSON by ``Content-Type: application/json``)
and answers in the same; ``Logd-Author`` and ``Logd-Scope`` headers set the session.
HTTP cannot stream, so ``watch`` there is ``unsupported``.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path as FsPath
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from retain.errors import InvalidDocument, LogdError
from retain.logd.paths import Path
from retain.wire.documents import Format, Framer, Limits, TooLarge, answer_error, dump, frame, load
from retain.logd.storage import CommitRecord
from retain.logd.store import Delta, Session, Store, delta_for
from retain.logd.verbs import Context, delta_document, handle, respond

__all__ = ["HTTP_STATUS", "LogdServer", "ServerThread", "StreamSockets", "ThreadedServer", "serve", "serve_forever"]

#: error code -> HTTP status, for curl users and proxies.
HTTP_STATUS = {"invalid_request": 400, "invalid_retain": 400, "not_found": 404, "precondition_failed": 409,
               "compacted": 410, "schema_violation": 422, "unsupported": 501, "storage_error": 500}
_MEDIA = {"json": "application/json", "yaml": "application/yaml"}


@dataclass(eq=False)
class _Subscription:
    """One watch: deltas for ``prefix`` in ``session``'s view, held back until its answer is written."""

    connection: _Connection
    session: Session
    prefix: Path
    fmt: Format
    held: list[bytes] = field(default_factory=list)
    active: bool = False

    def deliver(self, data: bytes) -> None:  # on the event loop
        if self.active:
            self.connection.send(data)
        else:
            self.held.append(data)

    def activate(self) -> None:  # on the event loop, right after the watch's answer
        self.active = True
        for data in self.held:
            self.connection.send(data)
        self.held.clear()


class _Connection:
    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.writer = writer
        self.waiting: list[_Subscription] = []  # subscribed, answer not yet written

    def send(self, data: bytes) -> None:
        if not self.writer.is_closing():
            self.writer.write(data)


class _Hub:
    """Every live watch; the store calls :meth:`publish` on the writer thread after each commit."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.lock = threading.Lock()
        self.subscriptions: list[_Subscription] = []

    def subscribe(self, connection: _Connection, session: Session, prefix: Path, backlog: list[Delta],
                  fmt: Format) -> None:
        subscription = _Subscription(connection, session, prefix, fmt,
                                     held=[frame(delta_document(delta), fmt) for delta in backlog])
        with self.lock:
            self.subscriptions.append(subscription)
        # Queued before the watch's own answer resolves, so the responder finds it waiting.
        self.loop.call_soon_threadsafe(connection.waiting.append, subscription)

    def publish(self, record: CommitRecord) -> None:
        with self.lock:
            subscriptions = list(self.subscriptions)
        for subscription in subscriptions:
            if subscription.session.sees(record):
                delta = delta_for(record, subscription.prefix)
                if delta is not None:
                    data = frame(delta_document(delta), subscription.fmt)
                    self.loop.call_soon_threadsafe(subscription.deliver, data)

    def drop(self, connection: _Connection) -> None:
        with self.lock:
            self.subscriptions = [s for s in self.subscriptions if s.connection is not connection]


class StreamSockets:
    """A stream server's listening sockets (TCP and/or Unix) and its open connections: bound together, closed together.

    ``handler(reader, writer)`` serves one connection; :meth:`close` stops listening, cancels
    the open connections (a handler takes the cancellation as a normal end) and waits for them.
    """

    def __init__(self, handler: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]) -> None:
        self.handler = handler
        self.address: tuple[str, int] | None = None  # the TCP address bound, once bound
        self._servers: list[asyncio.AbstractServer] = []
        self._connections: set[asyncio.Task[Any]] = set()

    async def bind(self, listen: tuple[str, int] | None, socket_path: str | None) -> None:
        if listen is not None:
            server = await asyncio.start_server(self._serve, *listen, limit=2**20)
            self.address = server.sockets[0].getsockname()[:2]
            self._servers.append(server)
        if socket_path is not None:
            with contextlib.suppress(FileNotFoundError):
                FsPath(socket_path).unlink()
            self._servers.append(await asyncio.start_unix_server(self._serve, socket_path))

    async def close(self) -> None:
        for server in self._servers:
            server.close()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        for server in self._servers:
            await server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            await self.handler(reader, writer)
        finally:
            self._connections.discard(task)


class LogdServer:
    """A store served on a stream socket (TCP ``listen`` or Unix ``socket_path``) and optionally HTTP."""

    def __init__(self, store: Store, *, listen: tuple[str, int] | None = None, socket_path: str | None = None,
                 http: tuple[str, int] | None = None, limits: Limits = Limits()) -> None:
        self.store, self.limits = store, limits
        self.listen, self.socket_path, self.http = listen, socket_path, http
        self.writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="logd-writer")
        self.address: tuple[str, int] | None = None  # the TCP address bound, once started
        self.http_address: tuple[str, int] | None = None
        self._sockets = StreamSockets(self._connection)
        self._http: uvicorn.Server | None = None
        self._http_task: asyncio.Task[None] | None = None
        self._hub: _Hub | None = None

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._hub = _Hub(loop)
        self.store.listen(self._hub.publish)
        await self._sockets.bind(self.listen, self.socket_path)
        self.address = self._sockets.address
        if self.http is not None:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(self.http)
            self.http_address = sock.getsockname()[:2]
            config = uvicorn.Config(self.http_app(), log_level="warning", access_log=False, lifespan="off")
            self._http = uvicorn.Server(config)
            self._http_task = asyncio.create_task(self._http.serve(sockets=[sock]))
            while not self._http.started and not self._http_task.done():
                await asyncio.sleep(0.01)

    async def aclose(self) -> None:
        await self._sockets.close()
        if self._http is not None and self._http_task is not None:
            self._http.should_exit = True
            await self._http_task
        self.writer.shutdown(wait=True)

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        loop = asyncio.get_running_loop()
        connection = _Connection(writer)
        hub = self._hub
        assert hub is not None
        context = Context(self.store, self.store.session())
        context.subscribe = lambda session, prefix, backlog: hub.subscribe(connection, session, prefix, backlog,
                                                                           context.format)
        answers: asyncio.Queue[asyncio.Future[tuple[dict[str, Any], Format]] | None] = asyncio.Queue()
        responder = asyncio.create_task(self._respond(answers, connection))
        framer = Framer(self.limits.max_bytes)
        try:
            while data := await reader.read(65536):
                for document in framer.feed(data):
                    await answers.put(loop.run_in_executor(self.writer, self._apply, context, document))
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            # aclose() cancels open connections to end them: a normal close, not an error to log.
            pass
        finally:
            await answers.put(None)
            await responder
            hub.drop(connection)
            writer.close()

    def _apply(self, context: Context, document: bytes | TooLarge) -> tuple[dict[str, Any], Format]:
        return respond(context, document, self.limits)  # on the writer thread

    async def _respond(self, answers: asyncio.Queue, connection: _Connection) -> None:
        while (answer := await answers.get()) is not None:
            result, fmt = await answer
            connection.send(frame(result, fmt))
            for subscription in connection.waiting:
                subscription.activate()
            connection.waiting.clear()
            with contextlib.suppress(ConnectionError):
                await connection.writer.drain()

    def http_app(self) -> Starlette:
        """The HTTP transport: ``POST /`` with one document."""

        async def post(request: Request) -> Response:
            wanted: Format = "json" if "json" in request.headers.get("content-type", "") else "yaml"
            body = bytearray()
            async for chunk in request.stream():
                body += chunk
                if len(body) > self.limits.max_bytes:
                    error = InvalidDocument(f"document is more than {self.limits.max_bytes} bytes")
                    return Response(dump(answer_error(error), wanted), 413, media_type=_MEDIA[wanted])
            loop = asyncio.get_running_loop()
            answer, fmt = await loop.run_in_executor(self.writer, self._apply_http, request.headers, bytes(body),
                                                     wanted)
            status = HTTP_STATUS.get(answer["error"]["code"], 500) if "error" in answer else 200
            return Response(dump(answer, fmt), status, media_type=_MEDIA[fmt])

        return Starlette(routes=[Route("/", post, methods=["POST"])])

    def _apply_http(self, headers: Any, body: bytes, wanted: Format) -> tuple[dict[str, Any], Format]:
        try:
            request, fmt = load(body, self.limits)
            if wanted == "json" and fmt != "json":
                raise InvalidDocument("Content-Type says JSON but the body is not JSON")
            session = self.store.session(author=headers.get("logd-author", "anonymous"),
                                         scope=headers.get("logd-scope"))
        except LogdError as exc:
            return answer_error(exc), wanted
        return handle(Context(self.store, session, format=fmt), request), fmt


def serve_forever(server: Any, on_ready: Callable[[Any], None] | None = None) -> None:
    """Run ``server`` (``start()`` / ``aclose()`` coroutines) until interrupted: Ctrl-C raises KeyboardInterrupt here.

    ``on_ready(server)`` is called once its sockets are bound.
    """

    async def main() -> None:
        await server.start()
        if on_ready is not None:
            on_ready(server)
        try:
            await asyncio.Event().wait()
        finally:
            await server.aclose()

    asyncio.run(main())


def serve(store: Store, *, on_ready: Callable[[LogdServer], None] | None = None, **options: Any) -> None:
    """Serve ``store`` until interrupted (Ctrl-C); ``on_ready`` is called once the sockets are bound."""
    serve_forever(LogdServer(store, **options), on_ready)


class ThreadedServer:
    """A server (``start()`` / ``aclose()`` coroutines) on an event loop of its own, in a background thread.

    For tests and demos; any server with that lifecycle (logd's, docd's, a controller) runs in one.
    """

    def __init__(self, server: Any) -> None:
        self.server = server
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=type(server).__name__, daemon=True)

    @property
    def address(self) -> tuple[str, int]:
        """The TCP address the server bound."""
        assert self.server.address is not None, "this server listens on no TCP address"
        return self.server.address

    def __enter__(self) -> Any:
        self._thread.start()
        try:
            asyncio.run_coroutine_threadsafe(self.server.start(), self._loop).result(timeout=30)
        except BaseException:
            self._stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self.server.aclose(), self._loop).result(timeout=30)
        self._stop()

    def _stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=30)
        self._loop.close()


class ServerThread(ThreadedServer):
    """A :class:`LogdServer` on an event loop of its own, in a background thread (tests, the demo).

    Example:
        >>> with ServerThread(store, listen=("127.0.0.1", 0)) as running:
        ...     Client(running.address)
    """

    server: LogdServer

    def __init__(self, store: Store, **options: Any) -> None:
        super().__init__(LogdServer(store, **options))

    @property
    def http_url(self) -> str:
        assert self.server.http_address is not None
        host, port = self.server.http_address
        return f"http://{host}:{port}/"
