"""logd on the network: a TCP or Unix stream socket of pipelined documents, and HTTP ``POST /``.

The transports are :mod:`retain.wire`'s; this module gives them logd's conversation.
One writer thread applies every request, from every connection, in arrival order
(:class:`~retain.logd.writer.Writer`: SQLite runs off the event loop, and nothing else writes
the store); patches queued behind each other are committed in one transaction, each its own
commit, and answered once it is durable (group commit). Each connection's requests are
submitted to the writer as they arrive, without waiting for answers; the connection
loop (:func:`~retain.wire.connection.serve_connection`) writes the answers back in request order.
So a read sent behind a write on the same connection is applied after it and sees it.

A retain request is answered in steps (:func:`~retain.logd.verbs.steps`): its reads run on
a pool of their own, each on a snapshot, and each of its batches is submitted to the writer
only when the one before is done, so every other client's request queued meanwhile runs
between two batches: no client waits for a whole pass. The connection's own requests behind
it wait for its answer (and so see all its deletes); behind a plain request they go straight
to the writer as before.

A ``get`` or ``list`` (:func:`~retain.logd.verbs.reads_only`) does not queue behind the writer: it is
answered on a snapshot of a WAL reader connection -- over HTTP at once, on a stream once the
connection's request before it is answered (so it still sees that request's writes), the
connection's next request waiting for it in turn. On SQLite a read of at most
:data:`INLINE_READ_RECORDS` records is answered right there on the event loop (tens of
microseconds); a larger one, or any on PostgreSQL, on a reader thread that keeps its connection.
A scoped read over HTTP goes to the writer, which makes the scope if it is new.

A ``watch`` subscribes the connection: after its answer, the backlog of deltas and
then every later commit touching the prefix arrive as ``{delta: {...}}`` documents,
interleaved with the answers to whatever else the connection sends.

``observe(request, answer, seconds)``, when given, is called with every answer and the
time from the request's arrival to it (the metrics' hook, :mod:`retain.logd.metrics`);
``http_routes`` are served on the HTTP address beside ``POST /`` (the daemon's
``/healthz``, ``/readyz``, ``/metrics`` and dashboard).

HTTP ``POST /`` (:func:`~retain.wire.http_app`) takes one document; ``Logd-Author``
and ``Logd-Scope`` headers set the session. HTTP cannot stream, so ``watch`` there is
``unsupported``.

With ``tokens`` (:class:`~retain.wire.Tokens`) every request runs under the caller's token:
a stream connection presents it first (:func:`~retain.wire.connection.serve_connection`), an HTTP
request in ``Authorization: Bearer``; the session's author is the token's name unless the
caller names one its patterns admit, and :func:`~retain.logd.verbs.authorize` checks each
verb. Without tokens the server is open, and refuses a non-loopback address unless ``insecure``.

With ``tls=(certfile, keyfile)`` both the TCP stream listener and HTTP speak TLS (the Unix socket,
guarded by its file mode, does not); the pair is loaded when the server is made, so a key that is
not the certificate's is refused before anything binds. Tokens on a non-loopback TCP listener
without TLS are refused unless ``insecure`` (:func:`~retain.wire.refuse_clear`).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

from starlette.routing import BaseRoute

from retain.errors import ReadBudgetExceeded
from retain.logd.handback import Handback
from retain.logd.loop_hand import LoopHand, small_write
from retain.logd.paths import Path
from retain.logd.postgres import CommitFollower, PostgresBackend
from retain.logd.steps import Step, drive_async
from retain.logd.storage import CommitRecord
from retain.logd.store import Delta, Session, Store, delta_for
from retain.logd.verbs import Context, delta_document, grouped, handle, reads_only, staged, steps
from retain.logd.writer import Writer
from retain.wire import (
    ByteBudget,
    Format,
    HttpTimeouts,
    StreamTimeouts,
    ThreadedServer,
    Token,
    Tokens,
    WireLimits,
    refuse_clear,
    refuse_open,
    server_context,
)
from retain.wire.connection import Link, Reply
from retain.wire.framing import frame
from retain.wire.http import HttpServer, http_app
from retain.wire.requests import Answer, ResultAnswer, answer_failure
from retain.wire.serving import StreamServer
from retain.wire.sockets import DEFAULT_SOCKET_MODE, HostPort

__all__ = ["LogdServer", "ServerThread"]

log = logging.getLogger(__name__)

_READERS = 4  # retain reads at once (each on a snapshot of its own); more wait for a reader
#: the most records a read answered on the event loop may touch (:meth:`LogdServer.read_inline`)
INLINE_READ_RECORDS = 256
R = TypeVar("R")

#: ``observe(request, answer document, seconds from arrival to answer)``
Observe = Callable[[Any, Answer, float], None]

log = logging.getLogger(__name__)


@dataclass(eq=False)
class _Subscription:
    """One watch: deltas for ``prefix`` in ``session``'s view, held back until its answer is written."""

    link: Link
    session: Session
    prefix: Path
    fmt: Format
    held: list[bytes] = field(default_factory=list)
    active: bool = False

    def deliver(self, data: bytes) -> None:  # on the event loop
        if self.active:
            self.link.push(data)
        elif sum(map(len, self.held)) + len(data) > self.link.max_unsent:
            self.link.abort()  # its answer is stuck behind answers the peer does not read: held without end
        else:
            self.held.append(data)

    def activate(self) -> None:  # on the event loop, right after the watch's answer
        self.active = True
        self.link.streaming = True  # quiet, but not idle: it waits for deltas
        for data in self.held:
            self.link.push(data)
        self.held.clear()


