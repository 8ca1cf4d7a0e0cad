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
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

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

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.writer = writer

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
                           conversation: Callable[[Link], Conversation], limits: Limits) -> None:
    """Serve one connection with a conversation of its own, until the peer leaves or the task is cancelled."""
    link = Link(writer)
    talk = conversation(link)
    pending: asyncio.Queue[_Pending | None] = asyncio.Queue()
    responder = asyncio.create_task(_respond(pending, link))
    framer = Framer(limits.max_bytes)
    try:
        while data := await reader.read(_CHUNK):
            for document in framer.feed(data):
                pending.put_nowait(_arrive(talk, document, limits))
        pending.put_nowait(None)  # the peer is done sending: answer what it sent
        await responder
    except (ConnectionError, asyncio.IncompleteReadError):
        pass  # the peer left: nobody to answer
    except asyncio.CancelledError:
        pass  # the server is closing: a normal end, not an error to log
    finally:
        responder.cancel()
        await asyncio.gather(responder, return_exceptions=True)
        _discard(pending)
        with contextlib.suppress(Exception):
            await talk.aclose()
        writer.close()


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
