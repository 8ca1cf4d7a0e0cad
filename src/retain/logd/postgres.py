"""The shared backend: PostgreSQL through psycopg 3, for a store past one machine and several servers on it.

The tables are SQLite's (:mod:`retain.logd.sqlite`) in PostgreSQL's words --
``nodes(scope, key, rev, kind, value, crc)``, ``commits`` (with ``ops_crc``), ``scopes``,
``snapshots``, ``meta`` -- plus two of its own, below. The checksums (:mod:`retain.logd.checksums`) are
computed in Python (PostgreSQL has no CRC-32), compared on every read and by the full check.

- ``logd_version``: the schema version (:data:`SCHEMA_VERSION`). On open, a database with no
  tables gets them; an older version is migrated forward one step at a time (each step in
  the transaction that records it); a newer one is refused (a newer retain wrote it).
- ``head``: one row, the newest commit's number and time and a ``generation`` that grows
  whenever the schema, the compaction boundary or the snapshots change. Every writing
  transaction takes it first, ``SELECT ... FOR UPDATE``: writers on every server queue on that
  row, so commit numbers stay gapless and in one total order, and everything a transaction
  reads after it (the head, a precondition's records, a guard's items) is the state it commits
  over.

Keys are ``text COLLATE "C"``: byte order, so the separator (``\\x1f``) sorts below every key
character as in SQLite and a subtree is one key range, whatever the database's locale.

Each commit also sends ``NOTIFY logd_commit`` (delivered when it commits):
:class:`CommitFollower` listens on a connection of its own and wakes a server, which then reads
the commit log from the last commit it published -- the log is the truth, a notification only
says when to look, so one lost loses nothing.

A retain rule's selection reads, page by page on a snapshot, of each item of the container only
its stamp's text (``value::jsonb ->> age``, when a string; each value cast once) and whether the match
holds (jsonb equality of each named leaf with the pattern), streamed in chunks so that Python reads one
while the server makes the next, and reads the stamp in Python with the function the pure selection
uses (:func:`retain.clock.parse_rfc3339`, each distinct text once), so the answer is the pure one by
construction. A batch's guard and tombstones are one statement: an ``INSERT ... SELECT ... RETURNING``
reading one index range per item (``LATERAL``: the item's newest version and those of the records beneath
it), whose count of items says whether every item's guard held. A rule that reads
deeper than the item's own leaves (an age of several names, a map or list in the match) takes the
general path (:meth:`select_items` answers None), as do numbers past 2**53 in a match.

A write is few executes, because each costs psycopg some 30-40 us of Python and a socket send besides the
server's work, and few round trips: the head lock is one message (``BEGIN; SELECT ... FOR UPDATE``), and a
patch of new records sends with it the read of its parent and of whether its keys are new (one statement:
:meth:`PostgresBackend.latest_absent`; a :class:`~retain.logd.storage.ReadAhead`); a commit's rows, log
entry, head and notification are one statement, and where the commit is one row it goes in one message with
``COMMIT``. A single-item patch is two round trips, against four for a raw insert of a document and a
history row in a transaction. A statement in a message of several can have no parameters: those two are
prepared once per connection and sent as ``EXECUTE`` with their values quoted in. Connections run with JIT
off (see :func:`_connected`).

Every psycopg error becomes a :class:`~retain.errors.StorageError`; a lost connection (the
server restarted, the network went) :class:`~retain.errors.StorageUnavailable` (``unavailable``
on the wire), and the next request reconnects.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any, TypeVar

import psycopg
from psycopg import sql

from retain.clock import parse_rfc3339
from retain.errors import StorageError, StorageUnavailable, StoreDamaged
from retain.logd.checksums import checksum, delta_damaged, value_damaged, verify, verify_delta
from retain.logd.storage import SEP, CommitRecord, ItemTest, ReadAhead, Record, Row, ScopeRecord, Selected, Selection
from retain.wire import Or

__all__ = ["CHANNEL", "SCHEMA_VERSION", "CommitFollower", "PostgresBackend", "check_database", "is_postgres_url",
           "redacted"]

log = logging.getLogger(__name__)

_T = TypeVar("_T")
SCHEMA_VERSION = 2
CHANNEL = "logd_commit"
_AFTER_SEP = chr(ord(SEP) + 1)
_PAGE = 20000  # records one selection page reads at most
_COPY_FROM = 64  # rows from which a write goes by COPY rather than inside the commit's statement
_EXACT = 2 ** 53
_CHECKSUMS = 2  # the schema version from which every value and delta carries its checksum
_BACKFILL = 5000  # rows the migration to checksums computes per statement
# Closes a subquery that casts ``value`` to jsonb: OFFSET 0 keeps the planner from pulling the subquery up into
# the query around it, which would copy the cast into every expression that reads it (the stamp's type, its
# text, each match term): three casts per row instead of one, some 60% of a selection page's time.
_ONCE = "OFFSET 0"

_CHUNK = 2000  # rows a selection page streams in at a time
_CHUNKED = psycopg.pq.version() >= 170000  # libpq streams chunks of rows from version 17 on
_INSTANTS = 65536  # distinct stamps a selection keeps read (most containers repeat few)
_LISTEN_STEP = 0.1  # seconds a follower waits for a notification before it looks whether it is closing

# Version 1: what every later step starts from. Each later version appends one step to _MIGRATIONS. Version 2: each
# value and delta carries its checksum (retain.logd.checksums; bigint: a CRC-32 is unsigned), which _backfill
# computes for the rows already there.
_MIGRATIONS: tuple[str, ...] = ("""
CREATE TABLE nodes (scope integer NOT NULL, key text COLLATE "C" NOT NULL, rev bigint NOT NULL,
                    kind smallint NOT NULL, value text);
CREATE UNIQUE INDEX nodes_version ON nodes (scope, key, rev DESC);
CREATE TABLE commits (number bigint PRIMARY KEY, time double precision NOT NULL, author text NOT NULL,
                      scope integer NOT NULL, ops text);
CREATE INDEX commits_time ON commits (time);
CREATE TABLE scopes (id integer PRIMARY KEY, name text COLLATE "C" NOT NULL UNIQUE, created bigint NOT NULL);
CREATE TABLE snapshots (rev bigint PRIMARY KEY);
CREATE TABLE meta (name text PRIMARY KEY, value text NOT NULL);
CREATE TABLE head (one boolean PRIMARY KEY DEFAULT true CHECK (one), number bigint NOT NULL,
                   time double precision NOT NULL, generation bigint NOT NULL);
