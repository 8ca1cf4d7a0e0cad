"""Backups of a SQLite store taken while it serves, and restores of them.

:func:`backup` copies a store file with SQLite's online backup API, a few pages at a step, all of them read inside
one read transaction of its own: in WAL mode a reader never blocks a writer, so the server goes on committing the
whole time, and the copy is the store as of one commit -- the head when the read began -- however many commits
land while it is taken. It is written beside the destination and renamed over it once whole, so a destination
never holds half a copy.

:func:`restore` puts a copy in place of a store -- or where there is none yet -- in one transaction of SQLite's: the
target holds either what it held or the whole copy. It refuses to replace a store unless asked (``force``), and
always refuses a store that is open elsewhere (a logd serving it): a server would go on with the commits it
remembers while the file holds others.

Example:
    >>> backup("logd.sqlite3", "/backups/logd-0912.sqlite3").commit
    4127
    >>> restore("/backups/logd-0912.sqlite3", "logd.sqlite3", force=True).commit
    4127

A PostgreSQL store is backed up with ``pg_dump`` and restored with ``pg_restore`` (docs/operating.md, "Backup and
restore"); both functions refuse a ``postgresql://`` URL, saying so. Everything is checked before anything is read
or written (:class:`~retain.errors.InvalidBackup`); SQLite's failures are
:class:`~retain.errors.StorageError`.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from retain.errors import InvalidBackup, StorageError, StoreDamaged
from retain.logd.postgres import is_postgres_url, redacted
from retain.logd.sqlite import check_file

__all__ = ["STEP_PAGES", "Backup", "Restore", "backup", "restore"]

#: pages one backup step copies: 4 MiB at logd's page size, some milliseconds of work between two looks at the
#: clock (and at ``pause``)
STEP_PAGES = 1024
_PROCEDURE = "docs/operating.md, \"Backup and restore\""

#: ``progress(remaining, total)``: pages left to copy, and in all, after each step
Progress = Callable[[int, int], None]


@dataclass(frozen=True, slots=True)
class Backup:
    """A copy taken: where it is, the commit it holds (the source's head when the copy began), its size."""

    path: str
    commit: int
    pages: int
    bytes: int
    seconds: float


@dataclass(frozen=True, slots=True)
class Restore:
    """A copy put in place: the store it is now, the commit at its head, whether it replaced a store."""

    path: str
    commit: int
    replaced: bool


def backup(source: str, dest: str | os.PathLike[str], *, force: bool = False, step_pages: int = STEP_PAGES,
           pause: float = 0.0, progress: Progress | None = None) -> Backup:
    """Copy the SQLite store ``source`` (a path, or ``sqlite:PATH``) to ``dest`` as of one commit, while it serves.

    ``step_pages`` pages are copied per step, and ``pause`` seconds slept between steps (a disk shared with the
    server gets room); ``progress(remaining, total)`` is called after each step. ``force`` replaces a file at
    ``dest``.

    Example:
        >>> backup("logd.sqlite3", "logd-backup.sqlite3").commit
        4127

    Raises:
        InvalidBackup: ``source`` is a PostgreSQL URL or no file, ``dest`` exists (without ``force``), is the
            source, or its folder is missing; a step of no pages. Nothing was read or written.
        StorageError: SQLite failed, or ``source`` is no logd store.
    """
    origin = _store_file(source, "the store to back up")
    if not origin.is_file():
        raise InvalidBackup(f"no store to back up at {origin} (expected a logd SQLite file)")
    target = _destination(dest, origin, force, "the backup")
    if any(Path(f"{target}{suffix}").exists() for suffix in ("-wal", "-shm")):
        raise InvalidBackup(f"the backup {target} has a -wal or -shm file beside it: it is a store in use (or not "
                            "closed cleanly), not a backup; choose another path")
    if type(step_pages) is not int or step_pages < 1:
        raise InvalidBackup(f"a backup step copies at least 1 page (got {step_pages!r})")
    started = time.monotonic()
    partial = target.with_name(f".{target.name}.partial-{os.getpid()}")
    try:
        with _connection(origin, "the store to back up") as db, _connection(partial, "the copy") as copy:
            db.execute("PRAGMA query_only = ON")
            db.execute("BEGIN")
            commit = _head(db, origin)  # the read transaction's first read: the commit every step copies
            db.backup(copy, pages=step_pages, progress=_stepped(progress, pause))
            db.execute("COMMIT")
            pages = int(copy.execute("PRAGMA page_count").fetchone()[0])
        _durable(partial)
        os.replace(partial, target)
        _durable(target.parent)
    finally:
        partial.unlink(missing_ok=True)
    return Backup(str(target), commit, pages, target.stat().st_size, time.monotonic() - started)


def restore(source: str | os.PathLike[str], target: str, *, force: bool = False) -> Restore:
    """Put the backup ``source`` in place as the SQLite store ``target`` (a path, or ``sqlite:PATH``).

    The backup is checked first (SQLite's quick check, and logd's tables). ``target`` may be a store already there
    only with ``force``, and never one open elsewhere. In one transaction of the target's: it holds either what it
    held or the whole backup.

    Example:
        >>> restore("logd-backup.sqlite3", "logd.sqlite3", force=True)
        Restore(path='logd.sqlite3', commit=4127, replaced=True)

    Raises:
        InvalidBackup: ``target`` is a PostgreSQL URL, or is there without ``force``; ``source`` is no file, or is
            the target. Nothing was read or written.
        StoreDamaged: ``source`` fails SQLite's quick check.
        StorageError: the target is in use (a logd serving it: stop it first), SQLite failed, or ``source`` is
            no logd store.
    """
    into = _store_file(target, "the store to restore into")
    backup_file = Path(source)
    if not backup_file.is_file():
        raise InvalidBackup(f"no backup to restore at {backup_file} (expected a file `retain logd backup` wrote)")
    there = into.exists()
    _destination(into, backup_file, force, "the store to restore into")
    problems = check_file(str(backup_file), full=False)
    if problems:
        raise StoreDamaged(f"the backup {backup_file} is damaged ({'; '.join(problems[:5])}): restore another")
    try:
        with _connection(backup_file, "the backup") as db, _connection(into, "the store") as store:
            db.execute("BEGIN")
            commit = _head(db, backup_file)
            _hold(store, into)
            db.backup(store)  # every page in one step: one write transaction of the target's
            store.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            db.execute("COMMIT")
    except BaseException:
        if not there:  # a store this call made: nothing of it is left
            for suffix in ("", "-wal", "-shm", "-journal"):
                Path(f"{into}{suffix}").unlink(missing_ok=True)
        raise
    return Restore(str(into), commit, there)


def _store_file(target: str | os.PathLike[str], what: str) -> Path:
    """The file a SQLite store target names; a PostgreSQL URL is refused, naming the tools that back one up."""
    text = os.fspath(target)
    if is_postgres_url(text):
        raise InvalidBackup(f"{what} is a PostgreSQL database ({redacted(text)}): back it up with pg_dump and put it "
                            f"back with pg_restore ({_PROCEDURE}); this copies a SQLite store file")
    path = text.removeprefix("sqlite:")
    if path in ("", ":memory:") or path.startswith("file:"):
        raise InvalidBackup(f"{what} must be a SQLite file path (got {text!r})")
    return Path(path)


def _destination(dest: str | os.PathLike[str], source: Path, force: bool, what: str) -> Path:
    """``dest`` as a path to write, once checked: not the source, its folder there, no file there unless forced."""
    target = Path(dest)
    if target.exists() and source.exists() and target.resolve() == source.resolve():
        raise InvalidBackup(f"{what} {target} is its own source (expected another file)")
    if target.is_dir():
        raise InvalidBackup(f"{what} {target} is a directory (expected a file path)")
    if not target.parent.is_dir():
        raise InvalidBackup(f"{what} {target}: its directory {target.parent} does not exist")
    if target.exists() and not force:
        raise InvalidBackup(f"{what} {target} exists: pass --force (force=True) to replace it")
    return target


@contextlib.contextmanager
def _connection(path: Path, what: str) -> Iterator[sqlite3.Connection]:
    """A connection of its own in autocommit, SQLite's errors as the store's, closed at the end."""
    try:
        db = sqlite3.connect(path, isolation_level=None)
    except sqlite3.Error as exc:
        raise StorageError(f"sqlite: cannot open {what} {path}: {exc}") from exc
    try:
        db.execute("PRAGMA busy_timeout = 10000")
        yield db
    except sqlite3.Error as exc:
        raise StorageError(f"sqlite: {what} {path}: {exc}") from exc
    finally:
        db.close()


def _head(db: sqlite3.Connection, path: Path) -> int:
    """The newest commit of the logd store on ``db`` (inside a read transaction, the read that starts it)."""
    try:
        return int(db.execute("SELECT coalesce(max(number), 0) FROM commits").fetchone()[0])
    except sqlite3.OperationalError as exc:
        raise StorageError(f"{path} is no logd store ({exc})") from exc


def _hold(db: sqlite3.Connection, path: Path) -> None:
    """Take the store file for this connection alone until it closes, or refuse: every connection that has a
    WAL-mode store open holds a shared lock on it, so an exclusive one is had only when no other is open."""
    db.execute("PRAGMA locking_mode = EXCLUSIVE")
    db.execute("PRAGMA busy_timeout = 0")
    try:
        db.execute("BEGIN EXCLUSIVE")
        db.execute("SELECT count(*) FROM sqlite_master").fetchone()
        db.execute("COMMIT")
    except sqlite3.OperationalError as exc:
        raise StorageError(f"the store {path} is in use ({exc}): stop the logd serving it, then restore") from exc


def _stepped(progress: Progress | None, pause: float) -> Callable[[int, int, int], None]:
    def step(status: int, remaining: int, total: int) -> None:
        if progress is not None:
            progress(remaining, total)
        if pause > 0 and remaining:
            time.sleep(pause)  # room for the disk the server writes to
    return step


def _durable(path: Path) -> None:
    """fsync a file or a directory: the copy's bytes, then its name, survive a power cut."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
