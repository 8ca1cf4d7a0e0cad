"""The embedded backend: stdlib ``sqlite3`` in WAL mode, one file.

Tables: ``nodes(scope, key, rev, kind, value, crc)`` (one row per record version,
primary key ``(scope, key, rev)``, WITHOUT ROWID so the versions of a subtree sit
together), ``commits``, ``scopes``, ``snapshots``, ``meta``. ``crc`` and the commits'
``ops_crc`` are the checksums of the value and the delta (:mod:`retain.logd.checksums`),
compared on every read and by the full check; ``PRAGMA user_version`` is the schema
version (:data:`SCHEMA_VERSION`), a store an older retain made is migrated at open. A read at commit C is
``max(rev) <= C`` per key over one key range; listing a 1,000,000-item container
is one index range scan, at the current commit and at an older one alike.

Each commit is one ``BEGIN IMMEDIATE`` transaction: a process killed in the middle
leaves the previous commit whole and nothing of the new one. A server's writer commits the
patches queued behind each other in one transaction (:meth:`SqliteBackend.group`), and answers
none of them before that transaction is durable. ``secure_delete`` is
on so that versions compaction removes do not linger in free pages. No commit copies
the WAL back into the database (``wal_autocheckpoint`` is off on the writer's
connection): a thread with a connection of its own checkpoints after commits, at most
every ``_CHECKPOINT_PAUSE`` seconds, without blocking the writer -- so the WAL that piles
up while a long read holds a snapshot is never copied inside some client's commit.
``sqlite3.Error`` never escapes: it becomes :class:`~retain.errors.StorageError`.

A retain rule's selection is one statement over the container's records, page after
page (:mod:`retain.logd.sqlite_items` writes the test), run on a connection of its own
inside one read transaction, so that it sees one commit while the writer goes on. A large
container is selected in key ranges at once, one per core: the reader takes the first, a
worker process each other (:mod:`retain.logd.sqlite_pages`). A batch's guard and tombstones
are one ``INSERT ... SELECT`` whose row count says whether every item's guard held, and one
more for the records beneath the items.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import itertools
import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from retain.errors import StorageError, StoreDamaged
from retain.logd import sqlite_heads
from retain.logd.checksums import checksum, checksum_bytes, decoded, decoded_delta, delta_damaged, value_damaged
from retain.logd.sqlite_items import CompiledTest, compile_test, cutoff_params
from retain.logd.sqlite_pages import Worker, select_pages
from retain.logd.storage import SEP, CommitRecord, ItemTest, ReadAhead, Record, Row, ScopeRecord, Selected, Selection

__all__ = ["SCHEMA_VERSION", "SYNCHRONOUS", "SqliteBackend"]

log = logging.getLogger(__name__)

SYNCHRONOUS = ("off", "normal", "full", "extra")
_T = TypeVar("_T")
_AFTER_SEP = chr(ord(SEP) + 1)  # above SEP, below every key character: key + _AFTER_SEP ends key's subtree
_SCOPED = 1 << 48  # added to a scope's revs so that max() prefers a scope's version to the baseline's
_STATEMENTS = 64  # guarded-delete statements kept, by test and scope
_SPAN_ROWS = 8  # the rows per item past which a batch's guards are looked up item by item, not read as one range
_AFTER_LAST = chr(32)  # above SEP and below every key character: key + _AFTER_LAST ends key's subtree and its own
_RANGE = 65536  # the fewest records a selection gives a range of its own: below, a worker costs what it saves
_RANGES = 4  # the most ranges a selection runs at once, however many cores there are
_WORKER_PATIENCE = 10.0  # a worker may take 10 s more than 10 times the reader's own range, then is ended
_CHECKPOINT_PAUSE = 0.05  # seconds between two checkpoints at least (each one syncs the file)
# A value is read as the bytes stored, checked against its checksum, then decoded (retain.logd.checksums): a
# changed byte that is no UTF-8 is named as damage to its record, not refused by sqlite3's own decoding.
_VALUE_BYTES = "CAST(value AS BLOB)"
_SHOWN = 20  # checksum mismatches a check names of each kind (values, deltas); the rest are counted

#: the schema version (``PRAGMA user_version``): 0 is every store before content checksums, 1 has them
SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS nodes (
    scope INTEGER NOT NULL, key TEXT NOT NULL, rev INTEGER NOT NULL, kind INTEGER NOT NULL, value TEXT,
    crc INTEGER, PRIMARY KEY (scope, key, rev)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS commits (
    number INTEGER PRIMARY KEY, time REAL NOT NULL, author TEXT NOT NULL, scope INTEGER NOT NULL, ops TEXT,
    ops_crc INTEGER);
CREATE INDEX IF NOT EXISTS commits_time ON commits (time);
CREATE TABLE IF NOT EXISTS scopes (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, created INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS snapshots (rev INTEGER PRIMARY KEY);
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
""" + sqlite_heads.SCHEMA

# The records (scope, key) of one prune step: the next :records of them after (:scope, :key), in the
# primary key's order; the last one bounds the step.
_PRUNE_UPTO = """
SELECT scope, key FROM (SELECT DISTINCT scope, key FROM nodes WHERE (scope, key) > (:scope, :key)
                        ORDER BY scope, key LIMIT :records)
ORDER BY scope DESC, key DESC LIMIT 1
"""
_IN_STEP = "(scope, key) > (:scope, :key) AND (scope, key) <= (:upto_scope, :upto_key)"
# Versions no kept commit reads: the next version of the same key is at or below the boundary,
# and no kept snapshot falls in [rev, next). The window runs over rev <= boundary so that a
# version whose successor is exactly the boundary still sees it.
_PRUNE_VERSIONS = f"""
DELETE FROM nodes WHERE (scope, key, rev) IN (
    SELECT scope, key, version FROM (
        SELECT scope, key, rev AS version, LEAD(rev) OVER (PARTITION BY scope, key ORDER BY rev) AS successor
        FROM nodes WHERE {_IN_STEP} AND rev <= :boundary)
    WHERE version < :boundary AND successor IS NOT NULL AND successor <= :boundary
      AND NOT EXISTS (SELECT 1 FROM snapshots s WHERE s.rev >= version AND s.rev < successor))
"""
# A baseline tombstone with nothing older under it says nothing an absent key does not.
_PRUNE_TOMBSTONES = f"""
DELETE FROM nodes WHERE {_IN_STEP} AND scope = 0 AND kind = 0 AND rev < :boundary
  AND NOT EXISTS (SELECT 1 FROM nodes o WHERE o.scope = 0 AND o.key = nodes.key AND o.rev < nodes.rev)
"""


