"""A stream server's listening sockets (TCP and/or Unix) and its open connections: bound together, closed together."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

__all__ = ["HostPort", "StreamSockets"]

HostPort = tuple[str, int]  # a TCP address: (host, port)


class StreamSockets:
    """Listening sockets and the connections they accepted.

    ``handler(reader, writer)`` serves one connection; :meth:`close` stops listening, cancels
    the open connections (a handler takes the cancellation as a normal end) and waits for them.
    """

    def __init__(self, handler: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]) -> None:
        self.handler = handler
        self.address: HostPort | None = None  # the TCP address bound, once bound
        self._servers: list[asyncio.AbstractServer] = []
        self._connections: set[asyncio.Task[Any]] = set()

    async def bind(self, listen: HostPort | None, socket_path: str | None) -> None:
        """Listen on TCP ``listen`` (port 0: any free one) and/or the Unix socket ``socket_path``."""
        if listen is not None:
            server = await asyncio.start_server(self._serve, *listen, limit=2**20)
            self.address = server.sockets[0].getsockname()[:2]
            self._servers.append(server)
        if socket_path is not None:
            with contextlib.suppress(FileNotFoundError):
                Path(socket_path).unlink()
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