class _Hub:
    """Every live watch; the store calls :meth:`publish` on the writer thread after each commit."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.lock = threading.Lock()
        self.subscriptions: list[_Subscription] = []

    def subscribe(self, link: Link, session: Session, prefix: Path, backlog: list[Delta],
                  fmt: Format) -> _Subscription:
        subscription = _Subscription(link, session, prefix, fmt,
                                     held=[frame(delta_document(delta), fmt) for delta in backlog])
        with self.lock:
            self.subscriptions.append(subscription)
        return subscription

    def publish(self, record: CommitRecord) -> None:
        with self.lock:
            subscriptions = list(self.subscriptions)
        for subscription in subscriptions:
            if subscription.session.sees(record):
                delta = delta_for(record, subscription.prefix)
                if delta is not None:
                    data = frame(delta_document(delta), subscription.fmt)
                    self.loop.call_soon_threadsafe(subscription.deliver, data)

    def drop(self, link: Link) -> None:
        with self.lock:
            self.subscriptions = [s for s in self.subscriptions if s.link is not link]


class _Conversation:
    """One stream connection: its session, and its requests submitted to the writer as they arrive."""

    def __init__(self, server: LogdServer, hub: _Hub, link: Link) -> None:
        self.server, self.hub, self.link = server, hub, link
        grant = link.token
        session = server.store.session() if grant is None else server.store.session(author=grant.name)
        self.context = Context(server.store, session, subscribe=self._subscribe, grant=grant)
        self._subscribed: _Subscription | None = None  # by the request being applied (writer thread)
        self._last: asyncio.Future[Reply] | None = None  # the answer to the request before
        self._last_queued = True  # whether that one went to the writer as it arrived (the writer keeps its order)

    def answer(self, request: Any, fmt: Format) -> Awaitable[Reply]:
        """Submit a plain request to the writer at once, unless it must wait for a staged one before it; a
        staged request waits for the one before it, then runs its steps."""
        previous = self._last
        answer: asyncio.Future[Reply]
        if reads_only(request) and self.server.reads_apart:
            # Beside the writer, once the request before it is answered; the next one waits for it.
            if previous is None or previous.done():
                answer = self._read_now(request, fmt)
            else:
                answer = asyncio.ensure_future(self._read_after(previous, request, fmt))
            self._last, self._last_queued = answer, False
            return answer
        queued = not staged(request) and (previous is None or previous.done() or self._last_queued)
        if queued:
            answer = self.server.to_writer(grouped(request), self._apply, request, fmt, request=request)
        else:
            answer = asyncio.ensure_future(self._after(previous, request, fmt))
        self._last, self._last_queued = answer, queued
        if self.server.observe is not None:
            self.server.watch_answer(request, answer)
        return answer

    async def _after(self, previous: asyncio.Future[Reply] | None, request: Any, fmt: Format) -> Reply:
        if previous is not None:
            await asyncio.wait([previous])  # its outcome is its own answer's
        if not staged(request):
            return await self.server.to_writer(grouped(request), self._apply, request, fmt, request=request)
        self.context.format = fmt
        return Reply(await self.server.run_steps(self.context, request))

    async def _read_after(self, previous: asyncio.Future[Reply], request: Any, fmt: Format) -> Reply:
        await asyncio.wait([previous])
        return await self._read_now(request, fmt)

    def _read_now(self, request: Any, fmt: Format) -> asyncio.Future[Reply]:
        """The answer to a read: at once when it is small (:meth:`LogdServer.read_inline`), else from a reader
        thread."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Reply] = loop.create_future()
        try:
            answered = self.server.read_inline(lambda budget: self._read(request, fmt, budget))
        except Exception as exc:  # the transport answers it, as it would from the reader thread
            future.set_exception(exc)
            return future
        if answered is None:
            return loop.run_in_executor(self.server.readers, self._read, request, fmt)
        future.set_result(answered)
        return future

    def _read(self, request: Any, fmt: Format, budget: int | None = None) -> Reply:  # a reader thread, or inline
        with self.server.store.backend.reading(keep=True) as reads:
            context = Context(self.server.store, self.context.session.on(reads, budget), format=fmt,
                              grant=self.context.grant)
            return Reply(handle(context, request))

    def _apply(self, request: Any, fmt: Format) -> Reply:  # on the writer thread
        self.context.format = fmt
        try:
            document = handle(self.context, request)
        finally:
            subscription, self._subscribed = self._subscribed, None
        return Reply(document, then=None if subscription is None else subscription.activate)

    def _subscribe(self, session: Session, prefix: Path, backlog: list[Delta]) -> None:  # inside a watch
        self._subscribed = self.hub.subscribe(self.link, session, prefix, backlog, self.context.format)

    async def aclose(self) -> None:
        self.hub.drop(self.link)


