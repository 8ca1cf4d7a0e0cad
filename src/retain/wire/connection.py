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

Backpressure and timeouts (the numbers are :class:`~retain.wire.WireLimits`'
and :class:`~retain.wire.StreamTimeouts`' defaults):

- at most ``max_unanswered`` (64) requests are read ahead of the answers the peer has taken:
  an answer is taken once the socket's send buffer has room for it, so a peer that never
  reads stops being read from, and queues no more work for anyone's writer;
- an unfinished document holds at most ``max_bytes`` and draws on the server's
  :class:`~retain.wire.ByteBudget`; past it the document is dropped and answered ``unavailable``;
- a request read whole stays counted, at its length plus its loaded size, in that budget and in the
  connection's own (``max_held``, 64 MiB) until its answer is written, and an answer longer than a
  chunk while it goes out; one that does not fit is answered ``unavailable``, naming the budget;
- a document longer than ``inline_bytes`` (16 KiB) is loaded, and an answer weighing more is dumped, on
  :mod:`retain.wire.offload`'s pool, the connection waiting for it and every other going on; an
  answer goes out in chunks of 64 KiB, each drained before the next, so it costs its own peer's pace;
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
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from retain.errors import InvalidDocument, InvalidRequest, Unauthenticated, Unavailable
from retain.wire.auth import Token, Tokens
from retain.wire.bounds import Budgets, ByteBudget, StreamTimeouts, TooLarge, WireLimits
from retain.wire.documents import Format, answer_format
from retain.wire.framing import END, Framer, frame
from retain.wire.offload import Loaded, dump_answer, load_request
from retain.wire.requests import Answer, answer_failure

__all__ = ["Conversation", "Link", "Reply", "serve_connection"]

_CHUNK = 65536
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Reply:
    """An answer document, and what to do once it is written (start streaming a watch's deltas)."""

    document: Answer
    then: Callable[[], None] | None = None


class Link:
    """One connection as its conversation sees it: send a document of its own, or close it.

    :meth:`push` is for documents the peer did not ask for (a watch's deltas): nothing waits for the peer
    to read those, so once more than ``max_unsent`` bytes wait unsent the connection is closed rather than
    buffer without end; the watcher reconnects and reads from the commit it got to. A document pushed while
    an answer is going out in chunks waits for its end (it would land inside it).
    """

    def __init__(self, writer: asyncio.StreamWriter, token: Token | None = None,
                 max_unsent: int = WireLimits().max_unsent, limits: WireLimits = WireLimits(),
                 budgets: Budgets | None = None) -> None:
        self.writer, self.max_unsent, self.limits, self.budgets = writer, max_unsent, limits, budgets
        self.token = token  # the token the connection presented; None on an open server
        self.streaming = False  # a watch streams to it: it may be quiet for ever without being idle
        self._deferred: list[bytes] | None = None  # pushed while an answer goes out in chunks

    def send(self, document: Mapping[str, object], fmt: Format) -> None:
        """Write a small document of the conversation's own at once (a big one goes out by :meth:`answer`)."""
        self.write(frame(document, fmt))

    async def answer(self, document: Answer, fmt: Format) -> None:
        """Dump an answer (off the loop when it is big) and write it in chunks, each drained before the next.

        An answer longer than a chunk is counted in ``budgets`` while it goes out; one that does not fit is
        answered ``unavailable`` instead, naming the budget."""
        data = await dump_answer(document, fmt, self.limits)
        if len(data) <= _CHUNK:
            self.write(data + END)
            return
        spent = None if self.budgets is None else self.budgets.short(len(data))
        if spent is not None:
            failure = Unavailable(f"the server cannot hold this answer: it is {len(data)} bytes and {spent} is "
                                  "spent; ask again later, or for less")
            self.write(frame(answer_failure(failure), fmt))
            return
        self._deferred = []
        try:
            for start in range(0, len(data), _CHUNK):
                self.write(data[start:start + _CHUNK])
                await self.drain()
            self.write(END)
        finally:
            deferred, self._deferred = self._deferred, None
            if self.budgets is not None:
                self.budgets.give(len(data))
        for pushed in deferred:
            self.push(pushed)

    def push(self, data: bytes) -> None:
        """Write framed bytes nobody asked for; close the connection if its peer has stopped reading them."""
        if self.writer.is_closing():
            return
        unsent = self.writer.transport.get_write_buffer_size() + sum(map(len, self._deferred or ()))
        if unsent + len(data) > self.max_unsent:
            log.warning("closing a connection whose peer left %d bytes of pushed documents unread (limit %d)",
                        unsent, self.max_unsent)
            self.abort()
            return
        if self._deferred is not None:
            self._deferred.append(data)
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


#: an answer to await, its format, and the bytes its request holds in the budgets until it is written
_Pending = tuple[Awaitable[Reply], Format, int]


async def serve_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                           conversation: Callable[[Link], Conversation], limits: WireLimits,
                           tokens: Tokens | None = None, budget: ByteBudget | None = None,
                           timeouts: StreamTimeouts = StreamTimeouts()) -> None:
    """Serve one connection with a conversation of its own, until the peer leaves or the task is cancelled.

    With ``tokens``, the first document must present one (``{auth: {token: SECRET}}``). At most
    ``limits.max_unanswered`` requests are read ahead of the answers the peer has taken; unfinished documents
    draw on ``budget``; ``timeouts`` close an idle connection and one whose document does not finish."""
    own = ByteBudget(limits.max_held, "max_held, one connection's")
    budgets = Budgets([own] if budget is None else [own, budget])
    link = Link(writer, max_unsent=limits.max_unsent, limits=limits, budgets=budgets)
    talk: Conversation | None = None
    pending: asyncio.Queue[_Pending | None] = asyncio.Queue()
    window = _Window(limits.max_unanswered)
    responder = asyncio.create_task(_respond(pending, link, window, budgets))
    framer = Framer(limits.max_bytes, budgets, keep=True)
    loop = asyncio.get_running_loop()
    first, begun = True, loop.time()
    # An answer going out re-arms the idle deadline of the read under way: it idles from that answer on.
    window.deadline = lambda: _deadline(framer, begun, link, window, timeouts)
    loose = 0  # bytes of documents framed, and so counted in the budgets, but not yet queued for an answer
    try:
        while True:
            data = await _next_chunk(reader, framer, begun, link, window, timeouts, pending)
            if not data:
                break
            was_unfinished = framer.unfinished
            documents = framer.feed(data)
            loose += sum(len(document) for document in documents if not isinstance(document, TooLarge))
            if framer.unfinished and (documents or not was_unfinished):
                begun = loop.time()  # a new document has begun
            refused = False
            for document in documents:
                wire = 0 if isinstance(document, TooLarge) else len(document)
                await window.reserve()  # the peer has not taken enough answers yet: stop reading its requests
                fmt = answer_format(document)
                loaded, held = await _load(document, limits, budgets, wire)
                loose -= wire  # counted in held from here
                del document  # loaded: its bytes are no longer needed (still counted until the answer is out)
                if first:
                    first = False
                    talk, answered = _first(loaded, fmt, held, tokens, link, conversation, pending)
                    if talk is None:
                        refused = True  # answer the refusal, then close
                        break
                    if answered:
                        continue
                assert talk is not None
                pending.put_nowait(_arrive(talk, loaded, fmt, held))
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
        budgets.give(loose)
        responder.cancel()
        await asyncio.gather(responder, return_exceptions=True)
        _discard(pending, budgets)
        if talk is not None:
            with contextlib.suppress(Exception):
                await talk.aclose()
        writer.close()


