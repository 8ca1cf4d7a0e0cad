"""The boundary with redis-py: its exceptions become retain's, with the cause kept."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import redis.exceptions

from retain.errors import RetainError, ServerError, ServerUnavailable, WrongTypeError

__all__ = ["map_error", "translate_errors"]


def map_error(exc: redis.exceptions.RedisError, key: str | None = None) -> RetainError:
    """The retain error that stands for a redis-py exception; raise it ``from exc``.

    Used directly on hot paths and where a pipeline hands back exceptions as
    values, one per command; :func:`translate_errors` wraps it for blocks.
    """
    where = f" on key {key!r}" if key is not None else ""
    if isinstance(exc, (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)):
        return ServerUnavailable(f"Redis unavailable{where}: {exc}")
    if isinstance(exc, redis.exceptions.ResponseError):
        text = str(exc)
        kind = WrongTypeError if text.startswith("WRONGTYPE") else ServerError
        return kind(f"Redis refused the command{where}: {text}", server_message=text, key=key)
    return ServerError(f"Redis client error{where}: {exc}", server_message=str(exc), key=key)


@contextmanager
def translate_errors(key: str | None = None) -> Iterator[None]:
    """Raise redis-py errors inside the block as retain errors ``from`` the original."""
    try:
        yield
    except redis.exceptions.RedisError as exc:
        raise map_error(exc, key) from exc
