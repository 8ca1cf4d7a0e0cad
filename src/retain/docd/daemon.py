"""docd as a daemon, assembled: the router on its stream address, and its operator endpoints.

``retain docd serve`` is :func:`serve` with click in front: each option is one field of
:class:`DocdConfig`. A program that wants docd in its own process calls the same::

    serve(DocdConfig(load_mounts("mounts.toml"), listen=("127.0.0.1", 7410)))
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from retain.daemon import run_daemon
from retain.docd.metrics import DocdMetrics, owners_check
from retain.docd.server import DocdServer
from retain.ops import DashboardPage, Health, OpsServer
from retain.wire import ClientTls, ThreadedServer, WireLimits, refuse_open
from retain.wire.sockets import listen_address

if TYPE_CHECKING:
    from retain.docd.mounts import MountTable
    from retain.wire import Tokens

__all__ = ["DEFAULT_LISTEN", "DocdConfig", "docd_endpoints", "serve"]

#: where docd listens unless told otherwise
DEFAULT_LISTEN = ("127.0.0.1", 7410)


@dataclass(frozen=True)
class DocdConfig:
    """What ``retain docd serve`` serves, one field per option.

    Raises:
        InvalidInput: both ``listen`` and ``socket_path``; a non-loopback address without tokens (unless
            ``insecure``).
    """

    mounts: MountTable
    #: the TCP address to serve on; :data:`DEFAULT_LISTEN` unless ``socket_path`` is given
    listen: tuple[str, int] | None = None
    #: a Unix socket to serve on instead of ``listen``
    socket_path: str | None = None
    max_document_bytes: int = WireLimits().max_bytes
    #: the callers docd accepts (None: anyone who reaches it, on loopback or with ``insecure``)
    tokens: Tokens | None = None
    #: the secret docd presents to logd and every controller
    owner_token: str | None = None
    #: how docd reaches an owner over TCP that serves TLS: a CA file, True (the system's CAs), an SSLContext
    owner_tls: ClientTls = None
    insecure: bool = False
    socket_mode: int = 0o600
    #: where to serve /healthz, /readyz, /metrics and the dashboard; None serves nothing
    http: tuple[str, int] | None = None
    log_format: str = "text"

    def __post_init__(self) -> None:
        object.__setattr__(self, "listen", listen_address(self.listen, self.socket_path, DEFAULT_LISTEN, "docd"))
        refuse_open([self.listen[0] if self.listen else None, self.http[0] if self.http else None], self.tokens,
                    self.insecure)


def serve(config: DocdConfig) -> None:
    """Serve docd until SIGTERM or SIGINT, then stop once the requests under way are answered.

    Raises:
        ServerStartError: an address is taken.
    """
    where: dict[str, Any] = ({"listen": config.listen} if config.socket_path is None
                             else {"socket_path": config.socket_path})
    services: list[Any] = []
    if config.http is not None:
        ops_server, where["observe"] = docd_endpoints(config.mounts, config.http, config.tokens)
        services.append(ops_server)
    running = ThreadedServer(DocdServer(config.mounts, limits=WireLimits(max_bytes=config.max_document_bytes),
                                        tokens=config.tokens, owner_token=config.owner_token,
                                        insecure=config.insecure, socket_mode=config.socket_mode,
                                        owner_tls=config.owner_tls, **where))
    services.insert(0, running)  # /healthz answers once docd itself serves
    mounts = ", ".join(mount.name for mount in config.mounts.mounts) or "none"

    def started() -> str:
        address = running.server.address
        shown = f"{address[0]}:{address[1]}" if address else f"unix:{config.socket_path}"
        return f"docd serving on {shown}; mounts: {mounts}"

    run_daemon(*services, name="docd", finishing="the requests under way", log_format=config.log_format,
               started=started)


def docd_endpoints(table: MountTable, address: tuple[str, int],
                   tokens: Tokens | None = None) -> tuple[OpsServer, Callable[[str, str, float], None]]:
    """docd's ops server (ready while some owner answers) and the hook its server reports owner calls to."""
    metrics, health = DocdMetrics(), Health()
    health.check("owners", owners_check(table))

    def page() -> DashboardPage:
        return DashboardPage(f"retain docd serve {table.source}", not_ready=health.readiness().listed())

    return OpsServer(address, health, metrics.registry, page, tokens), metrics.observe