INSERT INTO head (number, time, generation) VALUES (0, 0, 0);
""", """
ALTER TABLE nodes ADD COLUMN crc bigint;
ALTER TABLE commits ADD COLUMN ops_crc bigint;
""")

# A commit's rows (unless COPY wrote them), its log entry, the head and the notification: one statement, so
# one execute and one round trip. Each execute costs some 30-40 us of psycopg's Python beside the server's work:
# against a pipeline of four statements this saved about a third of a single-item patch's write. The row arrays go
# in binary (``%(...)b``): psycopg escapes each element of a text array with a regular expression, which cost
# some 40 us of a single-item patch; the binary form copies them as they are (a JSON text of the rows was
# measured too: no cheaper in Python, dearer on the server).
_APPEND_COMMIT = (
    "WITH written AS (INSERT INTO nodes (scope, key, rev, kind, value, crc) "
    "SELECT %(scope)s, r.key, %(number)s, r.kind, r.value, r.crc "
    "FROM unnest(%(keys)b::text[], %(kinds)b::smallint[], %(values)b::text[], %(crcs)b::bigint[]) "
    "AS r(key, kind, value, crc)), "
    "logged AS (INSERT INTO commits (number, time, author, scope, ops, ops_crc) "
    "VALUES (%(number)s, %(time)s, %(author)s, %(scope)s, %(ops)s, %(ops_crc)s)), "
    "moved AS (UPDATE head SET number = %(number)s, time = %(time)s, generation = generation + %(bump)s) "
    "SELECT pg_notify(%(channel)s, %(told)s)")

# The same for a commit of one row, as a statement prepared once per connection: the transaction sends its EXECUTE,
# the values quoted in, and COMMIT in one message -- one round trip less per single-item patch. (A pipeline of the
# two saved the round trip and spent as much on its bookkeeping in Python; a statement sent as text is planned
# each time, which cost more than the round trip.)
_APPEND_ONE = ("WITH written AS (INSERT INTO nodes (scope, key, rev, kind, value, crc) "
               "VALUES ($1, $6, $2, $7, $8, $12)), "
               "logged AS (INSERT INTO commits (number, time, author, scope, ops, ops_crc) "
               "VALUES ($2, $3, $4, $1, $5, $13)), "
               "moved AS (UPDATE head SET number = $2, time = $3, generation = generation + $9) "
               "SELECT pg_notify($10, $11)")
_APPEND_ONE_TYPES = ("integer, bigint, double precision, text, text, text, smallint, text, integer, text, text, "
                     "bigint, bigint")

# One prune step's records, its versions and its tombstones: as SQLite's (retain.logd.sqlite).
_PRUNE_UPTO = """
SELECT scope, key FROM (SELECT DISTINCT scope, key FROM nodes WHERE (scope, key) > (%(scope)s, %(key)s)
                        ORDER BY scope, key LIMIT %(records)s) AS step
ORDER BY scope DESC, key DESC LIMIT 1
"""
_IN_STEP = "(scope, key) > (%(scope)s, %(key)s) AND (scope, key) <= (%(upto_scope)s, %(upto_key)s)"
_PRUNE_VERSIONS = f"""
DELETE FROM nodes WHERE (scope, key, rev) IN (
    SELECT scope, key, version FROM (
        SELECT scope, key, rev AS version, LEAD(rev) OVER (PARTITION BY scope, key ORDER BY rev) AS successor
        FROM nodes WHERE {_IN_STEP} AND rev <= %(boundary)s) AS v
    WHERE version < %(boundary)s AND successor IS NOT NULL AND successor <= %(boundary)s
      AND NOT EXISTS (SELECT 1 FROM snapshots s WHERE s.rev >= version AND s.rev < successor))
"""
_PRUNE_TOMBSTONES = f"""
DELETE FROM nodes WHERE {_IN_STEP} AND scope = 0 AND kind = 0 AND rev < %(boundary)s
  AND NOT EXISTS (SELECT 1 FROM nodes o WHERE o.scope = 0 AND o.key = nodes.key AND o.rev < nodes.rev)
