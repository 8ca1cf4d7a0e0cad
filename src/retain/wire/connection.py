"""One connection's loop: documents in as they arrive, answers out in request order.

The loop reads documents off the stream with a :class:`~retain.wire.framing.Framer`,
loads each as it arrives and, in arrival order, asks the connection's
:class:`Conversation` for an awaitable :class:`Reply`. A responder awaits those in
request order and writes each answer, in its request's format, then runs the reply's
follow-up (``then``: start streaming a watch's deltas once its answer is out). So:

- a conversation that starts the work at once (logd submits each request to its one
  writer thread) pipelines: the next request is read and queued while this one runs;
- a conversation whose ``answer`` is a coroutine function (docd) answers one request
  after another: the responder runs each coroutine only once the previous answer is written.

Every failure becomes an answer here, once for every transport on a stream: a document
too large or not YAML or JSON (answered in the format it seems to be in), a
:class:`~retain.errors.LogdError`, or a bug (:func:`~retain.wire.requests.answer_failure`).
The connection goes on. A conversation may also push documents of its own through its
:class:`Link`, and close it.

Backpressure and timeouts (issue 13, finding 3; the numbers are :class:`~retain.wire.Limits`'
and :class:`~retain.wire.StreamTimeouts`' defaults):

- at most ``max_unanswered`` (64) requests are read ahead of the answers the peer has taken:
  an answer is taken once the socket's send buffer has room for it, so a peer that never
  reads stops being read from, and queues no more work for anyone's writer;
- an unfinished document holds at most ``max_bytes`` and draws on the server's
  :class:`~retain.wire.ByteBudget`; past it the document is dropped and answered ``unavailable``;
- a watch's deltas wait unsent for a peer that stopped reading them up to ``max_unsent``
  (64 MiB); past it the connection is closed;
- a document must end within ``document`` (30 s) of its first byte, else it is refused and
  the connection closed (slowloris); a connection owing no answer and streaming no watch is
  closed ``idle`` (300 s) after its last answer went out (or it began) without a byte since.

When the peer closes its side, what it sent is still answered; when the server closes,
the connection stops at once (the answer being awaited is cancelled).

With tokens (:class:`~retain.wire.auth.Tokens`) the connection's first document must be
``{auth: {token: SECRET}}``: it is answered ``{result: {auth: {name: NAME}}}`` and the
conversation is made only then, its :class:`Link` carrying the token; anything else first
is answered ``unauthenticated`` and the connection closed. Without tokens an ``auth``
document first is answered all the same (``name: null``), so a client with a token can
talk to an open server.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from retain.errors import InvalidDocument, InvalidRequest, Unauthenticated
from retain.wire.auth import Token, Tokens
from retain.wire.bounds import ByteBudget, Limits, StreamTimeouts, TooLarge
from retain.wire.documents import Format, answer_format, receive
from retain.wire.framing import Framer, frame
from retain.wire.requests import answer_failure

__all__ = ["Conversation", "Link", "Reply", "serve_connection"]

_CHUNK = 65536
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Reply:
    """An answer document, and what to do once it is written (start streaming a watch's deltas)."""

    document: dict[str, Any]
    then: Callable[[], None] | None = None


class Link:
    """One connection as its conversation sees it: send a document of its own, or close it.

    :meth:`push` is for documents the peer did not ask for (a watch's deltas): nothing waits for the peer
    to read those, so once more than ``max_unsent`` bytes wait unsent the connection is closed rather than
    buffer without end; the watcher reconnects and reads from the commit it got to.
    """

    def __init__(self, writer: asyncio.StreamWriter, token: Token | None = None,
                 max_unsent: int = Limits().max_unsent) -> None:
        self.writer, self.max_unsent = writer, max_unsent
        self.token = token  # the token the connection presented; None on an open server
        self.streaming = False  # a watch streams to it: it may be quiet for ever without being idle

    def send(self, document: dict[str, Any], fmt: Format) -> None:
        self.write(frame(document, fmt))

    def push(self, data: bytes) -> None:
        """Write framed bytes nobody asked for; close the connection if its peer has stopped reading them."""
        if self.writer.is_closing():
            return
        if self.writer.transport.get_write_buffer_size() + len(data) > self.max_unsent:
            log.warning("closing a connection whose peer left %d bytes of pushed documents unread (limit %d)",
                        self.writer.transport.get_write_buffer_size(), self.max_unsent)
            self.abort()
            return
        self.writer.write(data)

    def abort(self) -> None:
        """Close at once, dropping what waits unsent (closing would wait for a peer that does not read)."""
        self.writer.transport.abort()

    def write(self, data: bytes) -> None:
        """Write framed bytes; nothing once the connection is closing."""
        if not self.writer.is_closing():
            self.writer.write(data)

    async def drain(self) -> None:
        with contextlib.suppress(ConnectionError):
            await self.writer.drain()

    def close(self) -> None:
        self.writer.close()


class Conversation(Protocol):
    """What answers one connection's requests; :meth:`answer` is called in arrival order, on the event loop."""

    def answer(self, request: Any, fmt: Format) -> Awaitable[Reply]: ...

    async def aclose(self) -> None: ...


_Pending = tuple[Awaitable[Reply], Format]


async def serve_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                           conversation: Callable[[Link], Conversation], limits: Limits,
                           tokens: Tokens | None = None, budget: ByteBudget | None = None,
                           timeouts: StreamTimeouts = StreamTimeouts()) -> None:
    """Serve one connection with a conversation of its own, until the peer leaves or the task is cancelled.

    With ``tokens``, the first document must present one (``{auth: {token: SECRET}}``). At most
    ``limits.max_unanswered`` requests are read ahead of the answers the peer has taken; unfinished documents
    draw on ``budget``; ``timeouts`` close an idle connection and one whose document does not finish."""
    link = Link(writer, max_unsent=limits.max_unsent)
    talk: Conversation | None = None
    pending: asyncio.Queue[_Pending | None] = asyncio.Queue()
    window = _Window(limits.max_unanswered)
    responder = asyncio.create_task(_respond(pending, link, window))
    framer = Framer(limits.max_bytes, budget)
    loop = asyncio.get_running_loop()
    first, begun = True, loop.time()
    # An answer going out re-arms the idle deadline of the read under way: it idles from that answer on.
    window.deadline = lambda: _deadline(framer, begun, link, window, timeouts)
    try:
        while True:
            deadline = _deadline(framer, begun, link, window, timeouts)
            try:
                async with asyncio.timeout_at(deadline) as window.timer:
                    data = await reader.read(_CHUNK)
            except TimeoutError:
                if not framer.unfinished and not _idle(window, link, timeouts, loop.time()):
                    continue  # answers went out meanwhile, or a watch began: not idle after all
                if framer.unfinished:
                    failure = InvalidDocument(f"a document must end (a line '...') within {timeouts.document:g}s "
                                              "of its first byte; closing the connection")
                    pending.put_nowait((_ready(answer_failure(failure)), "yaml"))
                break  # idle: nothing to answer; too slow: its refusal is the last answer
            finally:
                window.timer = None
            if not data:
                break
            was_unfinished = framer.unfinished
            documents = framer.feed(data)
            if framer.unfinished and (documents or not was_unfinished):
                begun = loop.time()  # a new document has begun
            refused = False
            for document in documents:
                await window.reserve()  # the peer has not taken enough answers yet: stop reading its requests
                if first:
                    first = False
                    answer, fmt, presented = _authenticate(document, tokens, limits)
                    if answer is not None:
                        pending.put_nowait((_ready(answer), fmt))
                    if presented is None and tokens is not None:
                        refused = True  # answer the refusal, then close
                        break
                    link.token = presented if isinstance(presented, Token) else None
                    talk = conversation(link)
                    if answer is not None:
                        continue
                assert talk is not None
                pending.put_nowait(_arrive(talk, document, limits))
            if refused:
                break
        pending.put_nowait(None)  # the peer is done sending (or was refused, or too slow): answer what it sent
        await responder
    except (ConnectionError, asyncio.IncompleteReadError):
        pass  # the peer left: nobody to answer
    except asyncio.CancelledError:
        pass  # the server is closing: a normal end, not an error to log
    finally:
        framer.close()
        responder.cancel()
        await asyncio.gather(responder, return_exceptions=True)
        _discard(pending)
        if talk is not None:
            with contextlib.suppress(Exception):
                await talk.aclose()
        writer.close()


