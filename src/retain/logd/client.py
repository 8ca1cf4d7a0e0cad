"""Python clients of a logd stream socket: :class:`Client` (blocking) and :class:`AsyncClient` (asyncio).

Both speak JSON on the wire by default (the tag objects of :mod:`retain.wire.tags`
travel in their JSON spelling), pipeline freely, and raise an error answer as the
:class:`~retain.errors.LogdError` subclass of its code.

With ``token=SECRET`` a client presents it first (``{auth: {token: SECRET}}``), as a server
with tokens requires; a refused token raises :class:`~retain.errors.Unauthenticated`.

With ``tls=`` a client speaks TLS to a TCP address (a server given ``--tls-cert/--tls-key``), as
httpx's ``verify=`` reads: ``True`` trusts the system's CAs, a path trusts the CA bundle (PEM) there
(a private CA, or the server's self-signed certificate), an :class:`ssl.SSLContext` is used as given;
the host name is checked against the certificate (:func:`~retain.wire.client_context`). A certificate
that does not verify raises :class:`~retain.errors.ServerUnavailable` naming why.

Example:
    >>> with Client(("logd.internal", 7420), author="verse/ops", token=os.environ["RETAIN_TOKEN"],
    ...             tls="/etc/retain/ca.pem") as logd:
    ...     commit = logd.patch([{"set": "jobs.j1", "value": {"status": "done"}}]).commit
    ...     logd.get("jobs.j1").value
    {'status': 'done'}
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

from retain.errors import LOGD_ERRORS, Compacted, InvalidInput, LogdError, ServerUnavailable
from retain.logd.answers import DeltaBody, WatchResult
from retain.logd.store import Listing, Read, Written
from retain.wire import ClientTls, Format, WireLimits, client_context, load
from retain.wire.bounds import TooLarge
from retain.wire.framing import Framer, frame
from retain.wire.requests import Answer, ErrorAnswer, as_answer

__all__ = ["Address", "AsyncClient", "Client", "error_from", "parse_address"]

Q = TypeVar("Q")  # what a queue of the connection holds: answers, or a watch's deltas
Address = tuple[str, int] | str  # (host, port), or the path of a Unix socket


def parse_address(text: str) -> Address:
    """``HOST:PORT`` -> ``(host, port)``; ``unix:PATH`` or anything with a ``/`` -> a socket path."""
    if text.startswith("unix:"):
        return text[5:]
    if "/" in text:
        return text
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise InvalidInput(f"a logd address is HOST:PORT or a socket path such as unix:/run/logd.sock (got {text!r})")
    return host or "127.0.0.1", int(port)


def _tls_for(address: Address, tls: ClientTls) -> ssl.SSLContext | None:
    """The TLS context to connect to ``address`` with; checked before any I/O."""
    context = client_context(tls)
    if context is not None and isinstance(address, str):
        raise InvalidInput(f"tls= is for a TCP address; the Unix socket {address} is served in clear (its file "
                           f"mode guards it)")
    return context


def error_from(answer: ErrorAnswer) -> LogdError:
    """The exception an ``{error: {code, message}}`` answer stands for."""
    cls = LOGD_ERRORS.get(answer["error"]["code"], LogdError)
    message = answer["error"]["message"]
    return cls(message) if cls is not Compacted else Compacted(message)


class _Base:
    """What both twins share: encoding, decoding, sorting answers from deltas, request bodies."""

    def __init__(self, fmt: Format, limits: WireLimits) -> None:
        self.fmt, self.limits = fmt, limits
        self.framer = Framer(limits.max_bytes)
        self.answers: deque[Answer] = deque()
        self.deltas: deque[DeltaBody] = deque()  # {commit, author, time, ops} from watches

    def _encode(self, request: Mapping[str, object]) -> bytes:
        return frame(request, self.fmt)

    def _take(self, data: bytes) -> None:
        for document in self.framer.feed(data):
            if isinstance(document, TooLarge):
                raise LogdError(f"logd sent a document of {document.size} bytes, over {self.limits.max_bytes}")
            value, _ = load(document, WireLimits(max_bytes=self.limits.max_bytes, max_depth=10_000))
            if isinstance(value, dict) and isinstance(value.get("delta"), dict):
                self.deltas.append(value["delta"])
            else:
                self.answers.append(as_answer(value))

    @staticmethod
    def _result(verb: str, answer: Answer) -> dict[str, Any]:
        if "error" in answer:
            raise error_from(answer)
        result = answer["result"].get(verb)
        if result is None:
            raise LogdError(f"logd answered {sorted(answer['result'])} to a {verb} request")
        return dict(result)

    @staticmethod
    def _body(**fields: Any) -> dict[str, Any]:
        return {name.rstrip("_"): value for name, value in fields.items() if value is not None}


class Client(_Base):
    """A blocking client on one connection (one session). Not for use by several threads at once."""

    def __init__(self, address: Address, *, author: str | None = None, scope: str | None = None,
                 timeout: float = 60.0, fmt: Format = "json", limits: WireLimits = WireLimits(),
                 token: str | None = None, tls: ClientTls = None) -> None:
        super().__init__(fmt, limits)
        context = _tls_for(address, tls)
        family = socket.AF_UNIX if isinstance(address, str) else socket.AF_INET
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        try:
            self.sock.connect(address)
            if context is not None:
                self.sock = context.wrap_socket(self.sock, server_hostname=address[0])
        except OSError as exc:
            self.sock.close()
            raise ServerUnavailable(f"cannot reach logd at {address}: {exc}") from exc
        try:
            if token is not None:
                self.call("auth", token=token)
            if author is not None or scope is not None:
                self.call("session", author=author, scope=scope)
        except BaseException:
            self.sock.close()
            raise

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.sock.close()

    def send(self, request: Mapping[str, object]) -> None:
        """Send one request without waiting for its answer (pipelining)."""
        try:
            self.sock.sendall(self._encode(request))
        except OSError as exc:
            raise ServerUnavailable(f"logd connection broke: {exc}") from exc

    def _fill(self, queue: deque[Q]) -> Q:
        while not queue:
            try:
                data = self.sock.recv(65536)
            except OSError as exc:
                raise ServerUnavailable(f"logd connection broke: {exc}") from exc
            if not data:
                raise ServerUnavailable("logd closed the connection")
            self._take(data)
        return queue.popleft()

    def receive(self) -> Answer:
        """The next answer, whole (``{result: ...}`` or ``{error: ...}``); deltas meanwhile go to ``deltas``."""
        return self._fill(self.answers)

    def next_delta(self) -> DeltaBody:
        """The next delta of a watch: ``{commit, author, time, ops}``."""
        return self._fill(self.deltas)

    def request(self, request: Mapping[str, object]) -> Answer:
        self.send(request)
        return self.receive()

    def pipeline(self, requests: Iterable[Mapping[str, object]]) -> list[Answer]:
        """Send every request, then read every answer, in order."""
        sent = 0
        for request in requests:
            self.send(request)
            sent += 1
        return [self.receive() for _ in range(sent)]

    def call(self, verb: str, **body: Any) -> dict[str, Any]:
        """One request; its result body, or the error raised."""
        return self._result(verb, self.request({verb: self._body(**body)}))

    def patch(self, ops: Sequence[Any], *, precondition: dict[str, Any] | None = None,
              author: str | None = None) -> Written:
        """Apply ops as one commit (as :meth:`Session.patch <retain.logd.Session.patch>` does); returns it."""
        return Written(self.call("patch", ops=list(ops), if_=precondition, author=author)["commit"])

    def get(self, path: str | None = None, *, at: int | None = None) -> Read:
        result = self.call("get", path=path, at=at)
        return Read(result["commit"], result["value"])

    def list(self, path: str, *, at: int | None = None) -> Listing:
        result = self.call("list", path=path, at=at)
        return Listing(result["commit"], result["items"])

    def watch(self, path: str | None = None, *, first: int | None = None) -> WatchResult:
        """Subscribe this connection; deltas then arrive through :meth:`next_delta`."""
        return _watched(self.call("watch", path=path, from_=first))


class AsyncClient(_Base):
    """The asyncio twin of :class:`Client`; make it with ``await AsyncClient.connect(...)``."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, fmt: Format,
                 limits: WireLimits) -> None:
        super().__init__(fmt, limits)
        self.reader, self.writer = reader, writer

    @classmethod
    async def connect(cls, address: Address, *, author: str | None = None, scope: str | None = None,
                      fmt: Format = "json", limits: WireLimits = WireLimits(), token: str | None = None,
                      tls: ClientTls = None) -> AsyncClient:
        context = _tls_for(address, tls)
        try:
            if isinstance(address, str):
                reader, writer = await asyncio.open_unix_connection(address)
            else:
                reader, writer = await asyncio.open_connection(*address, ssl=context,
                                                               server_hostname=address[0] if context else None)
        except OSError as exc:
            raise ServerUnavailable(f"cannot reach logd at {address}: {exc}") from exc
        client = cls(reader, writer, fmt, limits)
        try:
            if token is not None:
                await client.call("auth", token=token)
            if author is not None or scope is not None:
                await client.call("session", author=author, scope=scope)
        except BaseException:
            writer.close()
            raise
        return client

    @property
    def closed(self) -> bool:
        """Whether the server has closed this connection (an idle one, after its idle timeout): nothing sent on
        it would be read. A caller may reconnect before sending, knowing nothing was lost."""
        return self.reader.at_eof() or self.writer.is_closing()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        self.writer.close()
        try:
            await self.writer.wait_closed()
        except ConnectionError:
            pass

    async def send(self, request: Mapping[str, object]) -> None:
        self.writer.write(self._encode(request))
        try:
            await self.writer.drain()
        except ConnectionError as exc:
            raise ServerUnavailable(f"logd connection broke: {exc}") from exc

    async def _fill(self, queue: deque[Q]) -> Q:
        while not queue:
            data = await self.reader.read(65536)
            if not data:
                raise ServerUnavailable("logd closed the connection")
            self._take(data)
        return queue.popleft()

    async def receive(self) -> Answer:
        return await self._fill(self.answers)

    async def next_delta(self) -> DeltaBody:
        return await self._fill(self.deltas)

    async def request(self, request: Mapping[str, object]) -> Answer:
        await self.send(request)
        return await self.receive()

    async def pipeline(self, requests: Iterable[Mapping[str, object]]) -> list[Answer]:
        sent = 0
        for request in requests:
            await self.send(request)
            sent += 1
        return [await self.receive() for _ in range(sent)]

    async def call(self, verb: str, **body: Any) -> dict[str, Any]:
        return self._result(verb, await self.request({verb: self._body(**body)}))

    async def patch(self, ops: Sequence[Any], *, precondition: dict[str, Any] | None = None,
                    author: str | None = None) -> Written:
        return Written((await self.call("patch", ops=list(ops), if_=precondition, author=author))["commit"])

    async def get(self, path: str | None = None, *, at: int | None = None) -> Read:
        result = await self.call("get", path=path, at=at)
        return Read(result["commit"], result["value"])

    async def list(self, path: str, *, at: int | None = None) -> Listing:
        result = await self.call("list", path=path, at=at)
        return Listing(result["commit"], result["items"])

    async def watch(self, path: str | None = None, *, first: int | None = None) -> WatchResult:
        return _watched(await self.call("watch", path=path, from_=first))


def _watched(result: dict[str, Any]) -> WatchResult:
    """A watch's result, checked: ``{path, from, commit}`` (the server's :class:`~retain.logd.answers.WatchResult`)."""
    if not (isinstance(result.get("path"), str) and type(result.get("from")) is int
            and type(result.get("commit")) is int):
        raise LogdError(f"logd answered a watch with {sorted(result)}, not {{path, from, commit}}")
    return WatchResult({"path": result["path"], "from": result["from"], "commit": result["commit"]})