def _first(loaded: Loaded | Exception, fmt: Format, held: int, tokens: Tokens | None, link: Link,
           conversation: Callable[[Link], Conversation],
           pending: asyncio.Queue[_Pending | None]) -> tuple[Conversation | None, bool]:
    """The connection's first document, which must present a token when ``tokens`` are given: (the conversation,
    None when refused; whether the document was the token alone, answered here)."""
    answer, fmt, presented = _authenticate(loaded, fmt, tokens)
    if answer is not None:
        pending.put_nowait((_ready(answer), fmt, held))
    if presented is None and tokens is not None:
        return None, True
    link.token = presented if isinstance(presented, Token) else None
    return conversation(link), answer is not None


async def _next_chunk(reader: asyncio.StreamReader, framer: Framer, begun: float, link: Link, window: _Window,
                      timeouts: StreamTimeouts, pending: asyncio.Queue[_Pending | None]) -> bytes:
    """The next bytes the peer sent; empty when the connection ends: the peer left, it idled past its time, or
    a document it began did not end in time (then its refusal is queued as the last answer)."""
    loop = asyncio.get_running_loop()
    while True:
        try:
            async with asyncio.timeout_at(_deadline(framer, begun, link, window, timeouts)) as window.timer:
                return await reader.read(_CHUNK)
        except TimeoutError:
            if not framer.unfinished and not _idle(window, link, timeouts, loop.time()):
                continue  # answers went out meanwhile, or a watch began: not idle after all
            if framer.unfinished:
                failure = InvalidDocument(f"a document must end (a line '...') within {timeouts.document:g}s "
                                          "of its first byte; closing the connection")
                pending.put_nowait((_ready(answer_failure(failure)), "yaml", 0))
            return b""  # idle: nothing to answer; too slow: its refusal is the last answer
        finally:
            window.timer = None


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


