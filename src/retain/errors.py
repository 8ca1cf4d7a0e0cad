"""Every error retain raises, in one tree.

    RetainError
    ├── InvalidInput (ValueError)          refused before any I/O
    │   ├── InvalidDuration                "1x", "0s", "-3h"
    │   ├── InvalidWindow                  MaxLen(-1), MinId(naive datetime)
    │   ├── InvalidStreamName              "", "a{b}", "a b"
    │   ├── InvalidPolicy                  a policy file or entry that cannot mean what it says
    │   ├── InvalidSettings                logd settings that cannot hold (a tier, a horizon, a budget)
    │   ├── InvalidBackup                  a logd backup or restore that cannot mean what it says
    │   ├── InvalidStreamId                "12-x", a read bound or fold boundary that is no stream id
    │   ├── InvalidArchive                 an archive URL or option that cannot name a store
    │   └── InvalidMounts                  a docd mount table (file, entry, field) that cannot hold
    ├── ServerError                        the server refused a command; carries its message
    │   └── WrongTypeError                 the key holds something other than a stream
    ├── ServerUnavailable (ConnectionError)  the server could not be reached or dropped the link
    ├── AuthenticationError (PermissionError)  the server refused the credentials, required some, or denied a command
    ├── ServerStartError (RuntimeError)    an embedded server (retain.servers) did not come up; carries its log
    ├── LeaseLost                          a replica no longer holds the lease of a stream's shard: it stops there
    ├── ArchiveError                       the archive's object store failed, or holds the unexpected
    │   ├── ArchiveUnavailable (ConnectionError)     the store could not be reached, or an I/O failed
    │   │   └── ArchiveTimeout (TimeoutError)   an archive call of a beat passed the driver's deadline
    │   ├── ArchiveAccessDenied (PermissionError)    the store refused the credentials
    │   ├── ArchiveObjectExists (FileExistsError)    a create-only write found its name taken
    │   │   └── ArchiveConflict            a commit lost to a rival's commit of the same stream (the fence)
    │   │       └── ArchiveFenced (LeaseLost)  a commit's fencing token is older than one the table holds
    │   ├── ArchiveObjectMissing (FileNotFoundError) an object the layout names is not there
    │   ├── ArchiveCorrupt                 an object does not hold what the layout says it holds
    │   │   └── ArchiveGap                 the live tier trimmed past W: the archive lacks entries it should hold
    │   ├── ArchiveNeedsMigration          a format-1 archive is read-only until `retain archive migrate`
    │   └── UnarchivableEntry              a stream entry the table's columns cannot hold
    └── LogdError                          a logd request failed; ``code`` is its wire error code
        ├── InvalidRequest (InvalidInput)  invalid_request: cannot mean what it says; nothing ran
        │   ├── InvalidPath                a path outside the grammar, the offending character named
        │   ├── InvalidDocument            YAML/JSON refused: syntax, tag, alias, size or depth
        │   └── InvalidRetain              invalid_retain: a retain request or rule that cannot mean what it says
        ├── PreconditionFailed             precondition_failed: the state did not match; nothing written
        ├── SchemaViolation                schema_violation: the schema forbids the write (path, constraint)
        ├── StorageError                   storage_error: the store failed underneath
        │   ├── ReadBudgetExceeded         a read would touch more than storage.readBudget records
        │   └── StoreDamaged               the store's file fails its integrity check, or a row does not decode
        ├── Unsupported                    unsupported: a verb or feature this logd or transport lacks
        ├── NotFound (LookupError)         not_found: nothing at the path, or no such scope
        ├── Compacted                      compacted: no kept snapshot serves that commit
        ├── Unauthenticated (AuthenticationError)  unauthenticated: no token, or one no server knows
        ├── Forbidden (AuthenticationError)        forbidden: the token does not permit the verb or author
        ├── LimitExceeded (InvalidRequest)  limit_exceeded: the request is larger than a named limit allows
        └── Unavailable (ServerUnavailable)  unavailable: the server is out of room for more work now
            └── OwnerUnavailable           unavailable: docd could not reach a path's owner

Callers never see ``redis.exceptions.*``, ``obstore.exceptions.*``,
``deltalake.exceptions.*`` or pyarrow's errors: the boundaries
(:mod:`retain._redis`, :mod:`retain.archive._boundary`) translate them and keep
the original as ``__cause__``.
logd translates ``sqlite3.Error`` the same way (:mod:`retain.logd.sqlite`), and a
logd error crosses the wire as ``{error: {code, message}}`` and back into its class.
"""

