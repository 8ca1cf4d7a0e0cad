"""docd on the network: a stream socket speaking logd's protocol, routing each request to its owner.

A caller talks to docd as it would to logd -- the same documents, framing and
pipelining (``docs/docd.md``). For each request docd reads its clock once, plans
the request (:func:`~retain.docd.router.route`, pure), sends the plan through the
connection's :class:`~retain.docd.owners.Owners`, and answers. One connection's
requests are answered one after another, in order.

With ``tokens`` docd enforces the caller's permissions itself, as logd would
(:func:`~retain.logd.verbs.authorize`: the verb's permission, the authors a request names),
before anything is routed; the caller's session author is its token's name unless it names
another its patterns admit. docd reaches the owners with a token of its own (``owner_token``).

Example:
    >>> table = load_mounts("mounts.toml")
    >>> with ThreadedServer(DocdServer(table, listen=("127.0.0.1", 7410))):
    ...     Client(("127.0.0.1", 7410)).call("retain", now="2026-09-12T08:00:00Z", what=[...])
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from retain.clock import utc_now
from retain.docd.mounts import MountTable
from retain.docd.owners import Observe, Owners, fan_out
from retain.docd.router import Fanout, Forward, SessionChange, answer_forward, delta_from, route
from retain.logd.verbs import authorize
from retain.wire import ClientTls, Format, Tokens, WireLimits
from retain.wire.connection import Link, Reply
from retain.wire.framing import frame
from retain.wire.requests import answer_result, parse_request
from retain.wire.serving import StreamServer
from retain.wire.sockets import DEFAULT_SOCKET_MODE, HostPort

__all__ = ["DocdServer"]

Clock = Callable[[], datetime]


class DocdServer(StreamServer):
    """Route requests across the owners ``table`` names, on ``listen`` (TCP) and/or ``socket_path`` (Unix).

    ``clock`` gives the ``now`` of a retain request that names none, read once per request;
    ``observe(owner, outcome, seconds)``, when given, is called after every request sent to an owner
    (the metrics' hook, :mod:`retain.docd.metrics`); ``owner_tls`` (a CA file, True, or an ``ssl.SSLContext``)
    is how docd reaches an owner over TCP whose listener speaks TLS.
    """

    def __init__(self, table: MountTable, *, listen: HostPort | None = None, socket_path: str | None = None,
                 clock: Clock = utc_now, limits: WireLimits = WireLimits(), tokens: Tokens | None = None,
                 owner_token: str | None = None, insecure: bool = False,
                 socket_mode: int = DEFAULT_SOCKET_MODE, observe: Observe | None = None,
                 owner_tls: ClientTls = None) -> None:
        self.table, self.clock, self.owner_token, self.observe = table, clock, owner_token, observe
        self.owner_tls = owner_tls
        super().__init__(lambda link: _Conversation(self, link), listen=listen, socket_path=socket_path,
                         limits=limits, tokens=tokens, insecure=insecure, socket_mode=socket_mode)


class _Conversation:
    """One caller's connection: its session and its links to owners."""

    def __init__(self, server: DocdServer, link: Link) -> None:
        self.server, self.link = server, link
        self.owners = Owners(server.table.timeout, token=server.owner_token, observe=server.observe,
                             tls=server.owner_tls)
        if link.token is not None:
            self.owners.author = link.token.name

    async def answer(self, request: Any, fmt: Format) -> Reply:
        if self.link.token is not None:
            verb, body = parse_request(request)
            authorize(self.link.token, verb, body)
        plan = route(request, self.server.table, now=self.server.clock())  # the one clock read of this request
        if isinstance(plan, Fanout):
            return Reply(await fan_out(plan, self.owners.call))
        if isinstance(plan, SessionChange):
            await self.owners.change_session(plan.author, plan.scope)
            return Reply(answer_result("session", {"author": self.owners.author or "anonymous",
                                                   "scope": self.owners.scope}))
        return await self._forward(plan, fmt)

    async def _forward(self, plan: Forward, fmt: Format) -> Reply:
        if plan.verb != "watch":
            return Reply(answer_forward(plan, await self.owners.call(plan.owner, plan.request)))
        answer, start = await self.owners.watch(
            plan.owner, plan.request, deliver=lambda delta: self.link.push(frame(delta_from(plan.owner, delta), fmt)),
            ended=self.link.close)
        if start is not None:
            self.link.streaming = True  # quiet, but not idle: it waits for deltas
        return Reply(answer_forward(plan, answer), then=start)

    async def aclose(self) -> None:
        await self.owners.aclose()