async def _load(document: bytes | TooLarge, limits: WireLimits, budgets: Budgets,
                held: int) -> tuple[Loaded | Exception, int]:
    """Load a request (off the loop when it is big) and count it, at its length plus its loaded size, in the
    budgets: (it or the failure that is its answer, the bytes it holds). ``held`` bytes are counted already."""
    try:
        loaded = await load_request(document, limits)
    except Exception as exc:
        return exc, held
    spent = budgets.short(loaded.size)
    if spent is not None:
        return Unavailable(f"the server cannot hold this request: it loads to {loaded.size} bytes and {spent} "
                           "is spent; send it again later"), held
    return loaded, held + loaded.size


def _authenticate(loaded: Loaded | Exception, fmt: Format,
                  tokens: Tokens | None) -> tuple[Answer | None, Format, Token | object | None]:
    """The connection's first document: (its answer if it was an ``auth`` one, its format, the token presented).

    On an open server a first document that is not ``auth`` is no answer of its own (None, the conversation
    answers it) and the token is :data:`_OPEN`; with tokens it is refused, and the token None.
    """
    if isinstance(loaded, Exception):
        if tokens is None:
            return None, fmt, _OPEN
        return answer_failure(loaded), fmt, None
    request, fmt = loaded.value, loaded.fmt
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


async def _ready(document: Answer) -> Reply:
    return Reply(document)


def _arrive(talk: Conversation, loaded: Loaded | Exception, fmt: Format, held: int) -> _Pending:
    """Ask for a loaded request's answer; a failure (to load, or to answer) is the answer, in its format."""
    if isinstance(loaded, Exception):
        return _raise(loaded), fmt, held
    try:
        return talk.answer(loaded.value, loaded.fmt), loaded.fmt, held
    except Exception as exc:
        return _raise(exc), loaded.fmt, held


async def _raise(exc: Exception) -> Reply:
    raise exc


async def _respond(pending: asyncio.Queue[_Pending | None], link: Link, window: _Window,
                   budgets: Budgets) -> None:
    while (item := await pending.get()) is not None:
        answer, fmt, held = item
        try:
            try:
                reply = await answer
            except Exception as exc:  # a bug must not take the connection down
                reply = Reply(answer_failure(exc))
            await link.answer(reply.document, fmt)
        finally:
            budgets.give(held)  # answered (or the connection is ending): its request is let go
        if reply.then is not None:
            reply.then()
        await link.drain()  # waits while the peer does not read: its next requests wait too
        window.release()


def _discard(pending: asyncio.Queue[_Pending | None], budgets: Budgets) -> None:
    """Drop answers never awaited (the connection ended first) without leaving coroutines or errors dangling,
    giving back what their requests held."""
    while not pending.empty():
        item = pending.get_nowait()
        if item is None:
            continue
        budgets.give(item[2])
        answer = item[0]
        if asyncio.iscoroutine(answer):
            answer.close()
        elif isinstance(answer, asyncio.Future):
            if answer.done() and not answer.cancelled():
                answer.exception()
            answer.cancel()
