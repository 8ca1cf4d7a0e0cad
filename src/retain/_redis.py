"""The boundary with redis-py: its exceptions become retain's, with the cause kept.

Every call into redis-py sits inside :func:`translate_errors`; an answer a
pipeline hands back as an exception value becomes retain's with :func:`as_retain_error`.
Callers never see ``redis.exceptions.*``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import redis.exceptions

from retain.errors import AuthenticationError, RetainError, ServerError, ServerUnavailable, WrongTypeError

__all__ = ["REDIS_ERRORS", "as_retain_error", "translate_errors"]

#: what redis-py raises: its error tree, and the cluster client's own
REDIS_ERRORS = (redis.exceptions.RedisError, redis.exceptions.RedisClusterException)


#: what Redis says (RESP3's HELLO, or NOAUTH) when a client that must authenticate did not
_NO_CREDENTIALS = ("HELLO must be called with the client already authenticated", "NOAUTH", "Authentication required")


def _mapped(exc: BaseException, key: str | None) -> RetainError:
    where = f" on key {key!r}" if key is not None else ""
    text = str(exc)
    if isinstance(exc, (redis.exceptions.AuthenticationError, redis.exceptions.AuthorizationError)) or (
            isinstance(exc, redis.exceptions.ResponseError) and text.startswith(_NO_CREDENTIALS)):
        if text.startswith(_NO_CREDENTIALS):
            return AuthenticationError("Redis requires authentication and none was given: put the password in "
                                       "the URL (redis://:PASSWORD@host:port/0, or redis://USER:PASSWORD@host:port/0 "
                                       "for an ACL user)", server_message=text)
        return AuthenticationError(f"Redis refused the credentials: {text}", server_message=text)
    if isinstance(exc, redis.exceptions.NoPermissionError):
        return AuthenticationError(f"Redis denied the command{where} to this user (its ACL): {text}",
                                   server_message=text)
    if isinstance(exc, (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError)):
        return ServerUnavailable(f"Redis unavailable{where}: {exc}")
    if isinstance(exc, redis.exceptions.ResponseError):
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
