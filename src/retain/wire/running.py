"""Running a server -- anything with ``start()`` and ``aclose()`` coroutines -- on an event loop in a thread.

:class:`ThreadedServer` runs one on an event loop of its own in a background thread:
the daemons (through :func:`retain.daemon.run_daemon`, which takes its ``start``/``stop``),
tests and demos alike. logd's server, docd's and a controller all run this way.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import Generic, Protocol, Self, TypeVar

from retain.wire.sockets import HostPort

__all__ = ["Server", "ThreadedServer"]


class Server(Protocol):
    """What these run: a server started and closed on an event loop; ``address`` is its TCP one, if any."""

    @property
    def address(self) -> HostPort | None: ...

    async def start(self) -> None: ...

    async def aclose(self) -> None: ...


S = TypeVar("S", bound=Server)


class ThreadedServer(Generic[S]):
    """A server on an event loop of its own, in a background thread; started on enter, closed on exit.

    Example:
        >>> with ThreadedServer(DocdServer(table, listen=("127.0.0.1", 0))) as docd:
        ...     Client(docd.address)
    """

    def __init__(self, server: S) -> None:
        self.server = server
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=type(server).__name__, daemon=True)

    @property
    def address(self) -> HostPort:
        """The TCP address the server bound."""
        address = self.server.address
        assert address is not None, "this server listens on no TCP address"
        return address

    def start(self) -> Self:
        """Start the loop's thread and the server on it; a server that cannot start is closed, and its error raised."""
        self._thread.start()
        try:
            asyncio.run_coroutine_threadsafe(self.server.start(), self._loop).result(timeout=30)
        except BaseException:
            # What did start (a TCP listener before the socket path failed, logd's commit follower) stops too.
            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(self.server.aclose(), self._loop).result(timeout=30)
            self._end_loop()
            raise
        return self

    def stop(self) -> None:
        """Close the server (answers under way are finished) and end the loop's thread."""
        asyncio.run_coroutine_threadsafe(self.server.aclose(), self._loop).result(timeout=30)
        self._end_loop()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _end_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=30)
        self._loop.close()
