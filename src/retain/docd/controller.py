"""A controller: a store of its own, serving its subtree over the document protocol, offering chosen verbs.

docd mounts controllers at paths (``verse.ctl``) and sends them requests with paths
relative to the mount (``runs.*``). Anything speaking logd's protocol on a socket
can be one; this module ships one built on a logd :class:`~retain.logd.Store`
(SQLite) and logd's own verb handlers, so what it offers behaves exactly as logd's
verbs do. It offers every logd verb except ``watch`` by default -- ``retain``
included, making it the runs controller that implements retain -- or the verbs it
is given: a controller made ``without=("retain",)`` answers a retain request as a
controller that does not implement it does::

    {error: {code: unsupported, message: "unsupported operation: request type"}}

For ``watch`` as well, serve the store with logd itself (``retain logd serve``):
a logd is a controller that offers every verb.

Example:
    >>> from retain.wire import ThreadedServer
    >>> store = Store.open("runs.sqlite3")
    >>> with ThreadedServer(Controller(store, socket_path="/tmp/runs.sock")):
    ...     Client("/tmp/runs.sock").list("runs(*)")
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from retain.errors import InvalidInput, Unsupported
from retain.logd import Store
from retain.logd.verbs import VERBS, Context, handle
from retain.wire import Format, Tokens, WireLimits
from retain.wire.connection import Link, Reply
from retain.wire.requests import parse_request
from retain.wire.serving import StreamServer
from retain.wire.sockets import HostPort

__all__ = ["UNSUPPORTED", "Controller", "controller_verbs"]

#: what a controller answers for a verb it does not offer (docs/docd.md's words).
UNSUPPORTED = "unsupported operation: request type"


def controller_verbs(without: Iterable[str] = ()) -> tuple[str, ...]:
    """The verbs a :class:`Controller` offers: logd's, less ``watch`` and less ``without``.

    Raises:
        InvalidInput: ``without`` names a verb logd does not have, or ``session``
            (docd opens every connection with one).
    """
    without = tuple(without)
    for verb in without:
        if verb not in VERBS:
            raise InvalidInput(f"{verb!r} is not a logd verb; a controller may go without "
                               f"{', '.join(v for v in sorted(VERBS) if v not in ('session', 'watch'))}")
        if verb == "session":
            raise InvalidInput("a controller cannot go without session: docd opens its connections with one")
    return tuple(verb for verb in VERBS if verb != "watch" and verb not in without)


class Controller(StreamServer):
    """``store`` served as a controller on ``listen`` (TCP) and/or ``socket_path`` (Unix).

    One worker thread applies every request from every connection in arrival order,
    as logd's writer does; each connection is one session. With ``tokens`` each connection presents one
    and its requests are checked as logd checks them; without, a non-loopback ``listen`` needs ``insecure``.
    """

    def __init__(self, store: Store, *, without: Iterable[str] = (), listen: HostPort | None = None,
                 socket_path: str | None = None, limits: WireLimits = WireLimits(), tokens: Tokens | None = None,
                 insecure: bool = False) -> None:
        self.store = store
        self.verbs = controller_verbs(without)
        self.worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="controller")
        super().__init__(self._conversation, listen=listen, socket_path=socket_path, limits=limits, tokens=tokens,
                         insecure=insecure)

    async def aclose(self) -> None:
        await super().aclose()
        self.worker.shutdown(wait=True)

    def _conversation(self, link: Link) -> _Conversation:
        grant = link.token
        session = self.store.session() if grant is None else self.store.session(author=grant.name)
        return _Conversation(self, Context(self.store, session, grant=grant))


class _Conversation:
    def __init__(self, controller: Controller, context: Context) -> None:
        self.controller, self.context = controller, context

    async def answer(self, request: Any, fmt: Format) -> Reply:
        verb, _ = parse_request(request)
        if verb not in self.controller.verbs:
            raise Unsupported(UNSUPPORTED)
        self.context.format = fmt
        loop = asyncio.get_running_loop()
        return Reply(await loop.run_in_executor(self.controller.worker, handle, self.context, request))

    async def aclose(self) -> None:
        return None
