"""A stream server's listening sockets (TCP and/or Unix) and its open connections: bound together, closed together.

A Unix socket is made safe to put where others can see it:

- it is created with mode ``socket_mode`` (0600 by default: the owner only), whatever the
  umask: it is bound in a private directory (0700) beside the path, chmod-ed, then renamed
  into place, so it is never reachable with a looser mode;
- a file at the path that is not a socket is never replaced (refused, naming it);
- a socket there that a live server answers on is never taken over (refused); a stale one
  (nobody answers: a server that died) is replaced;
- on close the socket file is removed, if it is still the one this server made.

Every accepted TCP connection has ``TCP_NODELAY`` set: answers are written whole, and
Nagle's algorithm would hold a small one back waiting for the peer's ACK.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import socket
import ssl
import stat
import tempfile
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

from retain.errors import InvalidInput, ServerStartError

__all__ = ["DEFAULT_SOCKET_MODE", "HostPort", "StreamSockets", "bind_unix_socket", "binding", "listen_address",
           "set_nodelay"]

HostPort = tuple[str, int]  # a TCP address: (host, port)
DEFAULT_SOCKET_MODE = 0o600


def listen_address(listen: HostPort | None, socket_path: str | None, default: HostPort, server: str) -> HostPort | None:
    """The TCP address a ``server`` streams on: ``listen``, else ``default`` unless it is given a Unix socket.

    Raises:
        InvalidInput: both ``listen`` and ``socket_path``.
    """
    if listen is not None and socket_path is not None:
        raise InvalidInput(f"{server} serves its stream on one address: give listen (HOST, PORT) or socket_path, "
                           "not both")
    return default if listen is None and socket_path is None else listen


@contextlib.contextmanager
def binding(address: HostPort) -> Iterator[None]:
    """A failed bind inside the block raised as :class:`~retain.errors.ServerStartError` naming ``address``
    (Python's own message, ``[Errno 98] Address already in use``, names none), its OSError the cause."""
    try:
        yield
    except OSError as exc:
        host, port = address
        shown = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        reason = "the address is in use by another process" if exc.errno == errno.EADDRINUSE else \
            (exc.strerror or str(exc))
        raise ServerStartError(f"cannot listen on {shown}: {reason}") from exc


def set_nodelay(writer: asyncio.StreamWriter) -> None:
    """Turn Nagle's algorithm off on a TCP connection (a Unix socket has none)."""
    sock = writer.get_extra_info("socket")
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def bind_unix_socket(path: str, mode: int = DEFAULT_SOCKET_MODE) -> socket.socket:
    """A listening Unix socket at ``path`` with ``mode``, never replacing a file or a live server's socket.

    Raises:
        InvalidInput: ``mode`` is no permission mode, a file that is not a socket is at ``path``, or a server
            answers on the socket there.
    """
    if not isinstance(mode, int) or not 0 <= mode <= 0o777:
        raise InvalidInput(f"a socket mode is a permission mode such as 0o600 (got {mode!r})")
    _clear_stale(path)
    parent = os.path.dirname(os.path.abspath(path))
    private = tempfile.mkdtemp(prefix=".retain-sock-", dir=parent)  # 0700: nobody else reaches what is inside
    made = os.path.join(private, "s")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(made)
        os.chmod(made, mode)
        _clear_stale(path)  # once more, right before taking the name
        os.rename(made, path)
        sock.listen(128)
    except BaseException:
        sock.close()
        with contextlib.suppress(OSError):
            os.unlink(made)
        raise
    finally:
        with contextlib.suppress(OSError):
            os.rmdir(private)
    return sock


def _clear_stale(path: str) -> None:
    """Remove a stale socket at ``path``; refuse a live one, or anything that is not a socket."""
    try:
        found = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(found.st_mode):
        raise InvalidInput(f"{path} exists and is not a socket: refusing to replace it (remove it, or choose "
                           f"another --socket path)")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.settimeout(2)
        probe.connect(path)
    except (ConnectionRefusedError, FileNotFoundError):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)  # stale: the server that made it is gone
        return
    except OSError:
        pass  # a server there, but busy (its backlog full): live all the same
    finally:
        probe.close()
    raise InvalidInput(f"a server is answering on {path}: refusing to take its socket over (stop it first)")


class StreamSockets:
    """Listening sockets and the connections they accepted.

    ``handler(reader, writer)`` serves one connection; :meth:`close` stops listening, cancels
    the open connections (a handler takes the cancellation as a normal end) and waits for them.
    With ``tls`` the TCP listener speaks TLS (the Unix socket, guarded by its file mode, does not).
    """

    def __init__(self, handler: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]], *,
                 socket_mode: int = DEFAULT_SOCKET_MODE, tls: ssl.SSLContext | None = None) -> None:
        if not isinstance(socket_mode, int) or not 0 <= socket_mode <= 0o777:
            raise InvalidInput(f"a socket mode is a permission mode such as 0o600 (got {socket_mode!r})")
        self.handler, self.socket_mode, self.tls = handler, socket_mode, tls
        self._socket_file: tuple[str, int, int] | None = None  # (path, device, inode) of the socket made
        self.address: HostPort | None = None  # the TCP address bound, once bound
        self._servers: list[asyncio.AbstractServer] = []
        self._connections: set[asyncio.Task[Any]] = set()

    async def bind(self, listen: HostPort | None, socket_path: str | None) -> None:
        """Listen on TCP ``listen`` (port 0: any free one) and/or the Unix socket ``socket_path``."""
        if listen is not None:
            with binding(listen):
                server = await asyncio.start_server(self._serve, *listen, limit=2**20, ssl=self.tls)
            self.address = server.sockets[0].getsockname()[:2]
            self._servers.append(server)
        if socket_path is not None:
            sock = bind_unix_socket(socket_path, self.socket_mode)
            made = os.stat(socket_path)
            self._socket_file = (socket_path, made.st_dev, made.st_ino)
            self._servers.append(await asyncio.start_unix_server(self._serve, sock=sock, limit=2**20))

    async def close(self) -> None:
        for server in self._servers:
            server.close()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        for server in self._servers:
            await server.wait_closed()
        if self._socket_file is not None:
            path, device, inode = self._socket_file
            with contextlib.suppress(OSError):
                now = os.lstat(path)
                if (now.st_dev, now.st_ino) == (device, inode):
                    Path(path).unlink()
            self._socket_file = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        set_nodelay(writer)
        try:
            await self.handler(reader, writer)
        except asyncio.CancelledError:
            # close() cancelled it: a normal end. Left to end cancelled, Python 3.11's start_server asks the task
            # for its exception, which raises, and the loop prints a CancelledError traceback (docd's, at the end
            # of `retain demo --postgres`, when a connection was closing as the server closed).
            pass
        finally:
            self._connections.discard(task)
