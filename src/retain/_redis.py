"""The boundary with redis-py: its exceptions become retain's, with the cause kept; a client for any URL.

Every call into redis-py sits inside :func:`translate_errors`; an answer a
pipeline hands back as an exception value becomes retain's with :func:`as_retain_error`.
Callers never see ``redis.exceptions.*``.

:func:`redis_client` makes the client for a URL, the way operators run Redis:

- ``redis://[USER:PASSWORD@]HOST:PORT/DB`` (``USER`` an ACL user; ``:PASSWORD@`` alone for ``requirepass``);
- ``rediss://...``: TLS, with :class:`TlsFiles` (a CA to trust, a client certificate and key);
- ``unix:///path/redis.sock?db=0``;
- ``redis+sentinel://[USER:PASSWORD@]HOST:PORT[,HOST:PORT...]/SERVICE[/DB]``: the master Sentinel names for
  SERVICE, asked again after a failover (``rediss+sentinel://`` for TLS to the master and the sentinels;
  ``?sentinel_password=`` when the sentinels have a password of their own);
- ``cluster=True``: a Redis Cluster from one of its nodes.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import redis
import redis.cluster
import redis.exceptions
import redis.sentinel

from retain._fields import PERCENT_ENCODING, redacted_url, redis_url_problem
from retain.errors import AuthenticationError, InvalidInput, RetainError, ServerError, ServerUnavailable, WrongTypeError

__all__ = ["DEFAULT_REDIS_URL", "REDIS_ERRORS", "SENTINEL_SCHEMES", "AsyncRedisLike", "RedisLike", "TlsFiles", "as_retain_error",
           "redis_client", "translate_errors"]

#: where retain connects when nothing names a Redis (a command's --url, a policy file, $RETAIN_REDIS_URL)
DEFAULT_REDIS_URL = "redis://localhost:6379/0"

#: the URL schemes that name a service behind Sentinel
SENTINEL_SCHEMES = ("redis+sentinel", "rediss+sentinel")

#: what redis-py raises: its error tree, and the cluster client's own
REDIS_ERRORS = (redis.exceptions.RedisError, redis.exceptions.RedisClusterException)


class RedisLike(Protocol):
    """The calls retain makes of a Redis client: ``redis.Redis`` (from any URL :func:`redis_client` takes, Sentinel
    included) and ``redis.cluster.RedisCluster`` both are one. The commands retain sends itself go through
    :meth:`execute_command` or a pipeline; the typed helpers are the few whose answer redis-py parses for it."""

    def execute_command(self, *args: Any, **options: Any) -> Any: ...

    def pipeline(self, transaction: Any = ..., shard_hint: Any = ...) -> Any: ...

    def ping(self, **kwargs: Any) -> Any: ...

    def close(self) -> Any: ...

    def xlen(self, name: Any) -> Any: ...

    def xrange(self, name: Any, min: Any = ..., max: Any = ..., count: Any = ...) -> Any: ...

    def xrevrange(self, name: Any, max: Any = ..., min: Any = ..., count: Any = ...) -> Any: ...

    def scan_iter(self, match: Any = ..., count: Any = ..., _type: Any = ..., **kwargs: Any) -> Any: ...

    def config_get(self, pattern: Any = ..., *args: Any, **kwargs: Any) -> Any: ...

    def xpending_range(self, name: Any, groupname: Any, min: Any, max: Any, count: Any, consumername: Any = ...,
                       idle: Any = ...) -> Any: ...


class AsyncRedisLike(Protocol):
    """:class:`RedisLike` of asyncio: ``redis.asyncio.Redis`` and ``redis.asyncio.cluster.RedisCluster``."""

    async def execute_command(self, *args: Any, **options: Any) -> Any: ...

    def pipeline(self, transaction: Any = ..., shard_hint: Any = ...) -> Any: ...

    def scan_iter(self, match: Any = ..., count: Any = ..., _type: Any = ..., **kwargs: Any) -> Any: ...


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


@dataclass(frozen=True)
class TlsFiles:
    """What a TLS connection to Redis trusts and shows: a CA bundle, a client certificate and its key (PEM files).

    Raises:
        InvalidInput: a file that does not exist, or a certificate without its key (or the other way round).
    """

    ca: str | None = None
    cert: str | None = None
    key: str | None = None

    def __post_init__(self) -> None:
        for name, path in (("CA", self.ca), ("certificate", self.cert), ("key", self.key)):
            if path is not None and not Path(path).is_file():
                raise InvalidInput(f"the TLS {name} file {path} does not exist")
        if (self.cert is None) != (self.key is None):
            raise InvalidInput("a TLS client certificate needs its key, and a key its certificate: give both")

    def __bool__(self) -> bool:
        return any((self.ca, self.cert, self.key))

    def options(self) -> dict[str, Any]:
        """redis-py's ``ssl_*`` options for these files."""
        options: dict[str, Any] = {}
        if self.ca:
            options["ssl_ca_certs"] = self.ca
        if self.cert:
            options["ssl_certfile"], options["ssl_keyfile"] = self.cert, self.key
        return options