class _Window:
    """The requests a connection has read ahead of the answers its peer took: at most ``size``."""

    def __init__(self, size: int) -> None:
        self._free = asyncio.Semaphore(size)
        self.owed = 0
        self.answered = asyncio.get_running_loop().time()  # when the last answer went out (or the start)
        self.timer: asyncio.Timeout | None = None  # the deadline of the read under way, if one is
        self.deadline: Callable[[], float | None] = lambda: None  # what that deadline should be now

    async def reserve(self) -> None:
        await self._free.acquire()
        self.owed += 1

    def release(self) -> None:
        self.owed -= 1
        self.answered = asyncio.get_running_loop().time()
        self._free.release()
        if self.timer is not None and not self.timer.expired():
            self.timer.reschedule(self.deadline())


def _deadline(framer: Framer, begun: float, link: Link, window: _Window, timeouts: StreamTimeouts) -> float | None:
    """When the next read gives up: a document begun must end in time; a connection with nothing under way
    (no answer owed, no watch streaming) may idle only so long; otherwise never."""
    if framer.unfinished:
        return begun + timeouts.document
    if timeouts.idle is not None and not link.streaming and window.owed == 0:
        # Owing answers, it is busy (no deadline: the last answer re-arms it); owing none, it may idle from
        # its last answer on -- not from the read that began before that answer, which doubled the timeout.
        return window.answered + timeouts.idle
    return None


