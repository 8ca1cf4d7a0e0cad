"""What every command shares: error translation, the Redis connection options, time parsing."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import click

from retain._redis import DEFAULT_REDIS_URL, TlsFiles, redis_client
from retain.clock import parse_rfc3339
from retain.errors import InvalidInput, RetainError

__all__ = ["RedisTarget", "RetainGroup", "connect", "parse_instant", "redis_url_option", "tls_options"]


class RetainGroup(click.Group):
    """A click group whose commands report library errors as one clean line, exit status 1."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except RetainError as exc:
            raise click.ClickException(str(exc)) from exc


@dataclass(frozen=True)
class RedisTarget:
    """Where a one-shot command connects: the URL, whether it is a cluster, the TLS files, and where the URL came
    from (``--url``, ``$RETAIN_REDIS_URL``, a policy file's ``url``): what a refusal of it names."""

    url: str
    cluster: bool = False
    tls: TlsFiles = field(default_factory=TlsFiles)
    source: str = "--url"


URL_HELP = ("Redis/Valkey server: redis://[USER:PASSWORD@]HOST:PORT/DB, rediss://... (TLS), unix:///PATH, "
            "or redis+sentinel://HOST:PORT[,HOST:PORT]/SERVICE.")


def tls_options(function: Any) -> Any:
    """--tls-ca, --tls-cert, --tls-key: the files of a rediss:// connection."""
    for option in reversed([
        click.option("--tls-ca", type=click.Path(dir_okay=False), help="CA bundle (PEM) to trust for rediss://."),
        click.option("--tls-cert", type=click.Path(dir_okay=False),
                     help="Client certificate (PEM) for a server that asks for one (with --tls-key)."),
        click.option("--tls-key", type=click.Path(dir_okay=False), help="The client certificate's key (PEM)."),
    ]):
        function = option(function)
    return function


def redis_url_option(function: Any) -> Any:
    """--url, --cluster and the TLS files, handed to the command as one ``target`` (:class:`RedisTarget`)."""

    @functools.wraps(function)
    def bundled(*args: Any, url: str, cluster: bool, tls_ca: str | None, tls_cert: str | None, tls_key: str | None,
                **kwargs: Any) -> Any:
        return function(*args, target=RedisTarget(url, cluster, TlsFiles(tls_ca, tls_cert, tls_key), _url_source()),
                        **kwargs)

    wrapped: Any = tls_options(bundled)
    wrapped = click.option("--cluster", is_flag=True, help="The server is a node of a Redis Cluster.")(wrapped)
    return click.option("--url", envvar="RETAIN_REDIS_URL", default=DEFAULT_REDIS_URL, show_default=True,
                        show_envvar=True, help=URL_HELP)(wrapped)


def _url_source() -> str:
    # --url's value came from the command line, $RETAIN_REDIS_URL or the default: a refusal names which.
    source = click.get_current_context().get_parameter_source("url")
    return "$RETAIN_REDIS_URL" if source is click.core.ParameterSource.ENVIRONMENT else "--url"


def connect(target: RedisTarget, **options: Any) -> Any:
    """A client for ``target`` (a cluster client with ``--cluster``); a malformed URL is refused before any I/O,
    naming where it came from and never showing its password."""
    try:
        return redis_client(target.url, cluster=target.cluster, tls=target.tls, **options)
    except InvalidInput as exc:
        raise click.BadParameter(str(exc), param_hint=target.source) from exc


def parse_instant(value: str, param_hint: str) -> datetime:
    """An RFC 3339 instant with a zone, e.g. ``2026-09-12T08:00:00Z``."""
    instant = parse_rfc3339(value)
    if instant is None:
        zoneless = parse_rfc3339(value + "Z") is not None
        raise click.BadParameter(f"{value!r} has no timezone: add Z or an offset such as +02:00" if zoneless
                                 else f"{value!r} is not a time such as 2026-09-12T08:00:00Z", param_hint=param_hint)
    return instant
