"""A rival between every pair of a client's commands: a RESP proxy that runs another client's action before
forwarding each command, and records what every XTRIM removed.

The driver's commands reach Redis one at a time, in order, whatever way they were sent (a pipeline, one
packed write): the proxy splits what arrives into commands, calls ``rival(command)`` before forwarding
each, and waits for its answer before the next. The rival acts on Redis directly. Before and after every
XTRIM the proxy reads the stream (on the rival's connection, under the same lock), so the entries each
trim removed are known exactly and nothing else can have touched the stream in between.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import hiredis
import redis

__all__ = ["Proxy", "Trim", "encode_reply", "proxied"]


@dataclass(frozen=True)
class Trim:
    """One XTRIM that went through the proxy: the command, and the stream's ids just before and after it."""

    command: tuple[bytes, ...]
    before: tuple[bytes, ...]
    after: tuple[bytes, ...]
    #: what the proxy's ``witness()`` said just before the trim (a test's record of the rival's own removals)
    witnessed: Any = None
    #: the trim's place in :attr:`Proxy.commands`
    index: int = -1

    @property
    def key(self) -> str:
        return self.command[1].decode()

    @property
    def removed(self) -> set[bytes]:
        return set(self.before) - set(self.after)


@dataclass
class Proxy:
    """A proxy on a free loopback port in front of ``upstream`` (host, port); ``url`` is where clients connect."""

    upstream: tuple[str, int]
    direct: redis.Redis
    rival: Callable[[tuple[bytes, ...]], None] = lambda command: None
    trims: list[Trim] = field(default_factory=list)
    #: called just before each XTRIM is forwarded; its value is kept in the Trim
    witness: Callable[[], Any] = lambda: None
    #: every command that went through, in order, and its reply
    commands: list[tuple[bytes, ...]] = field(default_factory=list)
    replies: list[Any] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: what failed in the proxy's threads (the rival's own errors included), raised when the proxy closes
    errors: list[BaseException] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._closed = threading.Event()
        self._threads: list[threading.Thread] = []
        self._sockets: list[socket.socket] = []
        accept = threading.Thread(target=self._accept, name="rival-proxy", daemon=True)
        accept.start()
        self._threads.append(accept)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def close(self) -> None:
        self._closed.set()
        self._listener.close()
        for sock in list(self._sockets):
            try:
                sock.close()
            except OSError:
                pass

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            thread = threading.Thread(target=self._serve, args=(client,), daemon=True)
            thread.start()
            self._threads.append(thread)

    def _serve(self, client: socket.socket) -> None:
        server = socket.create_connection(self.upstream)
        self._sockets += [client, server]
        requests, replies = hiredis.Reader(), hiredis.Reader()
        try:
            while True:
                data = client.recv(1 << 16)
                if not data:
                    return
                requests.feed(data)
                while (command := requests.gets()) is not False:
                    client.sendall(encode_reply(self._forward(tuple(command), server, replies)))
        except OSError:
            return
        except Exception as exc:  # the rival or the proxy failed: the test hears of it when the proxy closes
            self.errors.append(exc)
        finally:
            client.close()
            server.close()

    def _forward(self, command: tuple[bytes, ...], server: socket.socket, replies: Any) -> Any:
        with self.lock:
            self.commands.append(command)
            self.rival(command)
            trimming = command[0].upper() == b"XTRIM"
            before = self._ids(command[1]) if trimming else ()
            witnessed = self.witness() if trimming else None
            server.sendall(_pack(command))
            while (reply := replies.gets()) is False:
                data = server.recv(1 << 16)
                if not data:
                    raise OSError("upstream closed")
                replies.feed(data)
            self.replies.append(reply)
            if trimming:
                self.trims.append(Trim(command, before, self._ids(command[1]), witnessed, len(self.commands) - 1))
            return reply

    def _ids(self, key: bytes) -> tuple[bytes, ...]:
        try:
            return tuple(entry_id for entry_id, _ in self.direct.xrange(key))
        except redis.ResponseError:
            return ()


def _pack(command: tuple[bytes, ...]) -> bytes:
    parts = [b"*%d\r\n" % len(command)]
    for arg in command:
        parts.append(b"$%d\r\n%s\r\n" % (len(arg), arg))
    return b"".join(parts)


def encode_reply(reply: Any) -> bytes:
    """A reply as hiredis parsed it, in RESP again (a status reply becomes a bulk string: clients read both;
    maps, sets, doubles and booleans are RESP3's, which a client that said HELLO 3 reads)."""
    if isinstance(reply, hiredis.ReplyError):
        return b"-" + str(reply).encode() + b"\r\n"
    if reply is None:
        return b"$-1\r\n"
    if isinstance(reply, bool):
        return b"#t\r\n" if reply else b"#f\r\n"
    if isinstance(reply, int):
        return b":%d\r\n" % reply
    if isinstance(reply, float):
        return b",%r\r\n" % reply
    if isinstance(reply, dict):
        return b"%%%d\r\n" % len(reply) + b"".join(encode_reply(k) + encode_reply(v) for k, v in reply.items())
    if isinstance(reply, (set, frozenset)):
        return b"~%d\r\n" % len(reply) + b"".join(encode_reply(item) for item in reply)
    if isinstance(reply, bytes):
        return b"$%d\r\n%s\r\n" % (len(reply), reply)
    if isinstance(reply, list):
        return b"*%d\r\n" % len(reply) + b"".join(encode_reply(item) for item in reply)
    raise TypeError(f"cannot encode {reply!r}")


@contextmanager
def proxied(server: Any, rival: Callable[[tuple[bytes, ...]], None] = lambda command: None) -> Iterator[Proxy]:
    """A :class:`Proxy` in front of ``server`` (a RedisServer) until the block ends."""
    direct = server.client()
    proxy = Proxy((server.host, server.port), direct, rival)
    try:
        yield proxy
    finally:
        proxy.close()
        direct.close()
    if proxy.errors:
        raise AssertionError(f"the proxy or its rival failed: {proxy.errors[0]!r}") from proxy.errors[0]