class LogdServer:
    """A store served on a stream socket (TCP ``listen`` and/or Unix ``socket_path``) and optionally HTTP."""

    def __init__(self, store: Store, *, listen: HostPort | None = None, socket_path: str | None = None,
                 http: HostPort | None = None, limits: WireLimits = WireLimits(), tokens: Tokens | None = None,
                 insecure: bool = False, socket_mode: int = DEFAULT_SOCKET_MODE, tls: tuple[str, str] | None = None,
                 http_timeouts: HttpTimeouts = HttpTimeouts(), budget: ByteBudget | None = None,
                 stream_timeouts: StreamTimeouts = StreamTimeouts(), observe: Observe | None = None,
                 http_routes: Sequence[BaseRoute] = ()) -> None:
        refuse_open([None if listen is None else listen[0], None if http is None else http[0]], tokens, insecure)
        refuse_clear([None if listen is None else listen[0]], tokens, tls is not None, insecure)
        context = None if tls is None else server_context(*tls)  # a bad pair fails here, before anything binds
        self.store, self.limits, self.tokens, self.observe = store, limits, tokens, observe
        self.reads_apart = store.backend.reads_apart  # gets and lists on reader threads, beside the writer
        self.reads_inline = self.reads_apart and store.backend.local  # small ones on the loop (read_inline)
        self.budget = budget if budget is not None else ByteBudget()  # one for every transport
        self.writer = Writer(store)
        self.readers = ThreadPoolExecutor(max_workers=_READERS, thread_name_prefix="logd-reader")
        self._stream = (StreamServer(self._conversation, listen=listen, socket_path=socket_path, limits=limits,
                                     tokens=tokens, insecure=insecure, socket_mode=socket_mode,
                                     budget=self.budget, timeouts=stream_timeouts, tls=context)
                        if listen is not None or socket_path is not None else None)
        self._http = None
        if http is not None:
            app = http_app(self._answer_http, limits, http_timeouts, self.budget)
            app.router.routes.extend(http_routes)  # the operator's GET routes beside POST /
            self._http = HttpServer(app, http, tls=tls, timeouts=http_timeouts)
        self._hub: _Hub | None = None
        self._handback: Handback | None = None  # the writer's answers back to the loop, once started
        self._hand: LoopHand | None = None  # the loop running the writer's small patches, once started
        self._follower: CommitFollower | None = None
        self._catching_up = threading.Event()  # a catch-up is queued on the writer: another would find nothing new

    @property
    def address(self) -> HostPort | None:
        """The TCP address of the stream socket, once started."""
        return None if self._stream is None else self._stream.address

    @property
    def http_address(self) -> HostPort | None:
        """The HTTP address, once started."""
        return None if self._http is None else self._http.address

    async def start(self) -> None:
        self._hub = _Hub(asyncio.get_running_loop())
        self._handback = Handback(asyncio.get_running_loop())
        self.store.listen(self._hub.publish)
        if self.reads_inline:  # a local store: a small patch costs the loop less than handing the GIL over
            self._hand = LoopHand(asyncio.get_running_loop(), self.store)
            self.writer.hand = self._hand
        backend = self.store.backend
        if isinstance(backend, PostgresBackend):  # other servers commit too: their commits reach our watchers
            self._follower = CommitFollower(backend.url, self._wake)
        if self._stream is not None:
            await self._stream.start()
        if self._http is not None:
            await self._http.start()

    def _wake(self) -> None:
        """Another server may have committed: the writer publishes what the log holds past our last commit."""
        if not self._catching_up.is_set():
            self._catching_up.set()
            try:
                self.writer.submit(self._catch_up)
            except RuntimeError:  # shutting down
                pass

    def _catch_up(self) -> None:  # on the writer thread
        self._catching_up.clear()
        try:
            self.store.catch_up()
        except Exception:  # the database is away: the next wake tries again, nothing is skipped
            log.warning("logd: reading other servers' commits failed", exc_info=True)

    async def aclose(self) -> None:
        if self._follower is not None:
            self._follower.close()
        if self._stream is not None:
            await self._stream.aclose()
        if self._http is not None:
            await self._http.aclose()
        if self._hand is not None:
            self._hand.close()
        # Not on the loop: a group the writer handed the loop before close() waits for the loop to run it.
        await asyncio.to_thread(self.writer.shutdown, wait=True)
        self.readers.shutdown(wait=True)

    async def run_steps(self, context: Context, request: Any) -> Answer:
        """Answer a staged request: its reads on the reader pool, each write submitted to the writer behind
        whatever other clients sent meanwhile. A failure is the answer, as :func:`handle`'s would be."""
        loop = asyncio.get_running_loop()

        def run(step: Step) -> Awaitable[Any]:
            return loop.run_in_executor(self.writer if step.writes else self.readers, step.run)

        try:
            return await drive_async(steps(context, request), run)
        except Exception as exc:
            return answer_failure(exc)

    def to_writer(self, together: bool, apply: Callable[..., R], *args: Any, request: Any) -> asyncio.Future[R]:
        """``apply(*args)`` on the writer, after everything submitted before; ``together``: a patch, committed in
        one transaction with the patches queued beside it and answered once that is durable -- and when it
        is a small ``request`` on a local store, run by the event loop while the writer waits
        (:mod:`retain.logd.loop_hand`)."""
        if not together:
            submit = self.writer.submit
        elif self._hand is not None and small_write(request):
            submit = self.writer.submit_small_write
        else:
            submit = self.writer.submit_write
        if self._handback is None:  # not started: no loop to hand answers back to in batches yet
            return asyncio.wrap_future(submit(apply, *args))
        return self._handback.wrap(submit(apply, *args))

    def _conversation(self, link: Link) -> _Conversation:
        assert self._hub is not None, "connections arrive only once started"
        return _Conversation(self, self._hub, link)

    def watch_answer(self, request: Any, answer: asyncio.Future[Reply]) -> None:
        """Hand ``observe`` the answer once it is there, with the seconds it took from now."""
        arrived = time.perf_counter()

        def done(future: asyncio.Future[Reply]) -> None:
            if not future.cancelled() and future.exception() is None:
                self._observed(request, future.result().document, time.perf_counter() - arrived)

        answer.add_done_callback(done)

    def _observed(self, request: Any, answer: Answer, seconds: float) -> None:
        assert self.observe is not None
        try:
            self.observe(request, answer, seconds)
        except Exception:  # metrics must never break an answer
            log.exception("logd: the observe hook raised")

    async def _answer_http(self, request: Any, fmt: Format, headers: Mapping[str, str]) -> Answer:
        if self.observe is None:
            return await self._answer_http_request(request, fmt, headers)
        arrived = time.perf_counter()
        answer = await self._answer_http_request(request, fmt, headers)
        self._observed(request, answer, time.perf_counter() - arrived)
        return answer

    async def _answer_http_request(self, request: Any, fmt: Format, headers: Mapping[str, str]) -> Answer:
        loop = asyncio.get_running_loop()
        grant = None if self.tokens is None else self.tokens.bearer(headers)  # 401 before anything else
        author, scope = headers.get("logd-author"), headers.get("logd-scope")
        author = (author or "anonymous") if grant is None else grant.author(author)
        if reads_only(request) and scope is None and self.reads_apart:
            answered = self.read_inline(lambda budget: self._read_http(request, fmt, author, grant, budget))
            if answered is not None:
                return answered
            return await loop.run_in_executor(self.readers, self._read_http, request, fmt, author, grant)
        if not staged(request):
            # A scope header may make the scope, which is no part of a patch's commit: alone.
            return await self.to_writer(grouped(request) and scope is None, self._apply_http, request, fmt, author,
                                        scope, grant, request=request)
        session = await loop.run_in_executor(self.writer, partial(self.store.session, author, scope, maker=grant))
        return await self.run_steps(Context(self.store, session, format=fmt, grant=grant), request)

    def _read_http(self, request: Any, fmt: Format, author: str, grant: Token | None,
                   budget: int | None = None) -> ResultAnswer:
        with self.store.backend.reading(keep=True) as reads:  # a reader thread, or inline: a snapshot of its own
            return handle(Context(self.store, self.store.session(author=author).on(reads, budget), format=fmt,
                                  grant=grant), request)

    def read_inline(self, read: Callable[[int], R]) -> R | None:
        """``read(budget)`` answered here, on the event loop, when the store's reads are local and it touches
        at most :data:`INLINE_READ_RECORDS` records: its answer (an error it raises is raised here, as the
        reader thread would). None: it is larger (or the store is remote), and a reader thread answers it
        with the whole read budget.

        A small get from SQLite takes tens of microseconds; handing it to a thread and back cost ten times
        that in CPU and, under load, milliseconds of waiting for the GIL (`bench/logd_load.py`). The bound
        keeps what the loop may spend on one read to a few hundred records."""
        if not self.reads_inline:
            return None
        try:
            return read(INLINE_READ_RECORDS)
        except ReadBudgetExceeded:
            return None

    def _apply_http(self, request: Any, fmt: Format, author: str, scope: str | None,
                    grant: Token | None) -> ResultAnswer:
        session = self.store.session(author=author, scope=scope, maker=grant)  # on the writer thread: may make it
        return handle(Context(self.store, session, format=fmt, grant=grant), request)


class ServerThread(ThreadedServer[LogdServer]):
    """A :class:`LogdServer` on an event loop of its own, in a background thread (tests, the demo).

    Example:
        >>> with ServerThread(store, listen=("127.0.0.1", 0)) as running:
        ...     Client(running.address)
    """

    def __init__(self, store: Store, **options: Any) -> None:
        super().__init__(LogdServer(store, **options))

    @property
    def http_url(self) -> str:
        assert self.server.http_address is not None
        host, port = self.server.http_address
        return f"http://{host}:{port}/"
