"""The retention daemon, assembled: a policy file becomes a running driver with its operator endpoints.

``retain streams run`` is this module with click in front: each of its options is one
field of :class:`DaemonConfig`, and its three modes are the three calls here --
:func:`run` (the daemon, until SIGTERM or SIGINT), :func:`run_once` (one beat, for cron)
and :func:`dry_run` (what a beat would do now). A program that wants the daemon in its
own process calls the same::

    config = DaemonConfig(load_policy("retain.toml"), http=("127.0.0.1", 9464))
    run(config)
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from redis.backoff import NoBackoff
from redis.retry import Retry

from retain._redis import DEFAULT_REDIS_URL, RedisLike, TlsFiles, redis_client, translate_errors
from retain.clock import utc_now
from retain.daemon import Service, run_daemon
from retain.errors import InvalidInput, ServerUnavailable
from retain.logs import configure_logging
from retain.retention.driver import RetentionDriver
from retain.retention.dryrun import StreamPreview, preview
from retain.retention.leases import Replicas
from retain.retention.policyfile import PolicyFile, load_policy

if TYPE_CHECKING:
    from retain.archive import Archive
    from retain.retention.report import SweepReport
    from retain.wire import Tokens

__all__ = ["DaemonConfig", "connect", "dry_run", "run", "run_once", "sharing"]

log = logging.getLogger("retain.daemon")


@dataclass(frozen=True)
class DaemonConfig:
    """What ``retain streams run`` runs, one field per option.

    Raises:
        InvalidPolicy: ``replica`` is not a valid replica name.
        InvalidInput: ``http`` off loopback without ``readers`` (unless ``insecure``).
    """

    policy: PolicyFile
    #: the Redis URL; else the policy file's ``url``, else ``$RETAIN_REDIS_URL``, else :data:`DEFAULT_REDIS_URL`
    url: str | None = None
    tls: TlsFiles = field(default_factory=TlsFiles)
    #: this replica's name in logs, metrics and the dashboard, over the file's ``[replicas] name``
    replica: str | None = None
    #: where to serve /healthz, /readyz, /metrics and the dashboard; None serves nothing
    http: tuple[str, int] | None = None
    #: the tokens that may read the endpoints (None: anyone who reaches the address)
    readers: Tokens | None = None
    #: serve ``http`` off loopback without ``readers``: anyone who reaches it reads the metrics
    insecure: bool = False
    log_format: str = "text"

    def __post_init__(self) -> None:
        if self.http is not None:
            from retain.wire import refuse_open  # the wire loads only for a daemon that serves its endpoints

            refuse_open([self.http[0]], self.readers, self.insecure)
        if self.replica is not None:
            named = replace(self.policy.replicas, name=self.replica)  # checks the name
            object.__setattr__(self, "policy", replace(self.policy, replicas=named))

    @classmethod
    def from_file(cls, path: str, **options: Any) -> DaemonConfig:
        """The config for the policy file at ``path`` (checked whole), with ``options`` as fields."""
        return cls(load_policy(path), **options)

    def redis_url(self) -> tuple[str, str]:
        """The URL the daemon connects to, and where it came from (what a refusal of it names)."""
        if self.url:
            return self.url, "--url"
        if self.policy.url:
            return self.policy.url, f"url in {self.policy.source}"
        if os.environ.get("RETAIN_REDIS_URL"):
            return os.environ["RETAIN_REDIS_URL"], "$RETAIN_REDIS_URL"
        return DEFAULT_REDIS_URL, "--url"


def connect(config: DaemonConfig) -> RedisLike:
    """The daemon's Redis client; a malformed URL is refused before any I/O (InvalidInput)."""
    # One retry covers a pooled connection gone stale; the driver's own backoff is the retry policy. A server
    # that stops answering (frozen, a network partition) fails a command after a few ticks instead of holding
    # the beat for ever; on a cluster, its commands alone (retain._nodes).
    timeout = max(2.0, 2 * config.policy.tick)
    options: dict[str, Any] = {"retry": Retry(NoBackoff(), 1), "socket_timeout": timeout,
                               "socket_connect_timeout": timeout}
    url, source = config.redis_url()
    try:
        with translate_errors():
            conn: RedisLike = redis_client(url, cluster=config.policy.cluster, tls=config.tls, **options)
    except InvalidInput as exc:
        raise InvalidInput(f"{source}: {exc}") from None
    return conn


