"""The embedded backend: stdlib ``sqlite3`` in WAL mode, one file.

Tables: ``nodes(scope, key, rev, kind, value)`` (one row per record version,
primary key ``(scope, key, rev)``, WITHOUT ROWID so the versions of a subtree sit
together), ``commits``, ``scopes``, ``snapshots``, ``meta``. A read at commit C is
``max(rev) <= C`` per key over one key range; listing a 1,000,000-item container
is one index range scan, at the current commit and at an older one alike.

Each commit is one ``BEGIN IMMEDIATE`` transaction: a process killed in the middle
leaves the previous commit whole and nothing of the new one. ``secure_delete`` is
on so that versions compaction removes do not linger in free pages.
``sqlite3.Error`` never escapes: it becomes :class:`~retain.errors.StorageError`.
"""

from __future__ import annotations

import functools
import json
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from retain.errors import StorageError
from retain.logd.storage import SEP, CommitRecord, Row, ScopeRecord

__all__ = ["SYNCHRONOUS", "SqliteBackend"]

SYNCHRONOUS = ("off", "normal", "full", "extra")
_T = TypeVar("_T")
_AFTER_SEP = chr(ord(SEP) + 1)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS nodes (
    scope INTEGER NOT NULL, key TEXT NOT NULL, rev INTEGER NOT NULL, kind INTEGER NOT NULL, value TEXT,
    PRIMARY KEY (scope, key, rev)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS commits (
    number INTEGER PRIMARY KEY, time REAL NOT NULL, author TEXT NOT NULL, scope INTEGER NOT NULL, ops TEXT);
CREATE INDEX IF NOT EXISTS commits_time ON commits (time);
CREATE TABLE IF NOT EXISTS scopes (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, created INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS snapshots (rev INTEGER PRIMARY KEY);
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
"""

# Versions no kept commit reads: the next version of the same key is at or below the boundary,
# and no kept snapshot falls in [rev, next). The window runs over rev <= boundary so that a
# version whose successor is exactly the boundary still sees it.
_PRUNE_VERSIONS = """
DELETE FROM nodes WHERE (scope, key, rev) IN (
    SELECT scope, key, version FROM (
        SELECT scope, key, rev AS version, LEAD(rev) OVER (PARTITION BY scope, key ORDER BY rev) AS successor
        FROM nodes WHERE rev <= :boundary)
    WHERE version < :boundary AND successor IS NOT NULL AND successor <= :boundary
      AND NOT EXISTS (SELECT 1 FROM snapshots s WHERE s.rev >= version AND s.rev < successor))
"""
# A baseline tombstone with nothing older under it says nothing an absent key does not.
_PRUNE_TOMBSTONES = """
DELETE FROM nodes WHERE scope = 0 AND kind = 0 AND rev < :boundary
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


class SqliteBackend:
    """A :class:`~retain.logd.storage.Backend` on one SQLite file (``":memory:"`` for a throwaway)."""

    @_translated
    def __init__(self, path: str | Path, *, synchronous: str = "full") -> None:
        if synchronous not in SYNCHRONOUS:
            raise StorageError(f"storage.synchronous must be one of {', '.join(SYNCHRONOUS)} (got {synchronous!r})")
        self.path = str(path)
        # One writer thread uses this connection at a time; the server guarantees it.
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode = WAL")
        self._db.execute(f"PRAGMA synchronous = {synchronous}")
        self._db.execute("PRAGMA secure_delete = ON")
        self._db.execute("PRAGMA busy_timeout = 10000")
        self._db.executescript(_SCHEMA)

    @contextmanager
    def transaction(self) -> Iterator[None]:
        try:
            self._db.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise StorageError(f"sqlite: {exc}") from exc
        try:
            yield
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        try:
            self._db.execute("COMMIT")
        except sqlite3.Error as exc:
            self._db.execute("ROLLBACK")
            raise StorageError(f"sqlite: {exc}") from exc

    @_translated
    def head(self) -> tuple[int, float]:
        row = self._db.execute("SELECT number, time FROM commits ORDER BY number DESC LIMIT 1").fetchone()
        return (row[0], row[1]) if row else (0, 0.0)

    @_translated
    def latest(self, scope: int, key: str, at: int) -> Row | None:
        row = self._db.execute("SELECT kind, value FROM nodes WHERE scope = ? AND key = ? AND rev <= ? "
                               "ORDER BY rev DESC LIMIT 1", (scope, key, at)).fetchone()
        return Row(key, row[0], row[1]) if row else None

    @_translated_iter
    def scan(self, scope: int, key: str, at: int, *, children: bool = False, end: str | None = None) -> Iterator[Row]:
        # SQLite's bare-column rule: with max(rev), kind and value come from the newest version.
        if end is not None:
            sql = ("SELECT key, kind, value, max(rev) FROM nodes WHERE scope = ? AND key >= ? AND key < ? "
                   "AND rev <= ? GROUP BY key ORDER BY key")
            params: tuple[Any, ...] = (scope, key, end, at)
        elif children:
            sql = ("SELECT key, kind, value, max(rev) FROM nodes WHERE scope = ? AND key >= ? AND key < ? "
                   "AND rev <= ? AND instr(substr(key, ?), char(31)) = 0 GROUP BY key ORDER BY key")
            params = (scope, key + SEP, key + _AFTER_SEP, at, len(key) + 2)
        else:
            sql = ("SELECT key, kind, value, max(rev) FROM nodes WHERE scope = ? AND key >= ? AND key < ? "
                   "AND rev <= ? GROUP BY key ORDER BY key")
            params = (scope, key, key + _AFTER_SEP, at)
        for found, kind, value, _ in self._db.execute(sql, params):
            yield Row(found, kind, value)

    @_translated
    def write(self, record: CommitRecord, rows: Iterable[Row], meta: dict[str, str] | None = None) -> None:
        self._db.executemany("INSERT INTO nodes (scope, key, rev, kind, value) VALUES (?, ?, ?, ?, ?)",
                             ((record.scope, row.key, record.number, row.kind, row.value) for row in rows))
        self._db.execute("INSERT INTO commits (number, time, author, scope, ops) VALUES (?, ?, ?, ?, ?)",
                         (record.number, record.time, record.author, record.scope,
                          json.dumps(list(record.ops or ()), separators=(",", ":"))))
        for name, value in (meta or {}).items():
            self._db.execute("INSERT OR REPLACE INTO meta (name, value) VALUES (?, ?)", (name, value))

    @_translated_iter
    def commits(self, first: int, scopes: Sequence[int]) -> Iterator[CommitRecord]:
        marks = ",".join("?" * len(scopes))
        for number, time, author, scope, ops in self._db.execute(
                f"SELECT number, time, author, scope, ops FROM commits WHERE number >= ? AND scope IN ({marks}) "
                "ORDER BY number", (first, *scopes)):
            yield CommitRecord(number, time, author, scope, None if ops is None else tuple(json.loads(ops)))

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
    def prune(self, boundary: int, snapshots: Sequence[int]) -> int:
        with self.transaction():
            self._db.execute("DELETE FROM snapshots")
            self._db.executemany("INSERT INTO snapshots (rev) VALUES (?)", ((rev,) for rev in snapshots))
            removed = self._db.execute(_PRUNE_VERSIONS, {"boundary": boundary}).rowcount
            removed += self._db.execute(_PRUNE_TOMBSTONES, {"boundary": boundary}).rowcount
            self._db.execute("UPDATE commits SET ops = NULL WHERE number < ? AND ops IS NOT NULL", (boundary,))
            self._db.execute("INSERT OR REPLACE INTO meta (name, value) VALUES ('boundary', ?)", (str(boundary),))
        return removed

    @_translated
    def reclaim(self) -> None:
        self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def close(self) -> None:
        self._db.close()