from __future__ import annotations

__all__ = [
    "ArchiveAccessDenied",
    "ArchiveConflict",
    "ArchiveCorrupt",
    "ArchiveError",
    "ArchiveGap",
    "ArchiveNeedsMigration",
    "ArchiveObjectExists",
    "ArchiveObjectMissing",
    "ArchiveTimeout",
    "ArchiveUnavailable",
    "AuthenticationError",
    "Compacted",
    "InvalidArchive",
    "InvalidBackup",
    "InvalidDocument",
    "InvalidDuration",
    "InvalidInput",
    "InvalidMounts",
    "InvalidPath",
    "InvalidPolicy",
    "InvalidRequest",
    "InvalidRetain",
    "InvalidSettings",
    "InvalidStreamId",
    "InvalidStreamName",
    "InvalidWindow",
    "LOGD_ERRORS",
    "LeaseLost",
    "ArchiveFenced",
    "Forbidden",
    "LimitExceeded",
    "Unauthenticated",
    "Unavailable",
    "LogdError",
    "NotFound",
    "OwnerUnavailable",
    "PreconditionFailed",
    "ReadBudgetExceeded",
    "RetainError",
    "SchemaViolation",
    "ServerError",
    "ServerStartError",
    "ServerUnavailable",
    "StorageError",
    "StoreDamaged",


    "StorageUnavailable",
    "UnarchivableEntry",
    "Unsupported",
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


class InvalidSettings(InvalidInput):
    """logd settings that cannot hold together (a budget, a tier, a horizon shorter than the cutoff)."""


class InvalidBackup(InvalidInput):
    """A logd backup or restore that cannot mean what it says: a PostgreSQL URL (pg_dump's work), a source that is
    not there, a destination that exists without ``force``, a copy onto its own source."""


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


class AuthenticationError(RetainError, PermissionError):
    """The server refused the credentials given, required some that were not given, or denied a command
    to them (Redis WRONGPASS, NOAUTH, NOPERM). Not an outage: retrying does not help, fixing the credentials does.
    ``server_message`` is the server's own text."""

    def __init__(self, message: str, *, server_message: str = "") -> None:
        super().__init__(message)
        self.server_message = server_message


class ServerStartError(RetainError, RuntimeError):
    """An embedded server (:mod:`retain.servers`) did not come up; the message carries the tail of its log."""


class LeaseLost(RetainError):
    """This replica no longer holds the lease of a stream's shard: another replica trims and folds it now.

    Raised for the streams a beat had planned before the lease ran out (or was found taken): the replica
    starts no further step on them, and the next beat leaves them to their holder.
    """


class LogdError(RetainError):
    """A logd request failed; ``code`` is the error code it carries on the wire."""

    code = "storage_error"


class InvalidRequest(LogdError, InvalidInput):
    """A request, document, path or value that cannot mean what it says; nothing ran."""

    code = "invalid_request"


class InvalidPath(InvalidRequest):
    """A path outside the grammar; the message names the path and the offending character."""


class InvalidDocument(InvalidRequest):
    """A YAML or JSON document refused: syntax, an unregistered tag, an alias, its size or depth."""


class InvalidRetain(InvalidRequest):
    """A retain request that cannot mean what it says (refused before any rule runs), or a rule that
    disagrees with the store it meets (``runs.*`` over a keyed array); the message names the rule."""

    code = "invalid_retain"


class PreconditionFailed(LogdError):
    """A patch's precondition did not hold of the current state; nothing was written."""

    code = "precondition_failed"


class SchemaViolation(LogdError):
    """The schema forbids the write; the message names the path and the constraint."""

    code = "schema_violation"


class StorageError(LogdError):
    """The store failed underneath (the SQLite error is the ``__cause__``)."""

    code = "storage_error"


class ReadBudgetExceeded(StorageError):
    """A read would touch more records than ``storage.readBudget`` allows."""


class StoreDamaged(StorageError):
    """The store is damaged: its file fails SQLite's integrity check (the file is named; logd refuses to serve
    it), or a row read does not decode (the key is named). Never served as if it were whole."""


class Unsupported(LogdError):
    """A verb or feature this logd, or this transport, does not offer."""

    code = "unsupported"


class NotFound(LogdError, LookupError):
    """Nothing exists at the path (or no scope has that name)."""

    code = "not_found"


class Compacted(LogdError):
    """No kept snapshot serves that commit; ``nearest`` holds the kept commits either side."""

    code = "compacted"

    def __init__(self, message: str, *, nearest: tuple[int | None, int | None] = (None, None)) -> None:
        super().__init__(message)
        self.nearest = nearest


class Unauthenticated(LogdError, AuthenticationError):
    """No token came with the request (or the connection's first document), or no configured token has that
    secret. HTTP 401."""

    code = "unauthenticated"


class Forbidden(LogdError, AuthenticationError):
    """The token is known but does not permit this: the verb needs a permission it lacks, or the author
    lies outside its patterns. HTTP 403."""

    code = "forbidden"


class LimitExceeded(InvalidRequest):
    """A request larger than a limit of the server's settings allows (ops per patch, rules per retain, digits of an
    integer, the length of a path); the message names the limit and its value. Nothing ran."""

    code = "limit_exceeded"


class Unavailable(LogdError, ServerUnavailable):
    """The server cannot take more work now (its buffers are full); try again later."""

    code = "unavailable"


class OwnerUnavailable(Unavailable):
    """docd could not reach the owner of a path (logd or a controller), or it did not answer in time."""


class StorageUnavailable(Unavailable, StorageError):
    """logd's database could not be reached or its connection broke (PostgreSQL restarted, the network went):
    nothing of the request was committed unless its answer said so; a later request may succeed."""

    code = "unavailable"


#: wire code -> the class a client raises for it (the most general class of that code).
LOGD_ERRORS: dict[str, type[LogdError]] = {
    cls.code: cls for cls in (InvalidRequest, InvalidRetain, PreconditionFailed, SchemaViolation, StorageError,
                              Unsupported, NotFound, Compacted, Unauthenticated, Forbidden, LimitExceeded,
                              OwnerUnavailable)
}


class InvalidStreamId(InvalidInput):
    """A stream id, read bound or fold boundary does not parse, or lies outside 0-0..2^64-1."""


class InvalidArchive(InvalidInput):
    """An archive URL or option cannot name a store: unknown scheme, option for another store."""


class InvalidMounts(InvalidInput):
    """A docd mount table cannot hold: a bad path or address, mounts that overlap; names file, entry, field."""


class ArchiveError(RetainError):
    """The archive's object store failed, or holds something the layout does not allow."""


class ArchiveUnavailable(ArchiveError, ConnectionError):
    """The object store could not be reached, or an I/O on it failed after its retries."""


class ArchiveTimeout(ArchiveUnavailable, TimeoutError):
    """An archive call of a retention beat did not finish within the driver's deadline (``[archive] deadline``):
    that stream's fold counts as failed for the beat and the streams around it go on."""


class ArchiveAccessDenied(ArchiveError, PermissionError):
    """The object store refused the credentials, or they lack a permission."""


class ArchiveObjectExists(ArchiveError, FileExistsError):
    """A create-only write found its name taken: another writer got there first."""


class ArchiveConflict(ArchiveObjectExists):
    """A commit lost to a rival's: another writer advanced the same stream's W (or rewrote its files) first.

    The fence between two folders (INV-FENCE): the loser re-reads W and continues from it.
    """


class ArchiveObjectMissing(ArchiveError, FileNotFoundError):
    """An object the layout names (a data file the log lists, a manifest or a segment) is not in the store."""


class ArchiveCorrupt(ArchiveError):
    """An object does not hold what the layout says: a damaged data file, a bad manifest, an unknown format."""


class ArchiveFenced(ArchiveConflict, LeaseLost):
    """A commit carried a fencing token older than the one the table holds for its shard: a replica that took
    the lease since has committed, so this (deposed) replica's late commit is refused.

    ``streams`` names the streams of the refused commit whose fence is stale.
    """

    def __init__(self, message: str, streams: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.streams = streams


class ArchiveGap(ArchiveCorrupt):
    """The archive does not hold entries it must: the live stream was trimmed past the watermark W
    (``XINFO STREAM``'s ``max-deleted-entry-id`` is above W), so a merge-read would skip them."""


class ArchiveNeedsMigration(ArchiveError):
    """The archive is format 1 (manifests and segments): readable, but written only once `retain archive migrate`
    has made it a table."""


class UnarchivableEntry(ArchiveError):
    """A stream entry the table's columns cannot hold: an id past 2^63-1, a field name not UTF-8."""