@contextmanager
def _opened(config: DaemonConfig) -> Iterator[tuple[RedisLike, Archive | None]]:
    """The archive opened (a bad location is refused before anything connects), then the client; closed after."""
    archive = config.policy.open_archive()
    conn = connect(config)
    try:
        yield conn, archive
    finally:
        conn.close()


def run_once(config: DaemonConfig) -> SweepReport:
    """One beat over every stream of the policy, taking no lease (whichever replica holds a stream)."""
    with _opened(config) as (conn, archive):
        driver = RetentionDriver.from_policy_file(conn, config.policy, archive=archive,
                                                  replicas=Replicas(enabled=False))
        return driver.sweep()


def dry_run(config: DaemonConfig) -> tuple[datetime, list[StreamPreview]]:
    """What one beat would do now, per stream (patterns expanded): nothing is folded or trimmed, no lease taken."""
    now, policy_file = utc_now(), config.policy
    with _opened(config) as (conn, archive):
        return now, list(preview(conn, policy_file.policy, now=now, archive=archive,
                                 fold_min_entries=policy_file.fold_min_entries,
                                 maintenance=policy_file.maintenance()))


def run(config: DaemonConfig) -> None:
    """Run the driver (and, with ``config.http``, its endpoints) until SIGTERM or SIGINT.

    Raises:
        Unauthenticated: Redis refuses the credentials (a Redis that is down is only a warning).
        ServerStartError: the endpoints' address is taken.
    """
    with _opened(config) as (conn, archive):
        _serve(config, conn, archive)


def _serve(config: DaemonConfig, conn: RedisLike, archive: Archive | None) -> None:
    from retain.retention.endpoints import StreamsOps  # the endpoints load starlette: only when served

    policy_file = config.policy
    ops = StreamsOps(conn, policy_file, archive) if config.http is not None else None

    level = _BeatLevel()

    def on_report(report: SweepReport) -> None:
        log.log(level.of(report, time.monotonic()), report.summary(), extra=report.log_fields())
        if ops is not None:
            ops.on_report(report)

    driver = RetentionDriver.from_policy_file(conn, policy_file, archive=archive, measure_lengths=ops is not None,
                                              on_report=on_report)
    if ops is not None:
        ops.attach(driver)
    configure_logging(config.log_format)  # before the first line (the credentials check's), not only in run_daemon
    _check_credentials(conn)
    services: list[Service] = [driver]
    if ops is not None and config.http is not None:
        services[:0] = ops.services(config.http, config.readers)
    folding = f" ({len(policy_file.policy.archived)} folded into {archive.url})" if archive is not None else ""

    def where() -> str:
        if ops is None:
            return ""
        host, port = services[0].address  # type: ignore[attr-defined]
        return f"; health, metrics and dashboard at http://{host}:{port}/"

    run_daemon(*services, name="retention driver", log=log, log_format=config.log_format,
               finishing="the beat in progress and its archive work",
               stopped=lambda: f"after {driver.beats} beats",
               started=lambda: f"retention driver started: {len(policy_file.policy)} streams{folding} from "
                               f"{policy_file.source}, tick {policy_file.tick:g}s{sharing(driver)}{where()}")


class _BeatLevel:
    """The level a beat's log line takes: INFO when it changed something, else DEBUG but for one INFO line a
    minute (``every`` seconds), so that a quiet daemon's log still shows it beats without a line per tick."""

    def __init__(self, every: float = 60.0) -> None:
        self.every = every
        self._last_info: float | None = None

    def of(self, report: SweepReport, now: float) -> int:
        """The level for ``report``, logged at monotonic instant ``now``."""
        if report.idle and self._last_info is not None and now - self._last_info < self.every:
            return logging.DEBUG
        self._last_info = now
        return logging.INFO


def _check_credentials(conn: RedisLike) -> None:
    """Refuse to start with credentials Redis refuses (AuthenticationError: one line, exit 1); a Redis that is
    down is only a warning: the driver backs off and reaches it when it comes back."""
    try:
        with translate_errors():
            conn.ping()
    except ServerUnavailable as exc:
        log.warning("%s; the driver starts anyway and backs off until it answers", exc)


def sharing(driver: RetentionDriver) -> str:
    """How the start line says the driver shares its policy: as which replica, in how many shards."""
    replicas = driver.replicas
    if not replicas.enabled:
        return "; no replicas: this daemon trims every stream"
    return (f"; replica {driver.leases.name} of group {driver.leases.shards.group} ({replicas.shards} shards, "
            f"{replicas.lease_seconds:g} s leases)")
