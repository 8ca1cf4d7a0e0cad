"""What every command shares: error translation, the Redis connection option, time parsing."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import click
import redis

from retain.clock import parse_rfc3339
from retain.errors import RetainError

__all__ = ["RetainGroup", "parse_instant", "redis_url_option", "connect"]

DEFAULT_REDIS_URL = "redis://localhost:6379/0"


class RetainGroup(click.Group):
    """A click group whose commands report library errors as one clean line, exit status 1."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except RetainError as exc:
            raise click.ClickException(str(exc)) from exc


def redis_url_option(function: Any) -> Any:
    return click.option("--url", envvar="RETAIN_REDIS_URL", default=DEFAULT_REDIS_URL, show_default=True,
                        show_envvar=True, help="Redis/Valkey server to connect to.")(function)


def connect(url: str) -> redis.Redis:
    """A client for ``url``; a malformed URL is a usage error, not a traceback."""
    try:
        return redis.Redis.from_url(url)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--url") from exc


def parse_instant(value: str, param_hint: str) -> datetime:
    """An RFC 3339 instant with a zone, e.g. ``2026-09-12T08:00:00Z``."""
    instant = parse_rfc3339(value)
    if instant is None:
        zoneless = parse_rfc3339(value + "Z") is not None
        raise click.BadParameter(f"{value!r} has no timezone: add Z or an offset such as +02:00" if zoneless
                                 else f"{value!r} is not a time such as 2026-09-12T08:00:00Z", param_hint=param_hint)
    return instant
