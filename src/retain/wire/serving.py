"""Documents on a stream socket, answered in order: what docd and the controller kit both serve on.

The framing is logd's (:mod:`retain.wire.documents`): YAML or JSON documents, each
ended by a line ``...``, both ways; each answer in its request's format. Every
connection gets a :class:`Conversation` of its own, which answers its requests one
after another, so answers come back in request order and a request sent behind
another sees what that one did. A conversation may also push documents of its own
(a watch's deltas) through its :class:`Link`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from retain.errors import InvalidDocument, LogdError, StorageError
from retain.wire.documents import Format, Framer, Limits, TooLarge, answer_error, frame, load
from retain.logd.server import StreamSockets

__all__ = ["Conversation", "Link", "Reply", "StreamServer"]

log = logging.getLogger(__name__)


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
        if not self.writer.is_closing():
            self.writer.write(frame(document, fmt))

    def close(self) -> None:
        self.writer.close()


class Conversation(Protocol):
    """What answers one connection's requests, one at a time, in order."""

    async def answer(self, request: Any, fmt: Format) -> Reply: ...

    async def aclose(self) -> None: ...


class StreamServer:
    """Serve conversations on a TCP (``listen``) and/or Unix (``socket_path``) stream socket."""

    def __init__(self, conversation: Callable[[Link], Conversation], *, listen: tuple[str, int] | None = None,
                 socket_path: str | None = None, limits: Limits = Limits()) -> None:
        if listen is None and socket_path is None:
            raise ValueError("serve on listen=(host, port), socket_path=PATH, or both")
        self.conversation, self.limits = conversation, limits
        self.listen, self.socket_path = listen, socket_path
        self.address: tuple[str, int] | None = None  # the TCP address bound, once started
        self._sockets = StreamSockets(self._connection)

    async def start(self) -> None:
        await self._sockets.bind(self.listen, self.socket_path)
        self.address = self._sockets.address

    async def aclose(self) -> None:
        await self._sockets.close()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        link = Link(writer)
        conversation = self.conversation(link)
        framer = Framer(self.limits.max_bytes)
        try:
            while data := await reader.read(65536):
                for document in framer.feed(data):
                    reply, fmt = await self._answer(conversation, document)
                    link.send(reply.document, fmt)
                    if reply.then is not None:
                        reply.then()
                    await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass  # the peer left, or the server is closing: a normal end, not an error to log
        finally:
            with contextlib.suppress(Exception):
                await conversation.aclose()
            writer.close()

    async def _answer(self, conversation: Conversation, document: bytes | TooLarge) -> tuple[Reply, Format]:
        if isinstance(document, TooLarge):
            error = InvalidDocument(f"document is {document.size} bytes or more; at most {self.limits.max_bytes}")
            return Reply(answer_error(error)), "yaml"
        fmt: Format = "json" if document.lstrip()[:1] in (b"{", b"[") else "yaml"
        try:
            request, fmt = load(document, self.limits)
            return await conversation.answer(request, fmt), fmt
        except LogdError as exc:
            return Reply(answer_error(exc)), fmt
        except Exception as exc:  # a bug must not take the connection down
            log.exception("request failed")
            return Reply(answer_error(StorageError(f"internal error: {type(exc).__name__}: {exc}"))), fmt