def redis_client(url: str, *, cluster: bool = False, tls: TlsFiles | None = None, **options: Any) -> Any:
    """A redis-py client for ``url`` (see the module's list); no I/O until its first command.

    Raises:
        InvalidInput: a URL that is not one of those forms, TLS files with a URL that is not TLS, or a
            Sentinel URL with ``cluster``; before any I/O.
    """
    shown = redacted_url(url)  # a message may show the URL, never its password
    problem = redis_url_problem(url)
    if problem is not None:
        raise InvalidInput(f"{shown!r} is not a Redis URL: {problem}; {PERCENT_ENCODING}")
    scheme = urllib.parse.urlsplit(url).scheme
    tls = tls or TlsFiles()
    secure = scheme in ("rediss", "rediss+sentinel")
    if tls and not secure:
        raise InvalidInput(f"TLS files (--tls-ca, --tls-cert, --tls-key) need a rediss:// URL (got {shown!r})")
    options = {**options, **tls.options()}
    if scheme in SENTINEL_SCHEMES:
        if cluster:
            raise InvalidInput("a Sentinel URL names one master: it cannot also be a cluster (drop --cluster)")
        return _sentinel_master(url, secure, options)
    if scheme not in ("redis", "rediss", "unix"):
        raise InvalidInput(f"a Redis URL starts with redis://, rediss://, unix:// or redis+sentinel:// (got {shown!r})")
    try:
        if cluster:
            return redis.cluster.RedisCluster.from_url(url, **options)
        return redis.Redis.from_url(url, **options)
    except ValueError as exc:
        raise InvalidInput(f"{shown!r} is not a Redis URL: {exc}; {PERCENT_ENCODING}") from exc


def _sentinel_master(url: str, secure: bool, options: dict[str, Any]) -> redis.Redis:
    """``redis+sentinel://[user:pass@]h1:p1,h2:p2/service[/db]``: the client for the master the sentinels name."""
    parts = urllib.parse.urlsplit(url)
    example = "redis+sentinel://[USER:PASSWORD@]HOST:PORT[,HOST:PORT...]/SERVICE[/DB]"
    credentials, _, hosts = parts.netloc.rpartition("@")
    sentinels = []
    for host in hosts.split(","):
        name, sep, port = host.rpartition(":")
        if not sep or not name or not port.isdigit():
            raise InvalidInput(f"a Sentinel URL is {example}: {host!r} is not HOST:PORT (in {redacted_url(url)!r})")
        sentinels.append((name.strip("[]"), int(port)))
    path = [segment for segment in parts.path.split("/") if segment]
    if not path or len(path) > 2 or (len(path) == 2 and not path[1].isdigit()):
        raise InvalidInput(f"a Sentinel URL is {example}: name the service (and a db number) "
                           f"(got {redacted_url(url)!r})")
    username, _, password = credentials.partition(":")
    query = dict(urllib.parse.parse_qsl(parts.query))
    unknown = set(query) - {"sentinel_password", "sentinel_username"}
    if unknown:
        raise InvalidInput(f"a Sentinel URL takes ?sentinel_password= and ?sentinel_username= only "
                           f"(got {', '.join(sorted(unknown))})")
    connection: dict[str, Any] = {**options, "db": int(path[1]) if len(path) == 2 else 0}
    if username:
        connection["username"] = urllib.parse.unquote(username)
    if password:
        connection["password"] = urllib.parse.unquote(password)
    if secure:
        connection["ssl"] = True
    sentinel_options: dict[str, Any] = {"socket_timeout": options.get("socket_timeout", 5.0)}
    if secure:
        sentinel_options.update(ssl=True, **{k: v for k, v in options.items() if k.startswith("ssl_")})
    if "sentinel_password" in query:
        sentinel_options["password"] = query["sentinel_password"]
    if "sentinel_username" in query:
        sentinel_options["username"] = query["sentinel_username"]
    sentinel = redis.sentinel.Sentinel(sentinels, sentinel_kwargs=sentinel_options,  # type: ignore[no-untyped-call]
                                       **connection)
    master: redis.Redis = sentinel.master_for(path[0])  # type: ignore[no-untyped-call]
    return master
