"""Running a server -- anything with ``start()`` and ``aclose()`` coroutines -- in the foreground or a thread.

:func:`serve_forever` runs one until interrupted (a CLI's ``serve``); :class:`ThreadedServer`
runs one on an event loop of its own in a background thread (tests, demos). Any server with
that lifecycle runs either way: logd's, docd's, a controller.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Generic, Protocol, Self, TypeVar

from retain.wire.sockets import HostPort

__all__ = ["Server", "ThreadedServer", "serve_forever"]


class Server(Protocol):
    """What these run: a server started and closed on an event loop; ``address`` is its TCP one, if any."""

    @property
    def address(self) -> HostPort | None: ...

    async def start(self) -> None: ...

    async def aclose(self) -> None: ...


S = TypeVar("S", bound=Server)


def serve_forever(server: S, on_ready: Callable[[S], None] | None = None) -> None:
    """Run ``server`` until interrupted: Ctrl-C raises KeyboardInterrupt here.

    ``on_ready(server)`` is called once its sockets are bound.
    """

    async def main() -> None:
        await server.start()
        if on_ready is not None:
            on_ready(server)
        try:
            await asyncio.Event().wait()
        finally:
            await server.aclose()

    asyncio.run(main())


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

    def __enter__(self) -> Self:
        self._thread.start()
        try:
            asyncio.run_coroutine_threadsafe(self.server.start(), self._loop).result(timeout=30)
        except BaseException:
            self._stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self.server.aclose(), self._loop).result(timeout=30)
        self._stop()

    def _stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=30)
        self._loop.close()
