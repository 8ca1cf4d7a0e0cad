"""logd as a daemon, assembled: a store opened, served on its stream address and HTTP, with its endpoints.

``retain logd serve`` is :func:`serve` with click in front: each option is one field of
:class:`ServeConfig` (the ``--limit NAME=VALUE`` bounds already applied to the settings,
the wire's limits and timeouts). A program that wants logd in its own process calls the same::

    serve(ServeConfig("logd.sqlite3", http=("127.0.0.1", 7421)))
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retain.daemon import run_daemon, stop_signals_held
from retain.errors import InvalidInput, RetainError
from retain.logd.endpoints import logd_page, logd_readiness
from retain.logd.postgres import is_postgres_url, redacted
from retain.logd.server import ServerThread
from retain.logd.settings import Settings
from retain.logd.store import Store
from retain.wire import ByteBudget, HttpTimeouts, StreamTimeouts, WireLimits, refuse_clear, refuse_open, server_context
from retain.wire.sockets import listen_address

if TYPE_CHECKING:
    from retain.wire import Tokens

__all__ = ["DEFAULT_LISTEN", "ServeConfig", "serve"]

#: where logd listens unless told otherwise
DEFAULT_LISTEN = ("127.0.0.1", 7420)
#: the most bytes of unfinished requests held across all connections, by default
MAX_BUFFERED_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True)
class ServeConfig:
    """What ``retain logd serve`` serves, one field per option; checked whole when made, before anything opens.

    Raises:
        InvalidInput: both ``listen`` and ``socket_path``; a non-loopback address without tokens (unless
            ``insecure``); tokens on a non-loopback ``listen`` without TLS (unless ``insecure``); a TLS
            certificate and key that do not belong together; a socket mode that is no permission mode.
    """

    #: a SQLite file (PATH or sqlite:PATH, made if missing) or a postgresql:// URL
    db: str = "logd.sqlite3"
    #: the TCP address of the document stream; :data:`DEFAULT_LISTEN` unless ``socket_path`` is given
    listen: tuple[str, int] | None = None
    socket_path: str | None = None
    #: also serve HTTP here (POST / takes a request; /healthz, /readyz, /metrics and / are the operator's)
    http: tuple[str, int] | None = None
    settings: Settings = field(default_factory=Settings)
    limits: WireLimits = field(default_factory=WireLimits)
    stream_timeouts: StreamTimeouts = field(default_factory=StreamTimeouts)
    http_timeouts: HttpTimeouts = field(default_factory=HttpTimeouts)
    max_buffered_bytes: int = MAX_BUFFERED_BYTES
    tokens: Tokens | None = None
    insecure: bool = False
    #: (certificate, key) PEM files: serve ``listen`` and ``http`` over TLS
    tls: tuple[str, str] | None = None
    socket_mode: int = 0o600
    log_format: str = "text"

    def __post_init__(self) -> None:
        object.__setattr__(self, "listen", listen_address(self.listen, self.socket_path, DEFAULT_LISTEN, "logd"))
        if not 0 <= self.socket_mode <= 0o777:
            raise InvalidInput(f"socket_mode: a permission mode such as 0o600 (got {self.socket_mode:#o})")
        hosts = [self.listen[0] if self.listen else None, self.http[0] if self.http else None]
        refuse_open(hosts, self.tokens, self.insecure)
        refuse_clear(hosts[:1], self.tokens, self.tls is not None, self.insecure)
        if self.tls is not None:
            server_context(*self.tls)  # a key that is not the certificate's: refused before anything opens

    def shown_db(self) -> str:
        """The store as a log line may show it (a PostgreSQL URL without its password)."""
        return redacted(self.db) if is_postgres_url(self.db) else self.db


def serve(config: ServeConfig) -> None:
    """Open the store and serve it until SIGTERM or SIGINT, then stop once the requests under way are answered.

    A SQLite store this call created is removed again if the start fails.

    Raises:
        StoreDamaged: the store fails its quick check at open.
        ServerStartError: an address is taken.
    """
    made = not is_postgres_url(config.db) and not Path(config.db.removeprefix("sqlite:")).exists()
    with stop_signals_held():  # Store.open makes the store's threads: they must not take the stop signals
        try:
            store = Store.open(config.db, settings=config.settings)
        except RetainError:
            _remove_store_files(config.db, made)
            raise
        # The event loop, the writer and the readers hand the GIL to each other on every request; at the default
        # 5 ms interval a thread back from I/O could wait that long for it (logd_load's p99 went from 240-700 ms
        # to 140-160 ms at 50 clients with 0.5 ms).
        sys.setswitchinterval(0.0005)
        with store:
            try:
                _run(config, store)
            except RetainError:
                store.close()
                _remove_store_files(config.db, made)  # a store this failed start created is not left behind
                raise


def _run(config: ServeConfig, store: Store) -> None:
    running = ServerThread(store, listen=config.listen if config.socket_path is None else None,
                           socket_path=config.socket_path, http=config.http, tokens=config.tokens,
                           insecure=config.insecure, tls=config.tls, socket_mode=config.socket_mode,
                           budget=ByteBudget(config.max_buffered_bytes), limits=config.limits,
                           stream_timeouts=config.stream_timeouts, http_timeouts=config.http_timeouts,
                           **_endpoints(config, store))

    def started() -> str:
        server = running.server
        secure = "tls://" if config.tls else ""
        where = [f"{secure}{server.address[0]}:{server.address[1]}" if server.address
                 else f"unix:{config.socket_path}"]
        if server.http_address:
            where.append(f"http{'s' if config.tls else ''}://{server.http_address[0]}:{server.http_address[1]}/")
        return f"logd serving {config.shown_db()} at head {store.head} on {' and '.join(where)}"

    run_daemon(running, name="logd", started=started, finishing="the requests under way",
               log_format=config.log_format)


def _endpoints(config: ServeConfig, store: Store) -> dict[str, Any]:
    """With HTTP served: the operator's routes beside POST /, and the hook that counts every answer."""
    if config.http is None:
        return {}
    from retain.logd.metrics import LogdMetrics
    from retain.ops import ops_routes

    metrics = LogdMetrics(store_path=config.db, head=lambda: store.head)
    store.listen(metrics.committed)
    health = logd_readiness(config.db)
    return {"observe": metrics.observe,
            "http_routes": ops_routes(health, metrics.registry, logd_page(config.db, store, metrics, health),
                                      config.tokens)}


def _remove_store_files(db: str, made: bool) -> None:
    """Remove the SQLite file (and its WAL and shared-memory files) if this call created it."""
    path = db.removeprefix("sqlite:")
    if made and path != ":memory:":
        for suffix in ("", "-wal", "-shm"):
            Path(path + suffix).unlink(missing_ok=True)
