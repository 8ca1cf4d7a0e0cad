"""A stream server of conversations: TCP and/or Unix sockets, each connection served by the one loop.

Every connection gets a :class:`~retain.wire.connection.Conversation` of its own, made by
the server's ``conversation(link)`` factory; :func:`~retain.wire.connection.serve_connection`
reads its documents and writes its answers in order.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable

from retain.errors import InvalidInput
from retain.wire.auth import Tokens, refuse_open
from retain.wire.bounds import ByteBudget, StreamTimeouts, WireLimits
from retain.wire.connection import Conversation, Link, serve_connection
from retain.wire.sockets import DEFAULT_SOCKET_MODE, HostPort, StreamSockets

__all__ = ["StreamServer"]


class StreamServer:
    """Serve conversations on a TCP (``listen``) and/or Unix (``socket_path``) stream socket.

    Every connection's unfinished documents draw on one ``budget`` (a fresh :class:`~retain.wire.ByteBudget`
    unless given) and are bounded in time by ``timeouts``.
    With ``tokens`` every connection presents one first (:func:`~retain.wire.serve_connection`);
    without, a non-loopback ``listen`` is refused unless ``insecure``
    (:func:`~retain.wire.auth.refuse_open`). The Unix socket is made with ``socket_mode``; with ``tls`` the TCP
    listener speaks TLS.

    Raises:
        InvalidInput: neither ``listen`` nor ``socket_path`` was given, or an open server on a
            non-loopback address.
    """

    def __init__(self, conversation: Callable[[Link], Conversation], *, listen: HostPort | None = None,
                 socket_path: str | None = None, limits: WireLimits = WireLimits(), tokens: Tokens | None = None,
                 insecure: bool = False, socket_mode: int = DEFAULT_SOCKET_MODE, budget: ByteBudget | None = None,
                 timeouts: StreamTimeouts = StreamTimeouts(), tls: ssl.SSLContext | None = None) -> None:
        if listen is None and socket_path is None:
            raise InvalidInput("serve on listen=(host, port), socket_path=PATH, or both")
        refuse_open([None if listen is None else listen[0]], tokens, insecure)
        self.conversation, self.limits, self.tokens = conversation, limits, tokens
        self.budget, self.timeouts = budget if budget is not None else ByteBudget(), timeouts
        self.listen, self.socket_path = listen, socket_path
        self.address: HostPort | None = None  # the TCP address bound, once started
        self._sockets = StreamSockets(self._connection, socket_mode=socket_mode, tls=tls)

    async def start(self) -> None:
        await self._sockets.bind(self.listen, self.socket_path)
        self.address = self._sockets.address

    async def aclose(self) -> None:
        await self._sockets.close()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await serve_connection(reader, writer, self.conversation, self.limits, self.tokens, self.budget,
                               self.timeouts)