def _idle(window: _Window, link: Link, timeouts: StreamTimeouts, now: float) -> bool:
    """Whether the connection has owed nothing and streamed nothing for the whole idle timeout."""
    return (timeouts.idle is not None and window.owed == 0 and not link.streaming
            and now - window.answered >= timeouts.idle)


_OPEN = object()  # an auth document accepted by an open server: no token to carry


def _authenticate(document: bytes | TooLarge, tokens: Tokens | None,
                  limits: Limits) -> tuple[dict[str, Any] | None, Format, Token | object | None]:
    """The connection's first document: (its answer if it was an ``auth`` one, its format, the token presented).

    On an open server a first document that is not ``auth`` is no answer of its own (None, the conversation
    answers it) and the token is :data:`_OPEN`; with tokens it is refused, and the token None.
    """
    fmt = answer_format(document)
    try:
        request, fmt = receive(document, limits)
    except Exception as exc:
        if tokens is None:
            return None, fmt, _OPEN
        return answer_failure(exc), fmt, None
    is_auth = isinstance(request, dict) and set(request) == {"auth"}
    if not is_auth:
        if tokens is None:
            return None, fmt, _OPEN
        return answer_failure(Unauthenticated("this server needs a token: the first document on a connection is "
                                              "{auth: {token: SECRET}}")), fmt, None
    body = request["auth"]
    if not isinstance(body, dict) or set(body) != {"token"}:
        failure = InvalidRequest(f"auth is {{auth: {{token: SECRET}}}} (got fields {sorted(body) if isinstance(body, dict) else body!r})")
        return answer_failure(failure), fmt, (_OPEN if tokens is None else None)
    if tokens is None:
        return {"result": {"auth": {"name": None}}}, fmt, _OPEN
    try:
        token = tokens.present(body["token"])
    except Unauthenticated as exc:
        return answer_failure(exc), fmt, None
    return {"result": {"auth": {"name": token.name}}}, fmt, token


async def _ready(document: dict[str, Any]) -> Reply:
    return Reply(document)


def _arrive(talk: Conversation, document: bytes | TooLarge, limits: Limits) -> _Pending:
    """Load a document as it arrives and ask for its answer; a failure is the answer, in the document's format."""
    fmt = answer_format(document)
    try:
        request, fmt = receive(document, limits)
        return talk.answer(request, fmt), fmt
    except Exception as exc:
        return _raise(exc), fmt


async def _raise(exc: Exception) -> Reply:
    raise exc


async def _respond(pending: asyncio.Queue[_Pending | None], link: Link, window: _Window) -> None:
    while (item := await pending.get()) is not None:
        answer, fmt = item
        try:
            reply = await answer
        except Exception as exc:  # a bug must not take the connection down
            reply = Reply(answer_failure(exc))
        link.send(reply.document, fmt)
        if reply.then is not None:
            reply.then()
        await link.drain()  # waits while the peer does not read: its next requests wait too
        window.release()


def _discard(pending: asyncio.Queue[_Pending | None]) -> None:
    """Drop answers never awaited (the connection ended first) without leaving coroutines or errors dangling."""
    while not pending.empty():
        item = pending.get_nowait()
        if item is None:
            continue
        answer = item[0]
        if asyncio.iscoroutine(answer):
            answer.close()
        elif isinstance(answer, asyncio.Future):
            if answer.done() and not answer.cancelled():
                answer.exception()
            answer.cancel()