def _translated(method: Callable[..., _T]) -> Callable[..., _T]:
    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> _T:
        try:
            return method(*args, **kwargs)
        except sqlite3.Error as exc:
            raise StorageError(f"sqlite: {exc}") from exc
    return wrapper


def _translated_iter(method: Callable[..., Iterator[_T]]) -> Callable[..., Iterator[_T]]:
    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> Iterator[_T]:
        try:
            yield from method(*args, **kwargs)
        except sqlite3.Error as exc:
            raise StorageError(f"sqlite: {exc}") from exc
    return wrapper


def _scopes(scope: int, table: str = "") -> str:
    """The SQL condition on a view's scopes: the baseline, or the baseline and one scope."""
    return f"{table}scope = 0" if scope == 0 else f"{table}scope IN (0, {int(scope)})"


def _newest(scope: int, table: str = "") -> str:
    """The aggregate whose bare columns are a view's version of a key: the scope's newest, else the baseline's."""
    return f"max({_version(scope, table)})"


def _version(scope: int, table: str = "") -> str:
    """A row's place among a key's versions in a view: its rev, a scope's above every baseline one."""
    if scope == 0:
        return f"{table}rev"
    return f"(CASE WHEN {table}scope = 0 THEN {table}rev ELSE {table}rev + {_SCOPED} END)"


