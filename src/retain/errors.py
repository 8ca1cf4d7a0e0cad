"""Every error retain raises, in one tree.

    RetainError
    ├── InvalidInput (ValueError)          refused before any I/O
    │   ├── InvalidDuration                "1x", "0s", "-3h"
    │   ├── InvalidWindow                  MaxLen(-1), MinId(naive datetime)
    │   ├── InvalidStreamName              "", "a{b}", "a b"
    │   └── InvalidPolicy                  a policy file or entry that cannot mean what it says
    ├── ServerError                        the server refused a command; carries its message
    │   └── WrongTypeError                 the key holds something other than a stream
    └── ServerUnavailable (ConnectionError)  the server could not be reached or dropped the link

Callers never see ``redis.exceptions.*``: the boundary translates them with
:func:`retain._redis.translate_errors` and keeps the original as ``__cause__``.
"""

from __future__ import annotations

__all__ = [
    "InvalidDuration",
    "InvalidInput",
    "InvalidPolicy",
    "InvalidStreamName",
    "InvalidWindow",
    "RetainError",
    "ServerError",
    "ServerUnavailable",
    "WrongTypeError",
]


class RetainError(Exception):
    """The base of every error retain raises."""


class InvalidInput(RetainError, ValueError):
    """A value was refused before any I/O; the message names it and what was expected."""


class InvalidDuration(InvalidInput):
    """A duration string did not parse, or was not positive."""


class InvalidWindow(InvalidInput):
    """A trim window cannot hold the values it was given."""


class InvalidStreamName(InvalidInput):
    """A queue, stream name, prefix or raw key is outside the documented set."""


class InvalidPolicy(InvalidInput):
    """A retention policy (file, entry or field) cannot mean what it says."""


class ServerError(RetainError):
    """The server answered a command with an error; ``server_message`` is its text."""

    def __init__(self, message: str, *, server_message: str, key: str | None = None) -> None:
        super().__init__(message)
        self.server_message = server_message
        self.key = key


class WrongTypeError(ServerError):
    """The key exists but does not hold a stream (the server said WRONGTYPE)."""


class ServerUnavailable(RetainError, ConnectionError):
    """The server could not be reached, or the connection broke mid-command."""
