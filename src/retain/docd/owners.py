"""The I/O that sends a plan: connections to owners, the retain fan-out, a watch's delta pump.

An owner's trouble never escapes as an exception: an owner that cannot be reached,
drops the connection or does not answer within the table's timeout is answered for
as ``{error: {code: unavailable, message}}`` (:class:`~retain.errors.OwnerUnavailable`),
so the other owners' rules still run and the plan's answer says which owner failed.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable

from retain.docd.router import Fanout, Owner, answer_retain
from retain.errors import LogdError, OwnerUnavailable, ServerUnavailable
from retain.logd.answers import DeltaBody
from retain.logd.client import AsyncClient
from retain.wire import ClientTls
from retain.wire.requests import Answer, Body, answer_error

__all__ = ["Call", "Owners", "fan_out"]

#: ``call(owner, request) -> answer document``; never raises for the owner's trouble.
Call = Callable[[Owner, Body], Awaitable[Answer]]
#: ``observe(owner name, outcome, seconds)`` after each call: outcome ``ok``, or the answer's error code
#: (``unavailable`` for an owner that could not be reached or did not answer in time)
Observe = Callable[[str, str, float], None]


async def fan_out(plan: Fanout, call: Call) -> Answer:
    """Send every owner its request at once, wait for all of them, answer the rules in the order sent."""
    answers = await asyncio.gather(*(call(sent.owner, sent.request) for sent in plan.requests))
    return answer_retain(plan, {sent.owner.name: answer for sent, answer in zip(plan.requests, answers, strict=True)})


class Owners:
    """One docd connection's links to owners: opened on first use, in the connection's session.

    Each owner gets one connection per docd connection, so one caller's requests reach
    an owner in the order sent; a watch gets a connection of its own.
    """

    def __init__(self, timeout: float, *, token: str | None = None, observe: Observe | None = None,
                 tls: ClientTls = None) -> None:
        self.timeout, self.token, self.observe = timeout, token, observe  # token: docd's own, presented to every owner
        self.tls = tls  # how to reach an owner over TCP: its CA (a Unix socket is local, in clear)
        self.author: str | None = None
        self.scope: str | None = None
        self._clients: dict[str, AsyncClient] = {}
        self._watches: list[tuple[AsyncClient, asyncio.Task[None]]] = []

    async def call(self, owner: Owner, request: Body) -> Answer:
        """Send ``request`` to ``owner`` and return its answer; an owner down is an ``unavailable`` answer."""
        if self.observe is None:
            return await self._call(owner, request)
        started = time.perf_counter()
        answer = await self._call(owner, request)
        self.observe(owner.name, answer["error"]["code"] if "error" in answer else "ok", time.perf_counter() - started)
        return answer

    async def _call(self, owner: Owner, request: Body) -> Answer:
        client = self._clients.get(owner.name)
        if client is not None and client.closed:  # the owner closed it while idle: nothing was sent on it
            del self._clients[owner.name]
            await _quietly_close(client)
            client = None
        try:
            async with asyncio.timeout(self.timeout):
                if client is None:
                    client = self._clients[owner.name] = await self._connect(owner)
                return await client.request(request)
        except (ServerUnavailable, OSError, TimeoutError, LogdError) as exc:
            # The link is in an unknown state (an answer may still be on its way): drop it, reconnect next time.
            if client is not None:
                self._clients.pop(owner.name, None)
                await _quietly_close(client)
            return answer_error(_as_owner_error(owner, exc, self.timeout))

    async def watch(self, owner: Owner, request: Body,
                    deliver: Callable[[DeltaBody], None], ended: Callable[[], None]
                    ) -> tuple[Answer, Callable[[], None] | None]:
        """Start a watch on a connection of its own: its answer, and a function that starts the delta pump.

        ``deliver(delta)`` gets each delta the owner sends; ``ended()`` is called if the
        owner's connection breaks (docd then closes its caller's connection, as the owner would).
        """
        try:
            async with asyncio.timeout(self.timeout):
                client = await self._connect(owner)
                try:
                    answer = await client.request(request)
                except BaseException:
                    await _quietly_close(client)
                    raise
        except (ServerUnavailable, OSError, TimeoutError, LogdError) as exc:
            return answer_error(_as_owner_error(owner, exc, self.timeout)), None
        if "error" in answer:
            await _quietly_close(client)
            return answer, None

        async def pump() -> None:
            try:
                while True:
                    deliver(await client.next_delta())
            except (ServerUnavailable, OSError, LogdError):
                ended()

        def start() -> None:
            self._watches.append((client, asyncio.get_running_loop().create_task(pump())))

        return answer, start

    async def change_session(self, author: str | None, scope: str | None) -> None:
        """Later requests reach owners as ``author`` (None: unchanged) in ``scope``; open links are closed."""
        if author is not None:
            self.author = author
        self.scope = scope
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            await _quietly_close(client)

    async def aclose(self) -> None:
        for client, task in self._watches:
            task.cancel()
            await _quietly_close(client)
        for client in self._clients.values():
            await _quietly_close(client)
        self._clients.clear()

    async def _connect(self, owner: Owner) -> AsyncClient:
        tls = self.tls if isinstance(owner.address, tuple) else None
        return await AsyncClient.connect(owner.address, author=self.author, scope=self.scope, token=self.token,
                                         tls=tls)


def _as_owner_error(owner: Owner, exc: BaseException, timeout: float) -> LogdError:
    """What a caller is told of an owner's trouble: its own error, or ``unavailable`` naming it."""
    if isinstance(exc, LogdError) and not isinstance(exc, ServerUnavailable):
        return exc  # the owner answered an error (it refused the session docd opened with)
    if isinstance(exc, TimeoutError):
        reason = f"no answer within {timeout:g}s"
    elif exc.__cause__ is not None:
        reason = str(exc.__cause__)
    elif isinstance(exc, ServerUnavailable):
        reason = "it closed the connection"
    else:
        reason = str(exc) or type(exc).__name__
    return OwnerUnavailable(f"{owner.name} at {_where(owner)} is unavailable: {reason}")


def _where(owner: Owner) -> str:
    return f"unix:{owner.address}" if isinstance(owner.address, str) else f"{owner.address[0]}:{owner.address[1]}"


async def _quietly_close(client: AsyncClient) -> None:
    with contextlib.suppress(Exception):
        await client.aclose()