"""


def is_postgres_url(target: str) -> bool:
    """Whether a store target names PostgreSQL (``postgresql://`` or ``postgres://``) rather than a SQLite file."""
    return target.startswith(("postgresql://", "postgres://"))


def redacted(url: str) -> str:
    """The URL with its password, if any, replaced by ``***``: for logs and messages."""
    scheme, sep, rest = url.partition("://")
    credentials, at, place = rest.rpartition("@")
    if not at or ":" not in credentials:
        return url
    return f"{scheme}{sep}{credentials.split(':', 1)[0]}:***@{place}"


def _storage_error(exc: psycopg.Error) -> StorageError:
    if isinstance(exc, psycopg.OperationalError) or getattr(exc, "sqlstate", None) in (
            "57P01", "57P02", "57P03", "08000", "08003", "08006", "08001", "08004"):
        return StorageUnavailable(f"postgres unavailable: {exc}".strip())
    return StorageError(f"postgres: {exc}".strip())


def _translated(method: Callable[..., _T]) -> Callable[..., _T]:
    """psycopg's errors as the store's; on a connection several threads may use (the backend's own: a
    server's writer, and a caller beside it), one method at a time."""
    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> _T:
        try:
            with self._lock:
                return method(self, *args, **kwargs)
        except psycopg.Error as exc:
            raise _storage_error(exc) from exc
    return wrapper


def _translated_iter(method: Callable[..., Iterator[_T]]) -> Callable[..., Iterator[_T]]:
    """:func:`_translated` for a method that yields: on a shared connection the rows are read whole under
    the lock first (a generator left half-read must not keep the connection)."""
    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Iterator[_T]:
        try:
            with self._lock:
                rows = list(method(self, *args, **kwargs)) if self._shared_connection else None
            if rows is not None:
                yield from rows
            else:
                yield from method(self, *args, **kwargs)
        except psycopg.Error as exc:
            raise _storage_error(exc) from exc
    return wrapper


def _connected(url: str, timeout: float) -> psycopg.Connection[Any]:
    """A connection for the backend's statements, JIT compilation off.

    The planner guesses a thousand rows for every key range a LATERAL probes (a retain batch's records
    beneath its items: usually none), so a batch of 10,000 items costs past ``jit_above_cost`` and PostgreSQL
    compiled the statement first: 80-130 ms of JIT against some 20 ms of work. No statement here runs long
    enough for compiled code to pay back."""
    db = psycopg.connect(url, autocommit=True, connect_timeout=int(max(1, timeout)))
    try:
        db.execute("SET jit = off")
    except BaseException:
        db.close()
        raise
    return db


def _scopes(scope: int, table: str = "") -> str:
    return f"{table}scope = 0" if scope == 0 else f"{table}scope IN (0, {int(scope)})"


class _Reads:
    """The reads of :class:`~retain.logd.storage.Reads` over one psycopg connection."""

    _shared_connection = False  # a snapshot's connection is one thread's

    def __init__(self, db: psycopg.Connection[Any]) -> None:
        self._db = db
        self._lock: threading.RLock | contextlib.nullcontext[None] = contextlib.nullcontext()

    def _conn(self) -> psycopg.Connection[Any]:
        return self._db

    @_translated
    def head(self) -> tuple[int, float]:
        row = self._conn().execute("SELECT number, time FROM head").fetchone()
        return (int(row[0]), float(row[1])) if row else (0, 0.0)

    @_translated
    def latest(self, scope: int, key: str, at: int) -> Row | None:
        row = self._conn().execute("SELECT kind, value, rev, crc FROM nodes WHERE scope = %s AND key = %s "
                                   "AND rev <= %s ORDER BY rev DESC LIMIT 1", (scope, key, at)).fetchone()
        if row is None:
            return None
        verify(key, row[2], row[1], row[3])
        return Row(key, row[0], row[1])

    @_translated
    def latest_of(self, scope: int, keys: Sequence[str], at: int) -> list[Row | None]:
        found: dict[str, Row] = {}
        for key, kind, value, rev, crc in self._conn().execute(
                "SELECT DISTINCT ON (key) key, kind, value, rev, crc FROM nodes WHERE scope = %s AND key = ANY(%s) "
                "AND rev <= %s ORDER BY key, rev DESC", (scope, list(keys), at)):
            verify(key, rev, value, crc)
            found[key] = Row(key, kind, value)
        return [found.get(key) for key in keys]

    @_translated_iter
    def scan(self, scope: int, key: str, at: int, *, children: bool = False, end: str | None = None) -> Iterator[Row]:
        extra = ""
        params: tuple[Any, ...]
        if end is not None:
            params = (scope, key, end, at)
        elif children:
            extra = "AND strpos(substr(key, %s), chr(31)) = 0 "
            params = (scope, key + SEP, key + _AFTER_SEP, at, len(key) + 2)
        else:
            params = (scope, key, key + _AFTER_SEP, at)
        query = ("SELECT DISTINCT ON (key) key, kind, value, rev, crc FROM nodes WHERE scope = %s AND key >= %s "
                 f"AND key < %s AND rev <= %s {extra}ORDER BY key, rev DESC")
        with self._conn().cursor() as cursor:
            cursor.execute(query, params)
            while batch := cursor.fetchmany(2000):
                for found, kind, value, rev, crc in batch:
                    verify(found, rev, value, crc)
                    yield Row(found, kind, value)

    @_translated
    def select_items(self, scope: int, container: str, at: int, test: ItemTest, cutoff: datetime | None,
                     limit: int) -> Selected | None:
        fields = _flat_fields(test)
        if fields is None:
            return None
        # The view's newest version of every record below the container (the scope's before the baseline's),
        # page by page in key order; of each item (a direct child) the stamp's text when it is a string, and
        # whether the match holds (jsonb equality, as the guard says it). The stamp is read in Python, by the
        # function the pure selection uses (each distinct text once).
        matched, params = _match_sql(test, "j")
        query = ("SELECT key, kind, CASE WHEN jsonb_typeof(j -> %(age)s) = 'string' THEN j ->> %(age)s END, "
                 f"{matched} FROM (SELECT key, kind, CASE WHEN kind = 1 THEN value::jsonb END AS j FROM ("
                 f"SELECT DISTINCT ON (key) key, kind, value FROM nodes WHERE {_scopes(scope)} AND key > %(after)s "
                 f"AND key < %(end)s AND rev <= %(at)s ORDER BY key, scope DESC, rev DESC LIMIT %(page)s) AS v "
                 f"{_ONCE}) AS w")
        params |= {"at": at, "age": test.age[0]}
        expired: list[tuple[str, str]] = []
        unreadable = records = 0
        after, end, cut = container + SEP, container + _AFTER_SEP, len(container) + 1
        stamps = _Stamps(cutoff)
        db = self._conn()
        try:
            # A savepoint: a value holding \u0000, which jsonb refuses, fails the query, not the snapshot.
            with db.transaction(), db.cursor() as cursor:
                while records < limit:
                    page = min(_PAGE, limit - records)
                    read, last = 0, after
                    for key, kind, stamp, holds in _streamed(cursor, query, params | {"after": after, "end": end,
                                                                                        "page": page}):
                        read, last = read + 1, key
                        if kind == 0:
                            continue
                        records += 1
                        name = key[cut:]
                        if SEP in name:
                            continue  # a record beneath an item: counted against the budget, no item
                        verdict = stamps.verdict(stamp, holds)
                        if verdict is _UNREADABLE:
                            unreadable += 1
                        elif verdict is _EXPIRED:
                            expired.append((name, stamp))
                    if read < page:
                        break
                    after = last
        except psycopg.errors.UntranslatableCharacter:
            return None  # the general path reads such a container, and answers the same
        return Selected(Selection(tuple(expired), unreadable), records)

    @_translated
    def reselect_items(self, scope: int, container: str, at: int, test: ItemTest, cutoff: datetime | None,
                       names: Sequence[str]) -> tuple[tuple[str, str], ...] | None:
        if _flat_fields(test) is None:
            return None
        # Of each named item, the view's newest version (one index probe each), read as select_items reads it.
        matched, params = _match_sql(test, "j")
        query = ("SELECT b.name, CASE WHEN jsonb_typeof(j -> %(age)s) = 'string' THEN j ->> %(age)s END, "
                 f"{matched} FROM unnest(%(names)s::text[]) WITH ORDINALITY AS b(name, position) CROSS JOIN LATERAL ("
                 "SELECT CASE WHEN kind = 1 THEN value::jsonb END AS j FROM nodes "
                 f"WHERE {_scopes(scope)} AND key = (%(prefix)s || b.name) COLLATE \"C\" AND rev <= %(at)s "
                 f"ORDER BY scope DESC, rev DESC LIMIT 1) AS v ORDER BY b.position")
        params |= {"at": at, "age": test.age[0], "names": list(names), "prefix": container + SEP}
        stamps = _Stamps(cutoff)
        db = self._conn()
        try:
            with db.transaction():  # a savepoint, as in select_items
                rows = db.execute(query, params).fetchall()
        except psycopg.errors.UntranslatableCharacter:
            return None  # a value jsonb refuses: written since the selection read it, and not to be judged here
        return tuple((name, stamp) for name, stamp, holds in rows if stamps.verdict(stamp, holds) is _EXPIRED)


_UNREADABLE, _EXPIRED, _KEPT = "unreadable", "expired", "kept"


class _Stamps:
    """What a selection decides of an item from the stamp text and the match read in SQL, the stamp read in Python
    by the function the pure selection uses -- each distinct text once (most containers repeat few)."""

    def __init__(self, cutoff: datetime | None) -> None:
        self.cutoff = cutoff
        self.instants: dict[str, datetime | None] = {}

    def verdict(self, stamp: str | None, holds: bool) -> str:
        """:data:`_UNREADABLE`, :data:`_EXPIRED` or :data:`_KEPT`, as :func:`~retain.logd.retain_rules.select`
        decides."""
        if stamp is None:
            return _UNREADABLE
        instants = self.instants
        if stamp not in instants:
            if len(instants) >= _INSTANTS:
                instants.clear()  # stamps that all differ: the cache only costs memory
            instants[stamp] = parse_rfc3339(stamp)
        stamped = instants[stamp]
        if stamped is None:
            return _UNREADABLE
        return _EXPIRED if self.cutoff is not None and stamped <= self.cutoff and holds else _KEPT


def _latest_absent_sql(scope: int, parent: str, first: str, last: str, at: str) -> str:
    """One statement, one execute: the parent's newest version and beside it absent()'s first probe, one key range
    over every key from ``first`` to ``last``, at the commit ``at`` (each SQL: a placeholder, or a value quoted in).
    Against the two statements it halves the time of these reads (an unnest over the parents cost the server half
    again as much as the two)."""
    return ("SELECT n.kind, n.value, (SELECT 1 FROM nodes WHERE "
            f"{_scopes(scope)} AND key >= {first} AND key < {last} AND rev <= {at} LIMIT 1) IS NULL, n.rev, n.crc "
            f"FROM (VALUES (1)) AS one LEFT JOIN (SELECT kind, value, rev, crc FROM nodes WHERE scope = {int(scope)} "
            f"AND key = {parent} AND rev <= {at} ORDER BY rev DESC LIMIT 1) AS n ON true")


def _streamed(cursor: psycopg.Cursor[Any], query: str, params: dict[str, Any]) -> Iterable[tuple[Any, ...]]:
    """The rows of ``query``, in chunks as the server sends them where libpq can (17 and later): Python reads
    one chunk while the server makes the next, on two cores at once, instead of waiting for the whole result
    and then leaving the server idle. An older libpq gives the whole result at once."""
    if _CHUNKED:
        return cursor.stream(query, params, size=_CHUNK)
    return cursor.execute(query, params).fetchall()


def _flat_fields(test: ItemTest) -> list[str] | None:
    """The item fields a flat test reads (the age's one name, then the match's), or None when the test reads
    deeper than the item's own leaves or names a number jsonb and Python may compare differently."""
    if len(test.age) != 1:
        return None
    names = [test.age[0]]
    for name, pattern in (test.match or {}).items():
        alternatives = pattern.alternatives if isinstance(pattern, Or) else (pattern,)
        for alternative in alternatives:
            if isinstance(alternative, (Mapping, list, Or)):
                return None
            if isinstance(alternative, float) and not math.isfinite(alternative):
                return None
            if isinstance(alternative, (int, float)) and not isinstance(alternative, bool) and \
                    abs(alternative) > _EXACT:
                return None
        if name not in names:
            names.append(name)
    return names


def _match_sql(test: ItemTest, value: str) -> tuple[str, dict[str, Any]]:
    """A flat test's match over the item's jsonb ``value``: each named leaf equal (jsonb equality: a string
    equals an equal string, a number an equal number and never a bool, true/false/null their own) to the
    pattern or one of its ``!or`` alternatives -- what :func:`~retain.logd.match.matches` says of scalars."""
    params: dict[str, Any] = {}
    terms = ["true"]
    for index, (name, pattern) in enumerate((test.match or {}).items()):
        params[f"m{index}"] = name
        alternatives = pattern.alternatives if isinstance(pattern, Or) else (pattern,)
        options = []
        for number, alternative in enumerate(alternatives):
            params[f"m{index}_{number}"] = json.dumps(alternative)
            options.append(f"{value} -> %(m{index})s = %(m{index}_{number})s::jsonb")
        terms.append("(" + " OR ".join(options) + ")")
    return "(" + " AND ".join(terms) + ")", params


def _guard(test: ItemTest, value: str) -> tuple[str, dict[str, Any]]:
    """The SQL guard of one flat item over its jsonb ``value``: its stamp is still the text read (``mark``)
    and its match holds."""
    matched, params = _match_sql(test, value)
    terms = [f"jsonb_typeof({value} -> %(age)s) = 'string'", f"{value} ->> %(age)s = mark", matched]
    return " AND ".join(terms), params | {"age": test.age[0]}


class PostgresBackend(_Reads):
    """A :class:`~retain.logd.storage.Backend` on one PostgreSQL database (``postgresql://...``).

    Several backends (in several processes, on several machines) may share one database: every write takes
    the ``head`` row first, and :attr:`shared` tells the store to re-validate what it caches.
    """

    reads_apart = True
    shared = True
    local = False  # every read is a round trip to the server
    _shared_connection = True

    def __init__(self, url: str, *, connect_timeout: float = 10) -> None:
        if not is_postgres_url(url):
            raise StorageError(f"a PostgreSQL store is named by a postgresql:// URL (got {redacted(url)!r})")
        self.url = url
        self._timeout = connect_timeout
        self._writer: psycopg.Connection[Any] | None = None
        self._in_transaction = False
        self._head: tuple[int, float] | None = None  # read under the head row's lock, inside a transaction
        self._generation: int | None = None  # likewise
        self._appended: tuple[Any, ...] | None = None  # a one-row commit's values, sent with COMMIT (see write)
        self._read_ahead: tuple[ReadAhead, int, tuple[Any, ...]] | None = None  # (what, at, its row): see transaction
        # The statements _prepared_call prepared on each connection (by id, with the connection: an id is reused)
        self._prepared: dict[int, tuple[psycopg.Connection[Any], set[str]]] = {}
        db = self._connect()
        super().__init__(db)
        self._lock = threading.RLock()  # one method (one transaction) at a time on the writer's connection
        self._kept = threading.local()  # a reader thread's kept connection (reading(keep=True))
        self._kept_lock = threading.Lock()
        self._kept_all: list[psycopg.Connection[Any]] = []
        self._writer = db
        try:
            _migrate(db)
            self._refuse_damage()
        except psycopg.Error as exc:
            db.close()
            raise _storage_error(exc) from exc
        except BaseException:
            db.close()
            raise

    def _connect(self) -> psycopg.Connection[Any]:
        try:
            return _connected(self.url, self._timeout)
        except psycopg.Error as exc:
            raise _storage_error(exc) from exc

    def _conn(self) -> psycopg.Connection[Any]:
        """The writer's connection, made again when the one before broke (a server restart, a network cut)."""
        if self._writer is None or self._writer.closed or self._writer.broken:
            if self._in_transaction:
                raise StorageUnavailable("postgres unavailable: the connection broke inside a transaction")
            if self._writer is not None:
                self._writer.close()
            self._writer = self._connect()
        return self._writer

    # -- writing --------------------------------------------------------------------------------

    @contextmanager
    def transaction(self, ahead: ReadAhead | None = None) -> Iterator[None]:
        with self._lock:
            try:
                db = self._conn()
                self._in_transaction = True
                # One message, both statements (the simple query protocol takes several): one round trip and
                # one execute -- a pipeline's bookkeeping in Python cost more than the round trip it saved.
                # The read ahead goes in the same message, its values quoted in it: that is the protocol's
                # price for several statements in one message, and a round trip less for a patch of new records.
                read_ahead = self._read_ahead_sql(db, ahead)
                locked = db.execute("BEGIN; SELECT number, time, generation FROM head FOR UPDATE" +
                                    ("" if read_ahead is None else "; " + read_ahead))
                locked.nextset()
                row = locked.fetchone()
                assert row is not None, "the head row is made with the tables"
                self._head = (int(row[0]), float(row[1]))
                self._generation = int(row[2])
                if ahead is not None and read_ahead is not None:
                    locked.nextset()
                    read = locked.fetchone()
                    assert read is not None, "one row, from VALUES"
                    self._read_ahead = (ahead, self._head[0], read)
            except psycopg.Error as exc:
                self._in_transaction, self._head, self._generation, self._read_ahead = False, None, None, None
                self._rollback()
                raise _storage_error(exc) from exc
            try:
                yield
            except BaseException:
                self._in_transaction, self._head, self._generation = False, None, None
                self._appended = self._read_ahead = None
                self._rollback()
                raise
            appended, self._appended, self._read_ahead = self._appended, None, None
            try:
                self._in_transaction, self._head, self._generation = False, None, None
                if appended is None:
                    db.execute("COMMIT")
                else:
                    db.execute(self._prepared_call(db, "logd_append_one", _APPEND_ONE_TYPES, _APPEND_ONE,
                                                   appended) + "; COMMIT")
            except psycopg.Error as exc:
                self._rollback()
                raise _storage_error(exc) from exc

    def _rollback(self) -> None:
        db = self._writer
        if db is None or db.closed or db.broken:
            return
        # psycopg may answer a ROLLBACK with DEALLOCATE ALL (where it prepared statements of its own, which may
        # name objects the transaction made): whether ours are still there is asked when they are next used.
        self._prepared.pop(id(db), None)
        try:
            db.execute("ROLLBACK")
        except psycopg.Error:
            db.close()  # the next request connects afresh

    def head(self) -> tuple[int, float]:
        if self._head is not None:
            return self._head
        return super().head()

    @_translated
    def generation(self) -> int:
        """How often the schema, the compaction boundary or the snapshots changed: the store re-reads them
        when this moved (inside a transaction: under the head row's lock)."""
        if self._generation is not None:
            return self._generation
        row = self._conn().execute("SELECT generation FROM head").fetchone()
        return int(row[0]) if row else 0

    @_translated
    def write(self, record: CommitRecord, rows: Iterable[Row], meta: dict[str, str] | None = None) -> None:
        db = self._conn()
        scope, number = record.scope, record.number
        rows = rows if isinstance(rows, list) else list(rows)
        copied = len(rows) >= _COPY_FROM
        if copied:
            with db.cursor() as cursor, \
                    cursor.copy("COPY nodes (scope, key, rev, kind, value, crc) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row((scope, row.key, number, row.kind, row.value, checksum(row.value)))
        for name, value in (meta or {}).items():
            db.execute("INSERT INTO meta (name, value) VALUES (%s, %s) ON CONFLICT (name) DO UPDATE "
                       "SET value = excluded.value", (name, value))
        delta = record.delta
        if delta is None:
            delta = json.dumps(list(record.ops or ()), separators=(",", ":"))
        inline = () if copied else rows
        if self._in_transaction and len(inline) == 1:
            # Sent with COMMIT as the transaction ends: nothing runs after write in a transaction, and where the
            # statement fails COMMIT does not run and the transaction rolls back.
            (row,) = inline
            self._appended = (scope, number, record.time, record.author, delta, row.key, row.kind, row.value,
                              1 if meta else 0, CHANNEL, str(number), checksum(row.value), checksum(delta))
        else:
            db.execute(_APPEND_COMMIT, {
                "scope": scope, "number": number, "time": record.time, "author": record.author, "ops": delta,
                "ops_crc": checksum(delta), "keys": [row.key for row in inline], "kinds": [row.kind for row in inline],
                "values": [row.value for row in inline], "crcs": [checksum(row.value) for row in inline], "bump": 1 if meta else 0, "channel": CHANNEL,
                "told": str(number)})
        if meta and self._generation is not None:
            self._generation += 1
        self._head = (number, record.time)

    @_translated
    def absent(self, scope: int, keys: Sequence[str], at: int) -> bool:
        if not keys:
            return True
        first, last = min(keys), max(keys)
        if self._conn().execute(f"SELECT 1 FROM nodes WHERE {_scopes(scope)} AND key >= %s AND key < %s "
                                "AND rev <= %s LIMIT 1", (first, last + _AFTER_SEP, at)).fetchone() is None:
            return True  # new keys often come after every key there is (a producer's next ids)
        return self._each_absent(scope, keys, at)

    def _each_absent(self, scope: int, keys: Sequence[str], at: int) -> bool:
        """absent() key by key: one index range per key."""
        found = self._conn().execute(
            f"SELECT 1 FROM unnest(%s::text[]) AS b(k) JOIN nodes AS n ON {_scopes(scope, 'n.')} "
            "AND n.key >= (b.k COLLATE \"C\") AND n.key < ((b.k || chr(32)) COLLATE \"C\") AND n.rev <= %s LIMIT 1",
            (list(keys), at)).fetchone()
        return found is None

    @_translated
    def latest_absent(self, scope: int, parents: Sequence[str], keys: Sequence[str],
                      at: int) -> tuple[list[Row | None], bool]:
        if len(parents) != 1 or not keys:  # records under several parents: rare, read as they come
            return [self.latest(scope, parent, at) for parent in parents], self.absent(scope, keys, at)
        ahead, self._read_ahead = self._read_ahead, None
        row: tuple[Any, ...] | None
        if ahead is not None and ahead[0] == ReadAhead(scope, tuple(parents), tuple(keys)) and ahead[1] == at:
            row = ahead[2]  # read with the lock, at the commit the transaction opened on
        else:
            row = self._conn().execute(_latest_absent_sql(scope, "%(parent)s", "%(first)s", "%(last)s", "%(at)s"), {
                "parent": parents[0], "first": min(keys), "last": max(keys) + _AFTER_SEP, "at": at}).fetchone()
        assert row is not None, "one row, from VALUES"
        kind, value, clear, rev, crc = row
        if kind is not None:
            verify(parents[0], rev, value, crc)
        return [None if kind is None else Row(parents[0], kind, value)], clear or self._each_absent(scope, keys, at)

    def _read_ahead_sql(self, db: psycopg.Connection[Any], ahead: ReadAhead | None) -> str | None:
        """The read ahead as a statement for the lock's message, at the locked head; None for a read
        :meth:`latest_absent` makes otherwise (several parents, no keys)."""
        if ahead is None or len(ahead.parents) != 1 or not ahead.keys:
            return None
        scope = int(ahead.scope)
        return self._prepared_call(db, f"logd_latest_absent_{scope}", "text, text, text",
                                   _latest_absent_sql(scope, "$1", "$2", "$3", "(SELECT number FROM head)"),
                                   (ahead.parents[0], min(ahead.keys), max(ahead.keys) + _AFTER_SEP))

    def _prepared_call(self, db: psycopg.Connection[Any], name: str, types: str, statement: str,
                       values: Sequence[Any]) -> str:
        """``EXECUTE name (values quoted in)``, for a message of several statements (which can have no
        parameters), the statement prepared on this connection the first time: a statement sent as text is
        planned every time, which costs more than the round trip such a message saves."""
        prepared = self._prepared.get(id(db))
        if prepared is None or prepared[0] is not db:
            there = db.execute("SELECT name FROM pg_prepared_statements WHERE name LIKE 'logd\\_%'").fetchall()
            prepared = self._prepared[id(db)] = (db, {row[0] for row in there})
        if name not in prepared[1]:
            db.execute(f"PREPARE {name} ({types}) AS {statement}")
            prepared[1].add(name)
        return f"EXECUTE {name} ({', '.join(sql.Literal(value).as_string(db) for value in values)})"

    def keep_heads(self, container: str, test: ItemTest) -> bool:
        return False  # PostgreSQL's selection casts each value once and streams it: nothing is kept for a test

    @_translated
    def delete_items(self, scope: int, container: str, items: Sequence[tuple[str, str]], test: ItemTest,
                     at: int, rev: int, *, since: int | None = None, beneath: bool = True) -> int:
        # ``since`` and ``beneath`` are not needed: one index range per item reads the item and what lies beneath it
        # at once, in the statement that checks its guard.
        if _flat_fields(test) is None:
            raise StorageError(f"delete_items: this backend cannot say {test} in SQL; select_items answered None")
        prefix = container + SEP
        guard, params = _guard(test, "v.j")
        # Names and marks go as two texts joined by SEP, split by the server: psycopg's dumping of a 10,000-element
        # list costs some 10 ms of Python. Neither holds SEP: a name is a record's own (SEP joins them into keys),
        # a mark a stamp the selection parsed as RFC 3339.
        params |= {"names": SEP.join(name for name, _ in items), "marks": SEP.join(mark for _, mark in items),
                   "prefix": prefix, "at": at, "rev": rev, "scope": scope, "cut": len(prefix) + 1}
        # One statement, one index range per item (LATERAL): the view's newest version of the item and of every
        # record beneath it (the range from the item's key to its key and chr(32) holds exactly these). The item is
        # tombstoned where it is a map record and its guard holds; each record beneath, unless gone, with it. The
        # count is of items: where some guard failed the caller rolls the whole back, so the records beneath the
        # items that held need no waiting for it (one probe per item, not one for the item and one beneath it).
        statement = (
            "WITH gone AS (INSERT INTO nodes (scope, key, rev, kind, value) SELECT %(scope)s, v.key, %(rev)s, 0, NULL "
            "FROM (SELECT n.key, n.key = b.item AS whole, b.mark, n.kind, "
            "CASE WHEN n.key = b.item AND n.kind = 1 THEN n.value::jsonb END AS j "
            "FROM (SELECT (%(prefix)s || name) COLLATE \"C\" AS item, mark FROM "
            "unnest(string_to_array(%(names)s, chr(31)), string_to_array(%(marks)s, chr(31))) AS u(name, mark)) AS b "
            "CROSS JOIN LATERAL (SELECT DISTINCT ON (key) key, kind, value FROM nodes "
            f"WHERE {_scopes(scope)} AND key >= b.item AND key < (b.item || chr(32)) COLLATE \"C\" "
            f"AND rev <= %(at)s ORDER BY key, scope DESC, rev DESC) AS n {_ONCE}) AS v "
            f"WHERE CASE WHEN v.whole THEN v.kind = 1 AND {guard} ELSE v.kind <> 0 END RETURNING key) "
            "SELECT count(*) FROM gone WHERE strpos(substr(key, %(cut)s), chr(31)) = 0")
        db = self._conn()
        try:
            with db.transaction():  # a savepoint: the failure below ends the statement, not the commit
                counted = db.execute(statement, params).fetchone()
        except psycopg.errors.UntranslatableCharacter:
            # An item's value now holds \u0000, which jsonb refuses: written since the selection read it (which
            # would have gone the general way), so its guard does not hold. The caller rolls the batch back.
            return 0
        return int(counted[0]) if counted else 0

    # -- the log, meta, scopes ----------------------------------------------------------------------

    @_translated_iter
    def commits(self, first: int, scopes: Sequence[int]) -> Iterator[CommitRecord]:
        yield from self._commit_pages(first, list(scopes))

    def _commit_pages(self, first: int, scopes: list[int] | None, page: int = 1000) -> Iterator[CommitRecord]:
        """Commits numbered ``first`` and later in order (of ``scopes``, None: every scope), a page per query."""
        db = self._conn()
        where = "" if scopes is None else "AND scope = ANY(%(scopes)s) "
        while True:
            rows = db.execute("SELECT number, time, author, scope, ops, ops_crc FROM commits "
                              f"WHERE number >= %(first)s {where}ORDER BY number LIMIT %(page)s",
                              {"first": first, "scopes": scopes, "page": page}).fetchall()
            for number, at, author, scope, ops, ops_crc in rows:
                verify_delta(int(number), ops, ops_crc)
                yield CommitRecord(int(number), float(at), author, scope,
                                   None if ops is None else tuple(json.loads(ops)))
            if len(rows) < page:
                return
            first = int(rows[-1][0]) + 1

    @_translated
    def meta(self, name: str) -> str | None:
        row = self._conn().execute("SELECT value FROM meta WHERE name = %s", (name,)).fetchone()
        return row[0] if row else None

    @_translated
    def scopes(self) -> list[ScopeRecord]:
        return [ScopeRecord(*row) for row in self._conn().execute(
            "SELECT id, name, created FROM scopes ORDER BY name")]

    @_translated
    def create_scope(self, name: str) -> ScopeRecord:
        with self.transaction():
            db = self._conn()
            row = db.execute("SELECT id, name, created FROM scopes WHERE name = %s", (name,)).fetchone()
            if row is None:
                created = self.head()[0]
                # Ids are never reused: a dropped scope's commits stay in the log under its old id.
                next_id = db.execute("SELECT coalesce(max(scope), 0) + 1 FROM "
                                     "(SELECT id AS scope FROM scopes UNION ALL SELECT max(scope) FROM commits) AS s"
                                     ).fetchone()
                assert next_id is not None
                row = (int(next_id[0]), name, created)
                db.execute("INSERT INTO scopes (id, name, created) VALUES (%s, %s, %s)", row)
        return ScopeRecord(*row)

    @_translated
    def drop_scope(self, scope: int) -> None:
        with self.transaction():
            db = self._conn()
            db.execute("DELETE FROM nodes WHERE scope = %s", (scope,))
            db.execute("DELETE FROM scopes WHERE id = %s", (scope,))

    # -- history ----------------------------------------------------------------------------------

    @_translated
    def first_commit_since(self, time: float) -> int | None:
        row = self._conn().execute("SELECT min(number) FROM commits WHERE time >= %s", (time,)).fetchone()
        return None if row is None or row[0] is None else int(row[0])

    @_translated
    def last_per_bucket(self, below: int, since: float | None, every: float) -> list[int]:
        rows = self._conn().execute(
            "SELECT max(number) FROM commits WHERE number < %s AND time >= %s GROUP BY trunc(time / %s)",
            (below, float("-inf") if since is None else since, every))
        return [int(row[0]) for row in rows]

    @_translated
    def snapshots(self) -> list[int]:
        return [int(row[0]) for row in self._conn().execute("SELECT rev FROM snapshots ORDER BY rev")]

    @_translated
    def move_boundary(self, boundary: int, snapshots: Sequence[int]) -> None:
        with self.transaction():
            db = self._conn()
            with db.cursor() as cursor:
                cursor.execute("DELETE FROM snapshots")
                cursor.executemany("INSERT INTO snapshots (rev) VALUES (%s)", [(rev,) for rev in snapshots])
                cursor.execute("UPDATE commits SET ops = NULL, ops_crc = NULL WHERE number < %s AND ops IS NOT NULL", (boundary,))
                cursor.execute("INSERT INTO meta (name, value) VALUES ('boundary', %s) ON CONFLICT (name) DO UPDATE "
                               "SET value = excluded.value", (str(boundary),))
                cursor.execute("UPDATE head SET generation = generation + 1")

    @_translated
    def prune(self, boundary: int, after: Record | None, records: int) -> tuple[int, Record | None]:
        with self.transaction():
            start = after if after is not None else (-1, "")
            params: dict[str, Any] = {"scope": start[0], "key": start[1], "records": records, "boundary": boundary}
            with self._conn().cursor() as cursor:
                upto = cursor.execute(_PRUNE_UPTO, params).fetchone()
                if upto is None:
                    return 0, None
                params |= {"upto_scope": upto[0], "upto_key": upto[1]}
                removed = cursor.execute(_PRUNE_VERSIONS, params).rowcount
                removed += cursor.execute(_PRUNE_TOMBSTONES, params).rowcount
        return removed, (int(upto[0]), str(upto[1]))

    @_translated
    def reclaim(self) -> None:
        """VACUUM the tables compaction deletes from: the removed versions' space is free to reuse and no
        longer readable from the table's pages once no snapshot older than the prune holds them."""
        with self._lock:
            db = self._conn()
            db.execute("VACUUM nodes")
            db.execute("VACUUM commits")

    @_translated
    def check(self, full: bool = False) -> list[str]:
        """What is inconsistent in the tables, read on one snapshot (see :func:`check_database`), or []."""
        with self.reading() as reads:
            return _problems(reads._conn(), full)

    def _refuse_damage(self) -> None:
        """Refuse a database whose head row and commit log disagree before anything reads or writes it."""
        problems = self.check()
        if problems:
            raise StoreDamaged(f"the store {redacted(self.url)} is damaged ({'; '.join(problems)}); refusing to "
                               f"serve it: restore it from a backup (`retain logd check --db URL` runs the full "
                               f"check)")

    def group(self) -> contextlib.nullcontext[None]:
        # Each transaction commits on its own: a group would hold the head row's lock, and every other server
        # waiting on it, across all of them.
        return contextlib.nullcontext()

    @contextmanager
    def reading(self, *, keep: bool = False) -> Iterator[_Reads]:
        kept: psycopg.Connection[Any] | None = getattr(self._kept, "db", None) if keep else None
        if kept is not None and (kept.closed or kept.broken):
            kept = self._kept.db = None
        try:
            db = kept if kept is not None else _connected(self.url, self._timeout)
        except psycopg.Error as exc:
            raise _storage_error(exc) from exc
        if keep and kept is None:
            self._kept.db = db
            with self._kept_lock:
                self._kept_all.append(db)
        try:
            try:
                db.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                db.execute("SELECT 1 FROM head").fetchall()  # the snapshot starts at the first read
            except psycopg.Error as exc:
                raise _storage_error(exc) from exc
            yield _Reads(db)
        finally:
            if keep:
                try:
                    db.execute("COMMIT")  # ends the snapshot; the connection stays for the thread's next read
                except psycopg.Error:
                    db.close()
            else:
                db.close()

    def close(self) -> None:
        with self._kept_lock:
            for db in self._kept_all:
                db.close()
            self._kept_all.clear()
        if self._writer is not None:
            self._writer.close()


def check_database(url: str, full: bool = True) -> list[str]:
    """The problems found in the logd database at ``url``, read on one snapshot and changing nothing (safe beside
    running servers); [] when there are none.

    PostgreSQL guards its own pages (``amcheck`` is the DBA's tool for that); this checks what logd relies on:
    the head row against the commit log and, when ``full``, a gapless log, no record version past the head,
    and every commit's delta and every record's value decodable."""
    try:
        db = _connected(url, 10)
    except psycopg.Error as exc:
        return [f"cannot connect: {_storage_error(exc)}"]
    with db:
        try:
            db.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            found = db.execute("SELECT to_regclass('logd_version') IS NOT NULL").fetchone()
            if not (found and found[0]):
                return ["no logd tables in this database"]
            return _problems(db, full)
        except psycopg.Error as exc:
            return [f"cannot read: {exc}"]


def _problems(db: psycopg.Connection[Any], full: bool) -> list[str]:
    """:func:`check_database`'s findings on ``db``, inside a snapshot: a writer on another server commits its
    head row and its log entry together, so one snapshot never sees them apart."""
    head = db.execute("SELECT number FROM head").fetchone()
    last = db.execute("SELECT coalesce(max(number), 0), count(*) FROM commits").fetchone()
    assert last is not None
    if head is None:
        return ["the head row is missing"]
    problems: list[str] = []
    if int(head[0]) != int(last[0]):
        problems.append(f"the head row says commit {head[0]} but the log ends at {last[0]}")
    if not full:
        return problems
    if int(last[1]) != int(last[0]):
        problems.append(f"the commit log has gaps: {last[1]} commits numbered up to {last[0]}")
    past = db.execute("SELECT count(*) FROM nodes WHERE rev > %s", (int(head[0]),)).fetchone()
    if past is not None and int(past[0]):
        problems.append(f"{past[0]} record versions are past the head commit {head[0]}")
    # A database no logd of this version opened yet has no checksums to compare (opening it computes them).
    summed = _version(db) >= _CHECKSUMS
    problems += _unsound(db, "SELECT 'commit ' || number, ops, {}, number FROM commits WHERE ops IS NOT NULL{}"
                         .format(*(("ops_crc", " OR ops_crc IS NOT NULL") if summed else ("NULL::bigint", ""))),
                         "delta", lambda row, found: delta_damaged(int(row[3]), row[2], found), summed)
    problems += _unsound(db, "SELECT 'record ' || quote_literal(substr(replace(key, chr(31), '.'), 2)) "
                             "|| ' at commit ' || rev, value, {}, key, rev FROM nodes WHERE value IS NOT NULL{}"
                         .format(*(("crc", " OR crc IS NOT NULL") if summed else ("NULL::bigint", ""))),
                         "value", lambda row, found: value_damaged(row[3], int(row[4]), row[2], found), summed)
    return problems


def _version(db: psycopg.Connection[Any]) -> int:
    row = db.execute("SELECT version FROM logd_version").fetchone()
    return int(row[0]) if row else 0


def _unsound(db: psycopg.Connection[Any], query: str, what: str,
             mismatch: Callable[[tuple[Any, ...], int | None], StoreDamaged], summed: bool,
             shown: int = 20) -> list[str]:
    """The rows of ``query`` (name, JSON text, its stored checksum, what ``mismatch`` names it by) whose text does
    not match its checksum (when ``summed``) or does not decode, read in pages; the first ``shown`` named, the
    rest counted."""
    bad: list[str] = []
    count = 0
    with db.cursor(name=f"logd_check_{what}") as cursor:
        cursor.execute(query)
        while page := cursor.fetchmany(5000):
            for row in page:
                name, text, stored = row[:3]
                found = checksum(text)
                if summed and found != stored:
                    problem = str(mismatch(row, found))
                else:
                    try:
                        json.loads(text)
                        continue
                    except ValueError as exc:
                        problem = f"the {what} of {name} does not decode ({exc})"
                count += 1
                if len(bad) < shown:
                    bad.append(problem)
    if count > shown:
        bad.append(f"and {count - shown} more {what}s that do not match their checksums or do not decode")
    return bad


def _migrate(db: psycopg.Connection[Any]) -> None:
    """Create the tables on a database without them; step an older schema forward; refuse a newer one.

    Two servers opening one new database at once: a transaction-level advisory lock lets one create."""
    with db.transaction():
        db.execute("SELECT pg_advisory_xact_lock(hashtext('retain.logd.schema'))")
        exists = db.execute("SELECT to_regclass('logd_version') IS NOT NULL").fetchone()
        version = 0
        if exists and exists[0]:
            row = db.execute("SELECT version FROM logd_version").fetchone()
            version = int(row[0]) if row else 0
        else:
            db.execute("CREATE TABLE logd_version (version integer NOT NULL)")
            db.execute("INSERT INTO logd_version (version) VALUES (0)")
        if version > SCHEMA_VERSION:
            raise StorageError(f"this logd database has schema version {version}; this retain knows up to "
                               f"{SCHEMA_VERSION}: upgrade retain")
        for step in range(version, SCHEMA_VERSION):
            db.execute(sql.SQL(_MIGRATIONS[step]))
            if step + 1 == _CHECKSUMS:
                _backfill(db)
            db.execute("UPDATE logd_version SET version = %s", (step + 1,))


def _backfill(db: psycopg.Connection[Any]) -> None:
    """Compute the checksum of every value and delta already there, in the migration's transaction (PostgreSQL
    has no CRC-32 of its own: each is computed here, a page of rows per statement)."""
    with db.cursor(name="logd_backfill_values") as cursor:
        cursor.execute("SELECT scope, key, rev, value FROM nodes WHERE value IS NOT NULL")
        while page := cursor.fetchmany(_BACKFILL):
            db.execute("UPDATE nodes SET crc = u.crc FROM unnest(%s::integer[], %s::text[], %s::bigint[], "
                       "%s::bigint[]) AS u(scope, key, rev, crc) WHERE nodes.scope = u.scope "
                       "AND nodes.key = (u.key COLLATE \"C\") AND nodes.rev = u.rev",
                       ([row[0] for row in page], [row[1] for row in page], [row[2] for row in page],
                        [checksum(row[3]) for row in page]))
    with db.cursor(name="logd_backfill_deltas") as cursor:
        cursor.execute("SELECT number, ops FROM commits WHERE ops IS NOT NULL")
        while page := cursor.fetchmany(_BACKFILL):
            db.execute("UPDATE commits SET ops_crc = u.crc FROM unnest(%s::bigint[], %s::bigint[]) AS u(number, crc) "
                       "WHERE commits.number = u.number",
                       ([row[0] for row in page], [checksum(row[1]) for row in page]))


class CommitFollower:
    """Wakes ``wake()`` whenever any server commits to the database (``LISTEN logd_commit``), and at least every
    ``every`` seconds (a notification lost to a reconnect costs at most that long, never a commit)."""

    def __init__(self, url: str, wake: Callable[[], None], *, every: float = 1.0) -> None:
        self.url, self._wake, self._every = url, wake, every
        self._closing = threading.Event()
        self._db: psycopg.Connection[Any] | None = None
        self._thread = threading.Thread(target=self._run, name="logd-follow", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._closing.is_set():
            try:
                with psycopg.connect(self.url, autocommit=True, connect_timeout=5) as db:
                    self._db = db
                    db.execute(f"LISTEN {CHANNEL}")
                    self._wake()  # whatever was committed while this was not listening
                    last = time.monotonic()
                    while not self._closing.is_set():
                        # A notification, or the pause's end: either way the log says what is new. Short
                        # waits, so that closing never waits long.
                        woken = any(True for _ in db.notifies(timeout=_LISTEN_STEP, stop_after=1))
                        if self._closing.is_set():
                            return
                        if woken or time.monotonic() - last >= self._every:
                            last = time.monotonic()
                            self._wake()
            except psycopg.Error as exc:
                if self._closing.is_set():
                    return
                log.warning("logd: listening for other servers' commits failed (%s); retrying", exc)
                self._closing.wait(min(self._every, 1.0))
            finally:
                self._db = None

    def close(self) -> None:
        self._closing.set()
        self._thread.join(timeout=_LISTEN_STEP + 10)
