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
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from retain.errors import InvalidRequest, Unauthenticated
from retain.wire.auth import Token, Tokens
from retain.wire.bounds import Limits, TooLarge
from retain.wire.documents import Format, answer_format, receive
from retain.wire.framing import Framer, frame
from retain.wire.requests import answer_failure

__all__ = ["Conversation", "Link", "Reply", "serve_connection"]

_CHUNK = 65536


@dataclass(frozen=True)
class Reply:
    """An answer document, and what to do once it is written (start streaming a watch's deltas)."""

    document: dict[str, Any]
    then: Callable[[], None] | None = None


class Link:
    """One connection as its conversation sees it: send a document of its own, or close it."""

    def __init__(self, writer: asyncio.StreamWriter, token: Token | None = None) -> None:
        self.writer = writer
        self.token = token  # the token the connection presented; None on an open server

    def send(self, document: dict[str, Any], fmt: Format) -> None:
        self.write(frame(document, fmt))

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
                           tokens: Tokens | None = None) -> None:
    """Serve one connection with a conversation of its own, until the peer leaves or the task is cancelled.

    With ``tokens``, the first document must present one (``{auth: {token: SECRET}}``)."""
    link = Link(writer)
    talk: Conversation | None = None
    pending: asyncio.Queue[_Pending | None] = asyncio.Queue()
    responder = asyncio.create_task(_respond(pending, link))
    framer = Framer(limits.max_bytes)
    first = True
    try:
        while data := await reader.read(_CHUNK):
            for document in framer.feed(data):
                if first:
                    first = False
                    answer, fmt, presented = _authenticate(document, tokens, limits)
                    if answer is not None:
                        pending.put_nowait((_ready(answer), fmt))
                    if presented is None and tokens is not None:
                        break  # refused: answer it, then close
                    link.token = presented if isinstance(presented, Token) else None
                    talk = conversation(link)
                    if answer is not None:
                        continue
                assert talk is not None
                pending.put_nowait(_arrive(talk, document, limits))
            else:
                continue
            break
        pending.put_nowait(None)  # the peer is done sending (or was refused): answer what it sent
        await responder
    except (ConnectionError, asyncio.IncompleteReadError):
        pass  # the peer left: nobody to answer
    except asyncio.CancelledError:
        pass  # the server is closing: a normal end, not an error to log
    finally:
        responder.cancel()
        await asyncio.gather(responder, return_exceptions=True)
        _discard(pending)
        if talk is not None:
            with contextlib.suppress(Exception):
                await talk.aclose()
        writer.close()


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


async def _respond(pending: asyncio.Queue[_Pending | None], link: Link) -> None:
    while (item := await pending.get()) is not None:
        answer, fmt = item
        try:
            reply = await answer
        except Exception as exc:  # a bug must not take the connection down
            reply = Reply(answer_failure(exc))
        link.send(reply.document, fmt)
        if reply.then is not None:
            reply.then()
        await link.drain()


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
