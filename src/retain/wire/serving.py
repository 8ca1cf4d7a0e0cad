"""A stream server of conversations: TCP and/or Unix sockets, each connection served by the one loop.

Every connection gets a :class:`~retain.wire.connection.Conversation` of its own, made by
the server's ``conversation(link)`` factory; :func:`~retain.wire.connection.serve_connection`
reads its documents and writes its answers in order.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from retain.errors import InvalidInput
from retain.wire.bounds import Limits
from retain.wire.connection import Conversation, Link, serve_connection
from retain.wire.sockets import HostPort, StreamSockets

__all__ = ["StreamServer"]


class StreamServer:
    """Serve conversations on a TCP (``listen``) and/or Unix (``socket_path``) stream socket.

    Raises:
        InvalidInput: neither ``listen`` nor ``socket_path`` was given.
    """

    def __init__(self, conversation: Callable[[Link], Conversation], *, listen: HostPort | None = None,
                 socket_path: str | None = None, limits: Limits = Limits()) -> None:
        if listen is None and socket_path is None:
            raise InvalidInput("serve on listen=(host, port), socket_path=PATH, or both")
        self.conversation, self.limits = conversation, limits
        self.listen, self.socket_path = listen, socket_path
        self.address: HostPort | None = None  # the TCP address bound, once started
        self._sockets = StreamSockets(self._connection)

    async def start(self) -> None:
        await self._sockets.bind(self.listen, self.socket_path)
        self.address = self._sockets.address

    async def aclose(self) -> None:
        await self._sockets.close()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await serve_connection(reader, writer, self.conversation, self.limits)
