"""Every error retain raises, in one tree.

    RetainError
    ├── InvalidInput (ValueError)          refused before any I/O
    │   ├── InvalidDuration                "1x", "0s", "-3h"
    │   ├── InvalidWindow                  MaxLen(-1), MinId(naive datetime)
    │   ├── InvalidStreamName              "", "a{b}", "a b"
    │   ├── InvalidPolicy                  a policy file or entry that cannot mean what it says
    │   ├── InvalidStreamId                "12-x", a read bound or fold boundary that is no stream id
    │   └── InvalidArchive                 an archive URL or option that cannot name a store
    ├── ServerError                        the server refused a command; carries its message
    │   └── WrongTypeError                 the key holds something other than a stream
    ├── ServerUnavailable (ConnectionError)  the server could not be reached or dropped the link
    └── ArchiveError                       the archive's object store failed, or holds the unexpected
        ├── ArchiveUnavailable (ConnectionError)     the store could not be reached, or an I/O failed
        ├── ArchiveAccessDenied (PermissionError)    the store refused the credentials
        ├── ArchiveObjectExists (FileExistsError)    a create-only write found its name taken (the fence)
        ├── ArchiveObjectMissing (FileNotFoundError) an object the layout names is not there
        ├── ArchiveCorrupt                 an object does not hold what the layout says it holds
        └── UnarchivableEntry              a stream entry the segment format cannot hold

Callers never see ``redis.exceptions.*`` or ``obstore.exceptions.*``: the
boundaries (:mod:`retain._redis`, :mod:`retain.archive._obstore`) translate them
and keep the original as ``__cause__``.
"""

from __future__ import annotations

__all__ = [
    "ArchiveAccessDenied",
    "ArchiveCorrupt",
    "ArchiveError",
    "ArchiveObjectExists",
    "ArchiveObjectMissing",
    "ArchiveUnavailable",
    "InvalidArchive",
    "InvalidDuration",
    "InvalidInput",
    "InvalidPolicy",
    "InvalidStreamId",
    "InvalidStreamName",
    "InvalidWindow",
    "RetainError",
    "ServerError",
    "ServerUnavailable",
    "UnarchivableEntry",
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


class InvalidStreamId(InvalidInput):
    """A stream id, read bound or fold boundary does not parse, or lies outside 0-0..2^64-1."""


class InvalidArchive(InvalidInput):
    """An archive URL or option cannot name a store: unknown scheme, option for another store."""


class ArchiveError(RetainError):
    """The archive's object store failed, or holds something the layout does not allow."""


class ArchiveUnavailable(ArchiveError, ConnectionError):
    """The object store could not be reached, or an I/O on it failed after its retries."""


class ArchiveAccessDenied(ArchiveError, PermissionError):
    """The object store refused the credentials, or they lack a permission."""


class ArchiveObjectExists(ArchiveError, FileExistsError):
    """A create-only write found its name taken: another writer got there first (the fence)."""


class ArchiveObjectMissing(ArchiveError, FileNotFoundError):
    """An object the layout names (a manifest, a segment it lists) is not in the store."""


class ArchiveCorrupt(ArchiveError):
    """An object does not hold what the layout says: bad manifest, unknown format, conflicting segment."""


class UnarchivableEntry(ArchiveError):
    """A stream entry the segment format cannot hold: an id past 2^63-1, a field name not UTF-8."""