class _Reads:
    """The reads of :class:`~retain.logd.storage.Reads` over one sqlite3 connection; ``path``: the file, for a
    snapshot's selection to hand key ranges to workers (None: it selects every range itself)."""

    def __init__(self, db: sqlite3.Connection, path: str | None = None, head: tuple[int, float] | None = None,
                 retain_indexes: bool = True) -> None:
        self._db = db
        self._path = path
        self._head = head  # a snapshot's head, read as it began (it cannot move); None: read it each time
        self._retain_indexes = retain_indexes  # whether the store keeps heads indexes (storage.retainIndexes)

    @_translated
    def head(self) -> tuple[int, float]:
        return self._head if self._head is not None else _head(self._db)

    @_translated
    def latest(self, scope: int, key: str, at: int) -> Row | None:
        row = self._db.execute(f"SELECT kind, {_VALUE_BYTES}, rev, crc FROM nodes WHERE scope = ? AND key = ? "
                               "AND rev <= ? ORDER BY rev DESC LIMIT 1", (scope, key, at)).fetchone()
        return Row(key, row[0], decoded(key, row[2], row[1], row[3])) if row else None

    @_translated
    def latest_of(self, scope: int, keys: Sequence[str], at: int) -> list[Row | None]:
        rows = self._db.execute(_latest_of(len(keys)), [value for key in keys for value in (scope, key, at)])
        found = {key: Row(key, kind, decoded(key, rev, data, crc)) for key, kind, data, crc, rev in rows}
        return [found.get(key) for key in keys]

    @_translated_iter
    def scan(self, scope: int, key: str, at: int, *, children: bool = False, end: str | None = None) -> Iterator[Row]:
        # SQLite's bare-column rule: with max(rev), kind and value come from the newest version.
        if end is not None:
            sql = (f"SELECT key, kind, {_VALUE_BYTES}, crc, max(rev) FROM nodes WHERE scope = ? AND key >= ? AND key < ? "
                   "AND rev <= ? GROUP BY key ORDER BY key")
            params: tuple[Any, ...] = (scope, key, end, at)
        elif children:
            sql = (f"SELECT key, kind, {_VALUE_BYTES}, crc, max(rev) FROM nodes WHERE scope = ? AND key >= ? AND key < ? "
                   "AND rev <= ? AND instr(substr(key, ?), char(31)) = 0 GROUP BY key ORDER BY key")
            params = (scope, key + SEP, key + _AFTER_SEP, at, len(key) + 2)
        else:
            sql = (f"SELECT key, kind, {_VALUE_BYTES}, crc, max(rev) FROM nodes WHERE scope = ? AND key >= ? AND key < ? "
                   "AND rev <= ? GROUP BY key ORDER BY key")
            params = (scope, key, key + _AFTER_SEP, at)
        for found, kind, data, crc, rev in self._db.execute(sql, params):
            yield Row(found, kind, decoded(found, rev, data, crc))

    @_translated
    def select_items(self, scope: int, container: str, at: int, test: ItemTest, cutoff: datetime | None,
                     limit: int) -> Selected | None:
        if scope == 0 and self._retain_indexes and sqlite_heads.indexable(test):
            heads = sqlite_heads.find(self._db, container, test)
            if heads is not None and heads.usable and at == self.head()[0]:
                statement, params = sqlite_heads.selecting(heads, container, cutoff)
                ranges = sqlite_heads.ranges(self._db, heads, container, self._parts(scope), _RANGE)
                return self._select_ranges(statement, params, ranges, at, limit, index=True)
            indexed = False  # the store keeps none for this test yet: the pass builds it (Backend.keep_heads)
        else:
            indexed = True  # nothing to build
        selecting = _selecting(test, scope, container, at, cutoff)
        if selecting is None:
            return None
        statement, params = selecting
        # The baseline's pages are key ranges found in the index (sqlite_pages.pages).
        selected = self._select_ranges(statement, params, self._ranges(scope, container), at, limit, bounded=scope == 0)
        return dataclasses.replace(selected, indexed=indexed)

    def _select_ranges(self, statement: str, params: dict[str, Any], ranges: list[tuple[str, str]], at: int,
                       limit: int, *, bounded: bool = False, index: bool = False) -> Selected:
        """The selection statement over each key range at once: the first here, each other in a worker process (read
        here after all if its worker cannot answer)."""
        (after, end), *others = ranges
        path = self._path
        workers = [Worker.start(path, at, statement, params, start, stop, limit, bounded, index)
                   for start, stop in others] if path is not None else []
        started = time.monotonic()
        try:
            parts = [select_pages(self._db, statement, params, after, end, limit, bounded, index)]
            # A worker's range is about as large as the one read here: one ten times as slow, and 10 s more, is stuck.
            patience = _WORKER_PATIENCE + _WORKER_PATIENCE * (time.monotonic() - started)
            for number, (start, stop) in enumerate(others):
                answered = workers[number].result(patience) if workers else None
                # A worker that could not answer: its range read here, on this snapshot.
                parts.append(answered or select_pages(self._db, statement, params, start, stop, limit, bounded, index))
        finally:
            for worker in workers:
                worker.stop()
        expired = tuple(pair for part in parts for pair in part.expired)  # the ranges are in key order
        # Each range read up to the limit: under it, every one read all its records.
        return Selected(Selection(expired, sum(part.unreadable for part in parts)),
                        min(limit, sum(part.records for part in parts)), any(part.beneath for part in parts))

    @_translated
    def reselect_items(self, scope: int, container: str, at: int, test: ItemTest, cutoff: datetime | None,
                       names: Sequence[str]) -> tuple[tuple[str, str], ...] | None:
        reselecting = _reselecting(test, scope)
        if reselecting is None:
            return None
        statement, params = reselecting
        rows = self._db.execute(statement, {**params, **cutoff_params(cutoff), "at": at, "prefix": container + SEP,
                                            "names": json.dumps(list(names))}).fetchall()
        return tuple((name, str(mark)) for name, mark in rows)

    def _parts(self, scope: int) -> int:
        """The most key ranges a selection in ``scope``'s view runs at once: one per core up to :data:`_RANGES`; one
        where no worker can help (a snapshot of the writer's connection, a scope's view: its records are two ranges
        of the index already)."""
        return 1 if self._path is None or scope != 0 else min(_cores(), _RANGES)

    def _ranges(self, scope: int, container: str) -> list[tuple[str, str]]:
        """The container's records cut into key ranges ``(after, end)`` of about as many records each: one
        per core up to :data:`_RANGES`, none under :data:`_RANGE` records. One range where no worker can
        help: a snapshot of the writer's connection, a scope's view (its records are two ranges of the
        index already), a container too small to be worth a worker."""
        after, end = container + SEP, container + _AFTER_SEP
        if self._parts(scope) < 2:
            return [(after, end)]
        # Every version counts, the newer than ``at`` too: the cut needs no precision, and each query takes half
        # as long as one looking at the revs.
        params = {"after": after, "end": end}
        versions = self._db.execute("SELECT count(*) FROM nodes WHERE scope = 0 AND key > :after AND key < :end",
                                    params).fetchone()[0]
        count = min(self._parts(scope), versions // _RANGE)
        if count < 2:
            return [(after, end)]
        ranges, start = [], after
        for index in range(1, count):
            # A range ends before the key at its share of the versions; the next starts past the key before that
            # one, so that each key's versions are read in one range.
            found = self._db.execute("SELECT key FROM nodes WHERE scope = 0 AND key > :after AND key < :end "
                                     "ORDER BY key LIMIT 1 OFFSET :offset",
                                     params | {"offset": versions * index // count}).fetchone()
            if found is None:
                break
            before = self._db.execute("SELECT max(key) FROM nodes WHERE scope = 0 AND key > :after AND key < :first",
                                      params | {"first": found[0]}).fetchone()[0]
            if before is None or before <= start:
                continue
            first = found[0]
            ranges.append((start, first))
            start = before
        return [*ranges, (start, end)]


@functools.lru_cache(maxsize=64)
def _latest_of(count: int) -> str:
    """One statement of ``count`` of :meth:`_Reads.latest`'s look-ups (its text made once per count): each key's
    newest version is one step down the index (a max(rev) per key would read every version of a record that
    changes often)."""
    one = (f"SELECT * FROM (SELECT key, kind, {_VALUE_BYTES}, crc, rev FROM nodes WHERE scope = ? AND key = ? "
           "AND rev <= ? ORDER BY rev DESC LIMIT 1)")
    return " UNION ALL ".join([one] * count)


def _head(db: sqlite3.Connection) -> tuple[int, float]:
    row = db.execute("SELECT number, time FROM commits ORDER BY number DESC LIMIT 1").fetchone()
    return (row[0], row[1]) if row else (0, 0.0)


def _cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _selecting(test: ItemTest, scope: int, container: str, at: int,
               cutoff: datetime | None) -> tuple[str, dict[str, Any]] | None:
    """The selection statement over at most ``:page`` records of the container past the key ``:after``
    (before ``:end``): one row of (records read, unreadable items, the expired items' names and marks
    joined, the last record's key, records beneath the items). In the baseline's view the last key is NULL:
    its pages are key ranges found before (:func:`~retain.logd.sqlite_pages.pages`)."""
    beneath = container + SEP + "*" + SEP + "*"  # a key past an item's: a record beneath it
    params = {**cutoff_params(cutoff), "at": at, "cut": len(container) + 2, "beneath": beneath}
    row = compile_test(test, scope, "n.key", "n.value", prefix="s")  # over each version's own row
    if row is None:
        return None
    if row.flat:
        return _selecting_flat(row, scope), {**row.params, **params}
    compiled = compile_test(test, scope, "item_key", "item_value")  # over the item as the level above names it
    assert compiled is not None
    # The newest version of each record, its stamp computed once (an aggregate's other columns are computed as
    # each group comes out). Each level is a subquery with a LIMIT, which SQLite does not flatten into the
    # level above: the class too is computed once per record, however often the expressions above name it. A
    # record beneath an item (SEP past the container's) counts against the limit but is no item: its class is
    # 'b'. The mark the guard takes back is the stamp.
    statement = (
        "SELECT count(*), total(class = 'u'), group_concat(CASE WHEN class = 'x' THEN substr(item_key, :cut) || "
        f"char(30) || s END, char(30)), {_last_key(scope)}, total(class = 'b') "
        "FROM (SELECT item_key, s, CASE WHEN item_key GLOB :beneath THEN 'b' "
        f"ELSE {compiled.classify('s')} END AS class FROM ("
        f"SELECT n.key AS item_key, n.value AS item_value, {_newest(scope, 'n.')} AS version, {row.stamp} AS s "
        f"FROM nodes AS n WHERE {_scopes(scope, 'n.')} AND n.key > :after AND n.key < :end AND n.rev <= :at "
        "GROUP BY n.key HAVING n.kind <> 0 ORDER BY n.key LIMIT :page) LIMIT -1)")
    return statement, {**row.params, **compiled.params, **params}


_TOMBSTONE, _KEPT, _UNREADABLE, _EXPIRED, _BENEATH = range(5)


def _last_key(scope: int) -> str:
    """The last record's key of a page: asked only where the page is not a key range found before (a scope's view,
    whose records are two ranges of the index); ``max()`` of every record's key costs a copy of each."""
    return "NULL" if scope == 0 else "max(item_key)"


def _selecting_flat(compiled: CompiledTest, scope: int) -> str:
    """The selection statement of a test that reads only the item's own record: each version of each record is
    classified as its row is read, into a number packed under its version (``version * 8 + class``), so that
    the newest version's class comes out of one ``max`` per record -- no record's value is ever copied from
    one level of the statement to the next, and the stamp is a look-up in the value parsed once per row. A
    record beneath an item (the ``:beneath`` pattern) is no item; a tombstone is no record. The mark a guard
    takes back is the version read."""
    code = (f"CASE WHEN n.kind = 0 THEN {_TOMBSTONE} WHEN n.key GLOB :beneath THEN {_BENEATH} "
            f"ELSE {compiled.classify(compiled.stamp, str(_UNREADABLE), str(_EXPIRED), str(_KEPT))} END")
    return (f"SELECT count(*), total(v & 7 = {_UNREADABLE}), group_concat(CASE WHEN v & 7 = {_EXPIRED} THEN "
            f"substr(item_key, :cut) || char(30) || (v >> 3) END, char(30)), {_last_key(scope)}, "
            f"total(v & 7 = {_BENEATH}) FROM ("
            f"SELECT n.key AS item_key, max({_version(scope, 'n.')} * 8 + {code}) AS v FROM nodes AS n "
            f"WHERE {_scopes(scope, 'n.')} AND n.key > :after AND n.key < :end AND n.rev <= :at GROUP BY n.key "
            f"HAVING v & 7 <> {_TOMBSTONE} ORDER BY n.key LIMIT :page)")


def _reselecting(test: ItemTest, scope: int) -> tuple[str, dict[str, Any]] | None:
    """The statement that reads the named items (``:names``, a JSON list) of the container ``:prefix`` names again:
    of each, the view's newest version at ``:at``, classified as the selection classifies it; rows of (name, mark)
    for those that still expire, in the order named. A batch is at most a few hundred items: one look-up each."""
    compiled = compile_test(test, scope, "item_key", "item_value")
    if compiled is None:
        return None
    newest = (f"(SELECT {{}} FROM nodes WHERE {_scopes(scope)} AND key = item_key AND rev <= :at "
              "ORDER BY scope DESC, rev DESC LIMIT 1)")
    version = newest.format(_version(scope))
    mark = "version" if compiled.flat else "s"
    statement = (
        f"SELECT name, {mark} FROM (SELECT name, item_key, item_value, version, {compiled.stamp} AS s FROM ("
        f"SELECT name, item_key, {newest.format('value')} AS item_value, {version} AS version FROM ("
        "SELECT b.value AS name, :prefix || b.value AS item_key, b.key AS position FROM json_each(:names) AS b "
        f"LIMIT -1) ORDER BY position LIMIT -1) LIMIT -1) WHERE {compiled.classify('s')} = 'x'")
    return statement, compiled.params


def _why_unopenable(path: str) -> str:
    """What SQLite's "unable to open database file" leaves out: the directory missing or not writable."""
    if path in ("", ":memory:") or path.startswith("file:"):
        return ""
    target = Path(path)
    if target.is_dir():
        return " (it is a directory)"
    if not target.parent.is_dir():
        return f" (its directory {target.parent} does not exist)"
    if not os.access(target.parent, os.W_OK) or (target.exists() and not os.access(target, os.W_OK)):
        return f" (no permission to write {target if target.exists() else target.parent})"
    return ""


class SqliteBackend(_Reads):
    """A :class:`~retain.logd.storage.Backend` on one SQLite file (``":memory:"`` for a throwaway)."""

    @_translated
    def __init__(self, path: str | Path, *, synchronous: str = "full", check_at_open: bool = True,
                 retain_indexes: bool = True) -> None:
        if synchronous not in SYNCHRONOUS:
            raise StorageError(f"storage.synchronous must be one of {', '.join(SYNCHRONOUS)} (got {synchronous!r})")
        self.path = str(path)
        try:
            # One writer thread uses this connection at a time; the server guarantees it.
            # retain_indexes off: no heads index kept, and those kept before dropped (below)
            super().__init__(sqlite3.connect(self.path, isolation_level=None, check_same_thread=False),
                             retain_indexes=retain_indexes)
            if check_at_open:
                self._refuse_damage()
            self._db.execute("PRAGMA journal_mode = WAL")
        except sqlite3.Error as exc:
            raise StorageError(f"sqlite: cannot open the store {self.path}: {exc}{_why_unopenable(self.path)}") \
                from exc
        self._db.execute(f"PRAGMA synchronous = {synchronous}")
        self._db.execute("PRAGMA secure_delete = ON")
        self._db.execute("PRAGMA busy_timeout = 10000")
        self._db.executescript(_SCHEMA)
        _migrate(self._db, self.path)
        if not retain_indexes:
            sqlite_heads.drop_all(self._db)
        self._statements: dict[tuple[str, int], tuple[str, dict[str, Any]]] = {}
        self._grouped = False  # inside group(): each transaction() is part of the group's
        self._lost: BaseException | None = None  # what failed after changing rows inside the group
        # A database only this connection sees (":memory:", "") cannot be read from another.
        self.reads_apart = self.path not in ("", ":memory:") and "mode=memory" not in self.path
        self._checkpoints: _Checkpointer | None = None
        self._kept = threading.local()  # a reader thread's kept connection (reading(keep=True))
        self._kept_all: list[sqlite3.Connection] = []
        self._kept_lock = threading.Lock()
        if self.reads_apart:
            self._db.execute("PRAGMA wal_autocheckpoint = 0")
            self._checkpoints = _Checkpointer(self.path, synchronous)

    shared = False  # one process owns the file: what the store caches changes only through it
    local = True

    def generation(self) -> int:
        return 0

    def check(self, full: bool = False) -> list[str]:
        """``PRAGMA quick_check`` (``integrity_check`` when ``full``): the problems SQLite reports, or []."""
        return _problems(self._db, full)

    def _refuse_damage(self) -> None:
        """Refuse a damaged file before anything reads or writes it (a damaged store once answered gets with
        records missing, and took patches, in silence)."""
        problems = self.check()
        if problems:
            self._db.close()
            shown = "; ".join(problems[:5]) + (f"; and {len(problems) - 5} more" if len(problems) > 5 else "")
            raise StoreDamaged(f"the store {self.path} is damaged (PRAGMA quick_check: {shown}); refusing to "
                               f"serve it: restore it from a backup (`retain logd check --db {self.path}` runs "
                               f"the full check)")

    @contextmanager
    def group(self) -> Iterator[None]:
        """One ``BEGIN IMMEDIATE`` ... ``COMMIT`` around several transactions, so that the group's commit syncs the
        file once for all. A transaction inside that fails before it changed a row (a failed precondition, a
        schema violation: the store checks before it writes) leaves the others as they are; one that fails after
        (or makes SQLite roll everything back: a full disk) loses the group: the transactions after it are
        refused at once and the group raises :class:`~retain.errors.StorageError`, nothing of it stored, for
        the caller to run them one by one (:meth:`~retain.logd.store.Store.together`). No savepoint per
        transaction: two more statements each, and each statement hands the GIL over."""
        self._begin()
        self._grouped, self._lost = True, None
        try:
            yield
        except BaseException:
            self._grouped = False
            self._rollback()
            raise
        self._grouped = False
        if self._lost is not None:
            self._rollback()
            raise self._lost_error()
        self._commit()

    @contextmanager
    def transaction(self, ahead: ReadAhead | None = None) -> Iterator[None]:
        # ``ahead``: a read in this process costs no round trip; the store sends none (``local``).
        if self._grouped:
            with self._in_group():
                yield
            return
        self._begin()
        try:
            yield
        except BaseException:
            self._rollback()
            raise
        self._commit()

    def _begin(self) -> None:
        try:
            self._db.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise StorageError(f"sqlite: {exc}") from exc

    def _rollback(self) -> None:
        if self._db.in_transaction:  # a full disk or an I/O error has SQLite roll it back itself
            self._db.execute("ROLLBACK")

    def _commit(self) -> None:
        """COMMIT (rolled back and a StorageError if it fails), then wake the checkpointer."""
        try:
            self._db.execute("COMMIT")
        except sqlite3.Error as exc:
            self._rollback()
            raise StorageError(f"sqlite: {exc}") from exc
        if self._checkpoints is not None:
            self._checkpoints.wake()

    @contextmanager
    def _in_group(self) -> Iterator[None]:
        """A transaction inside a :meth:`group`: one that fails after changing rows loses the group."""
        if self._lost is not None:
            raise self._lost_error()
        changes = self._db.total_changes
        try:
            yield
        except BaseException as exc:
            if self._db.total_changes != changes or not self._db.in_transaction:
                self._lost = exc  # its rows cannot be taken back alone
            raise

    def _lost_error(self) -> StorageError:
        return StorageError(f"sqlite: the transaction this write shared with others failed in one of them "
                            f"({self._lost}); nothing of it was stored")

    @contextmanager
    def reading(self, *, keep: bool = False) -> Iterator[_Reads]:
        if not self.reads_apart:
            yield self  # the writer's own connection: the caller reads on the writer
            return
        kept: sqlite3.Connection | None = getattr(self._kept, "db", None) if keep else None
        try:
            db = kept if kept is not None else self._reader()
            db.execute("BEGIN")
            head = _head(db)  # the snapshot starts at the first read: the head it reads is its own for good
        except sqlite3.Error as exc:
            raise StorageError(f"sqlite: {exc}") from exc
        if keep and kept is None:
            self._kept.db = db
            with self._kept_lock:
                self._kept_all.append(db)
        try:
            yield _Reads(db, self.path, head, self._retain_indexes)
        finally:
            if keep:
                with contextlib.suppress(sqlite3.Error):
                    db.execute("COMMIT")  # ends the read transaction; the connection stays for the next read
            else:
                db.close()  # ends the read transaction

    def _reader(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        db.execute("PRAGMA query_only = ON")
        db.execute("PRAGMA busy_timeout = 10000")
        return db

    @_translated
    def write(self, record: CommitRecord, rows: Iterable[Row], meta: dict[str, str] | None = None) -> None:
        scope, number = record.scope, record.number
        self._db.executemany("INSERT INTO nodes (scope, key, rev, kind, value, crc) VALUES (?, ?, ?, ?, ?, ?)",
                             ((scope, row.key, number, row.kind, row.value, checksum(row.value)) for row in rows))
        delta = record.delta
        if delta is None:
            delta = json.dumps(list(record.ops or ()), separators=(",", ":"))
        self._db.execute("INSERT INTO commits (number, time, author, scope, ops, ops_crc) VALUES (?, ?, ?, ?, ?, ?)",
                         (record.number, record.time, record.author, record.scope, delta, checksum(delta)))
        for name, value in (meta or {}).items():
            self._db.execute("INSERT OR REPLACE INTO meta (name, value) VALUES (?, ?)", (name, value))

    @_translated
    def absent(self, scope: int, keys: Sequence[str], at: int) -> bool:
        if not keys:
            return True
        # New keys often come after every key there is (a producer's next ids): then one range says it.
        first, last = min(keys), max(keys)
        if self._db.execute(f"SELECT 1 FROM nodes WHERE {_scopes(scope)} AND key >= ? AND key < ? AND rev <= ? LIMIT 1",
                            (first, last + _AFTER_SEP, at)).fetchone() is None:
            return True
        found = self._db.execute(
            f"SELECT 1 FROM json_each(:keys) AS b CROSS JOIN nodes AS n WHERE {_scopes(scope, 'n.')} "
            "AND n.key >= b.value AND n.key < b.value || char(32) AND n.rev <= :at LIMIT 1",
            {"keys": json.dumps(list(keys)), "at": at}).fetchone()
        return found is None

    def latest_absent(self, scope: int, parents: Sequence[str], keys: Sequence[str],
                      at: int) -> tuple[list[Row | None], bool]:
        # In-process reads cost no round trip: the two reads as they are.
        return [self.latest(scope, parent, at) for parent in parents], self.absent(scope, keys, at)

    @_translated
    def delete_items(self, scope: int, container: str, items: Sequence[tuple[str, str]], test: ItemTest,
                     at: int, rev: int, *, since: int | None = None, beneath: bool = True) -> int:
        prefix = container + SEP
        # The names as a JSON list, joined: a name is a key, which needs no escaping (json.dumps of a batch cost
        # about a tenth of its statement).
        params = {"names": '["' + '","'.join(name for name, _ in items) + '"]', "prefix": prefix, "at": at,
                  "rev": rev, "scope": scope}
        # Nothing committed since the marks were read (the pass's own deletes of other items aside: the caller says
        # so by ``since``), or nothing in the items' span moved since: every guard holds as it held then.
        if since is not None and items and (since == at or self._unchanged(
                scope, prefix + items[0][0], prefix + items[-1][0], since, len(items))):
            held: int = self._db.execute("INSERT INTO nodes (scope, key, rev, kind, value) SELECT :scope, "
                                         ":prefix || b.value, :rev, 0, NULL FROM json_each(:names) AS b",
                                         params).rowcount
        else:
            guarded, test_params = self._guarded(test, scope)
            held = self._db.execute(guarded, {**test_params, **params, "batch": json.dumps(dict(items))}).rowcount
            beneath = True  # another client wrote in the span: what lies beneath the items is not what was read
        if held == len(items) and beneath:
            # Every record beneath a deleted item goes with it (the view's newest version of each, unless gone).
            self._db.execute(
                "INSERT INTO nodes (scope, key, rev, kind, value) SELECT :scope, key, :rev, 0, NULL FROM ("
                f"SELECT n.key AS key, n.kind AS kind, {_newest(scope, 'n.')} FROM json_each(:names) AS b "
                f"CROSS JOIN nodes AS n WHERE {_scopes(scope, 'n.')} AND n.key > :prefix || b.value || char(31) "
                "AND n.key < :prefix || b.value || char(32) AND n.rev <= :at GROUP BY n.key) WHERE kind <> 0",
                params)
        return held

    @_translated
    def keep_heads(self, container: str, test: ItemTest) -> bool:
        return self._retain_indexes and sqlite_heads.build_step(self._db, container, test)

    def _unchanged(self, scope: int, first: str, last: str, since: int, items: int) -> bool:
        """Whether no record from the item ``first`` to the item ``last``, the records beneath it included, has a
        version newer than ``since`` in the view of ``scope``: one range of the index, read only while it holds at
        most :data:`_SPAN_ROWS` rows per item (past that, looking up each item costs less than the range)."""
        cap = _SPAN_ROWS * items + _SPAN_ROWS
        rows, newest = self._db.execute(
            f"SELECT count(*), max(rev) FROM (SELECT rev FROM nodes WHERE {_scopes(scope)} AND key >= :first "
            "AND key < :end LIMIT :cap)", {"first": first, "end": last + _AFTER_LAST, "cap": cap}).fetchone()
        return bool(rows < cap and (newest is None or newest <= since))

    def _guarded(self, test: ItemTest, scope: int) -> tuple[str, dict[str, Any]]:
        """The statement that writes a batch's item tombstones where each one's guard holds (made once per test)."""
        cache_key = (repr(test), scope)
        if cache_key in self._statements:
            return self._statements[cache_key]
        newest = (f"(SELECT {{}} FROM nodes WHERE {_scopes(scope)} AND key = item_key AND rev <= :at "
                  "ORDER BY scope DESC, rev DESC LIMIT 1)")  # of the item, in the view: the scope's, else the baseline's
        batch = "SELECT :prefix || b.key AS item_key, b.value AS mark FROM json_each(:batch) AS b LIMIT -1"
        now = compile_test(test, scope, "item_key", newest.format("value"))
        if now is None:
            raise StorageError(f"delete_items: this backend cannot say {test} in SQL; select_items answered None")
        if now.flat:
            # The mark is the version read: that version, still the newest, holds what it held. Any other (a
            # writer came in between) is asked the guard itself, against the stamp of the version read.
            then = compile_test(test, scope, "item_key", "(SELECT value FROM nodes WHERE scope = CASE WHEN mark >= "
                                f"{_SCOPED} THEN {int(scope)} ELSE 0 END AND key = item_key AND rev = mark % {_SCOPED})",
                                prefix="r")
            assert then is not None
            params = now.params | then.params
            version = newest.format(_version(scope))
            candidates = f"SELECT item_key, CAST(mark AS INTEGER) AS mark, {version} AS version FROM ({batch})"
            guard = f"(version = mark OR {now.guard(then.stamp)})"
        else:
            compiled = compile_test(test, scope, "item_key", "item_value")
            assert compiled is not None
            params = compiled.params
            candidates = f"SELECT item_key, mark, {newest.format('value')} AS item_value FROM ({batch})"
            guard = compiled.guard("mark")
        # The guard restated per item in the statement that writes the items' tombstones: its row count is
        # how many held.
        statement = ("INSERT INTO nodes (scope, key, rev, kind, value) SELECT :scope, item_key, :rev, 0, NULL FROM "
                     f"({candidates} LIMIT -1) WHERE {guard}")
        if len(self._statements) >= _STATEMENTS:
            self._statements.clear()
        self._statements[cache_key] = (statement, params)
        return statement, params

    @_translated_iter
    def commits(self, first: int, scopes: Sequence[int]) -> Iterator[CommitRecord]:
        marks = ",".join("?" * len(scopes))
        for number, at, author, scope, data, ops_crc in self._db.execute(
                f"SELECT number, time, author, scope, CAST(ops AS BLOB), ops_crc FROM commits WHERE number >= ? "
                f"AND scope IN ({marks}) ORDER BY number", (first, *scopes)):
            ops = decoded_delta(number, data, ops_crc)
            yield CommitRecord(number, at, author, scope, None if ops is None else _delta(number, ops))

    @_translated
    def meta(self, name: str) -> str | None:
        row = self._db.execute("SELECT value FROM meta WHERE name = ?", (name,)).fetchone()
        return row[0] if row else None

    @_translated
    def scopes(self) -> list[ScopeRecord]:
        return [ScopeRecord(*row) for row in self._db.execute("SELECT id, name, created FROM scopes ORDER BY name")]

    @_translated
    def create_scope(self, name: str) -> ScopeRecord:
        with self.transaction():
            row = self._db.execute("SELECT id, name, created FROM scopes WHERE name = ?", (name,)).fetchone()
            if row is None:
                created = self._db.execute("SELECT coalesce(max(number), 0) FROM commits").fetchone()[0]
                # Ids are never reused: a dropped scope's commits stay in the log under its old id.
                next_id = self._db.execute("SELECT coalesce(max(scope), 0) + 1 FROM "
                                           "(SELECT id AS scope FROM scopes UNION ALL SELECT scope FROM commits)"
                                           ).fetchone()[0]
                self._db.execute("INSERT INTO scopes (id, name, created) VALUES (?, ?, ?)", (next_id, name, created))
                row = (next_id, name, created)
        return ScopeRecord(*row)

    @_translated
    def drop_scope(self, scope: int) -> None:
        with self.transaction():
            self._db.execute("DELETE FROM nodes WHERE scope = ?", (scope,))
            self._db.execute("DELETE FROM scopes WHERE id = ?", (scope,))

    @_translated
    def first_commit_since(self, time: float) -> int | None:
        number: int | None = self._db.execute("SELECT min(number) FROM commits WHERE time >= ?",
                                              (time,)).fetchone()[0]
        return number

    @_translated
    def last_per_bucket(self, below: int, since: float | None, every: float) -> list[int]:
        rows = self._db.execute("SELECT max(number) FROM commits WHERE number < ? AND time >= ? "
                                "GROUP BY CAST(time / ? AS INTEGER)",
                                (below, float("-inf") if since is None else since, every))
        return [row[0] for row in rows]

    @_translated
    def snapshots(self) -> list[int]:
        return [row[0] for row in self._db.execute("SELECT rev FROM snapshots ORDER BY rev")]

    @_translated
    def move_boundary(self, boundary: int, snapshots: Sequence[int]) -> None:
        with self.transaction():
            self._db.execute("DELETE FROM snapshots")
            self._db.executemany("INSERT INTO snapshots (rev) VALUES (?)", ((rev,) for rev in snapshots))
            self._db.execute("UPDATE commits SET ops = NULL, ops_crc = NULL WHERE number < ? AND ops IS NOT NULL", (boundary,))
            self._db.execute("INSERT OR REPLACE INTO meta (name, value) VALUES ('boundary', ?)", (str(boundary),))

    @_translated
    def prune(self, boundary: int, after: Record | None, records: int) -> tuple[int, Record | None]:
        with self.transaction():
            start = after if after is not None else (-1, "")
            params = {"scope": start[0], "key": start[1], "records": records, "boundary": boundary}
            upto = self._db.execute(_PRUNE_UPTO, params).fetchone()
            if upto is None:
                return 0, None
            params |= {"upto_scope": upto[0], "upto_key": upto[1]}
            removed = self._db.execute(_PRUNE_VERSIONS, params).rowcount
            removed += self._db.execute(_PRUNE_TOMBSTONES, params).rowcount
        return removed, (int(upto[0]), str(upto[1]))

    @_translated
    def reclaim(self) -> None:
        if self._checkpoints is None:
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            return
        with self._checkpoints.lock:  # no background checkpoint in the way of this whole one
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def close(self) -> None:
        if self._checkpoints is not None:
            self._checkpoints.close()
        with self._kept_lock:
            for db in self._kept_all:
                db.close()
            self._kept_all.clear()
        self._db.close()


def check_file(path: str, full: bool = True) -> list[str]:
    """The problems SQLite's integrity check finds in the store file ``path``, opened read-only (nothing is
    made or changed; safe beside a running server); [] when there are none."""
    try:
        db = sqlite3.connect(f"file:{Path(path).resolve()}?mode=ro", uri=True, isolation_level=None)
    except sqlite3.Error as exc:
        return [f"cannot open: {exc}"]
    try:
        db.execute("PRAGMA busy_timeout = 10000")
        return _problems(db, full)
    finally:
        db.close()


def _problems(db: sqlite3.Connection, full: bool) -> list[str]:
    try:
        rows = db.execute(f"PRAGMA {'integrity_check' if full else 'quick_check'}").fetchall()
    except sqlite3.DatabaseError as exc:  # too damaged to check at all ("file is not a database")
        return [str(exc)]
    problems = [str(row[0]) for row in rows]
    problems = [] if problems == ["ok"] else problems
    if full:
        try:
            problems += _mismatches(db)
        except sqlite3.DatabaseError as exc:  # pages too damaged to read every row
            problems.append(f"cannot read every row to check its checksum: {exc}")
        try:
            problems += list(sqlite_heads.mismatches(db, _SHOWN))
        except sqlite3.DatabaseError as exc:
            problems.append(f"cannot work the heads indexes out again to check them: {exc}")
    return problems


def _mismatches(db: sqlite3.Connection, shown: int = _SHOWN) -> list[str]:
    """Every record version and delta whose text does not match the checksum stored with it: the first ``shown``
    of each named, the rest counted. A store no logd of this version opened yet has no checksums to compare."""
    if "crc" not in _columns(db, "nodes"):
        return []
    _with_checksum(db)
    found: list[str] = []
    values = db.execute("SELECT key, rev, crc, logd_crc(CAST(value AS BLOB)) FROM nodes "
                        "WHERE crc IS NOT logd_crc(CAST(value AS BLOB))")
    found += _named((str(value_damaged(key, rev, crc, computed)) for key, rev, crc, computed in values),
                    shown, "values")
    deltas = db.execute("SELECT number, ops_crc, logd_crc(CAST(ops AS BLOB)) FROM commits "
                        "WHERE ops_crc IS NOT logd_crc(CAST(ops AS BLOB))")
    found += _named((str(delta_damaged(number, crc, computed)) for number, crc, computed in deltas),
                    shown, "deltas")
    return found


def _named(problems: Iterator[str], shown: int, what: str) -> list[str]:
    """The first ``shown`` of ``problems``, then how many more there are."""
    named = list(itertools.islice(problems, shown))
    more = sum(1 for _ in problems)
    return named + ([f"and {more} more {what} that do not match their checksums"] if more else [])


def _columns(db: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in db.execute(f"PRAGMA table_info({table})")}


def _with_checksum(db: sqlite3.Connection) -> None:
    """Make :func:`~retain.logd.checksums.checksum_bytes` callable in SQL on ``db`` as ``logd_crc(CAST(text AS
    BLOB))``: SQLite has no CRC-32 of its own, and a migration or a check computes one per row."""
    db.create_function("logd_crc", 1, checksum_bytes, deterministic=True)


def _migrate(db: sqlite3.Connection, path: str) -> None:
    """Step a store an older retain made forward to :data:`SCHEMA_VERSION`, in one transaction; refuse a newer
    one. Version 1: each value and delta gets its checksum (``crc``, ``ops_crc``), computed from what is there."""
    version = db.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        db.close()
        raise StorageError(f"the store {path} has schema version {version}; this retain knows up to "
                           f"{SCHEMA_VERSION}: upgrade retain")
    if version == SCHEMA_VERSION:
        return
    _with_checksum(db)
    db.execute("BEGIN IMMEDIATE")
    try:
        if "crc" not in _columns(db, "nodes"):
            db.execute("ALTER TABLE nodes ADD COLUMN crc INTEGER")
        if "ops_crc" not in _columns(db, "commits"):
            db.execute("ALTER TABLE commits ADD COLUMN ops_crc INTEGER")
        db.execute("UPDATE nodes SET crc = logd_crc(CAST(value AS BLOB)) WHERE value IS NOT NULL")
        db.execute("UPDATE commits SET ops_crc = logd_crc(CAST(ops AS BLOB)) WHERE ops IS NOT NULL")
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def _delta(number: int, ops: str) -> tuple[Any, ...]:
    try:
        return tuple(json.loads(ops))
    except (ValueError, TypeError) as exc:
        raise StoreDamaged(f"the delta of commit {number} does not decode ({exc}): the store is damaged") from exc


class _Checkpointer:
    """Copies the WAL back into the database from a thread and a connection of its own (PASSIVE: as far as
    no reader's snapshot needs the old pages, never waiting, never blocking a writer). Woken after each
    commit; at most one checkpoint every ``_CHECKPOINT_PAUSE`` seconds."""

    def __init__(self, path: str, synchronous: str) -> None:
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._db.execute(f"PRAGMA synchronous = {synchronous}")  # what a checkpoint syncs, as the store says
        self.lock = threading.Lock()  # held during a checkpoint; reclaim() takes it for a whole one
        self._wakes = threading.Event()
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._run, name="logd-checkpoint", daemon=True)
        self._thread.start()

    def wake(self) -> None:
        self._wakes.set()

    def _run(self) -> None:
        while True:
            self._wakes.wait()
            if self._closing.is_set():
                return
            self._wakes.clear()
            with self.lock:
                try:
                    self._db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                except sqlite3.Error as exc:  # the next commit wakes it again; nothing is lost but time
                    log.warning("logd: a background WAL checkpoint failed: %s", exc)
            if self._closing.wait(_CHECKPOINT_PAUSE):
                return

    def close(self) -> None:
        self._closing.set()
        self._wakes.set()
        self._thread.join()
        self._db.close()
