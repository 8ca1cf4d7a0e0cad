"""The boundary with redis-py: its exceptions become retain's, with the cause kept.

Every call into redis-py sits inside :func:`translate_errors`; an answer a
pipeline hands back as an exception value becomes retain's with :func:`as_retain_error`.
Callers never see ``redis.exceptions.*``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import redis.exceptions

from retain.errors import RetainError, ServerError, ServerUnavailable, WrongTypeError

__all__ = ["REDIS_ERRORS", "as_retain_error", "translate_errors"]

#: what redis-py raises: its error tree, and the cluster client's own
REDIS_ERRORS = (redis.exceptions.RedisError, redis.exceptions.RedisClusterException)


def _mapped(exc: BaseException, key: str | None) -> RetainError:
    where = f" on key {key!r}" if key is not None else ""
    if isinstance(exc, (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError)):
        return ServerUnavailable(f"Redis unavailable{where}: {exc}")
    if isinstance(exc, redis.exceptions.ResponseError):
        text = str(exc)
        kind = WrongTypeError if text.startswith("WRONGTYPE") else ServerError
        return kind(f"Redis refused the command{where}: {text}", server_message=text, key=key)
    return ServerError(f"Redis client error{where}: {exc}", server_message=str(exc), key=key)


def as_retain_error(error: BaseException, key: str | None = None) -> RetainError:
    """The retain error that stands for ``error`` (a pipeline's answer), with ``error`` as its cause.

    A retain error is returned as it is.
    """
    if isinstance(error, RetainError):
        return error
    mapped = _mapped(error, key)
    mapped.__cause__ = error
    return mapped


@contextmanager
def translate_errors(key: str | None = None) -> Iterator[None]:
    """Raise redis-py errors inside the block as retain errors ``from`` the original; ``key`` names the stream."""
    try:
        yield
    except REDIS_ERRORS as exc:
        raise _mapped(exc, key) from exc
