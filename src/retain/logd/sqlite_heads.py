"""The heads a SQLite store keeps for a retain test it has seen: per record, its stamp's instant and its match.

A pass's selection in :mod:`retain.logd.sqlite_items` reads every version of every record of the container and
works out, for each, the rule's stamp and match: the JSON decode, the exact RFC 3339 test and the newest version of
each record cost some 20,000 instructions a record on SQLite 3.40, four times a raw ``DELETE`` (docs/logd-retain.md,
"Performance"). What a rule asks of a record does not change until the record does, so the store keeps the answer
for each (container, test) a pass has run -- a *heads index*: in ``retain_heads``, one row per record of the
container's subtree in the baseline, with its newest version's rev, the stamp's instant in microseconds (NULL:
unreadable), whether the match holds and whether the record lies beneath an item. The stamp itself stays in the
record, as the seed requires; the index is what SQLite worked out from it.

- **Kept by SQLite**: two triggers on ``nodes`` per index update its rows as each version is inserted -- by this
  process or any other, by any retain that opens the file -- so a row never lags its record: a pass's snapshot
  reads the index and the versions at one commit. Compaction removes only versions that are not a record's newest
  (or a tombstone with nothing under it), which no row names.
- **Built once**, the first time a pass runs the test over the container (:func:`build_step`): the triggers first,
  then the records in chunks of :data:`CHUNK`, each one short write transaction, so no writer waits for the whole
  container. Until the last chunk is in, passes select from the versions as before.
- **Used where it says everything**: a test a version of the item's own record decides (``flat``: one name of age,
  a match of scalars), in the baseline's view, at the head. A scope's view, an older commit or a test that reads
  records beneath the item selects from the versions.
- **Paid by writes**: every version written into an indexed container pays the test once (a few microseconds);
  :data:`MOST` indexes per store at most; ``storage.retainIndexes`` off keeps none (:func:`drop_all`). ``retain logd
  check`` works every built index out again from the versions and names each record whose row differs
  (:func:`mismatches`).
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from retain.logd.sqlite_items import compile_test, cutoff_params
from retain.logd.storage import SEP, ItemTest

__all__ = ["CHUNK", "MOST", "SCHEMA", "Heads", "build_step", "drop_all", "find", "indexable", "mismatches", "ranges",
           "selecting"]

CHUNK = 5_000  # records one build step indexes: some 50 ms on the writer, which other clients' writes come between
MOST = 16  # heads indexes a store keeps at most: every write into an indexed container pays its test

_AFTER_SEP = chr(ord(SEP) + 1)
_TRIGGERS = ("retain_heads_{ix}_gone", "retain_heads_{ix}_put")  # an index's two triggers, by its id
_PARAMETER = re.compile(r":(h\d+)\b")  # a parameter of the test's SQL, written in as a literal

SCHEMA = """
CREATE TABLE IF NOT EXISTS retain_indexes (
    id INTEGER PRIMARY KEY, container TEXT NOT NULL, test TEXT NOT NULL, instant TEXT NOT NULL, matches TEXT NOT NULL,
    next TEXT, UNIQUE (container, test));
CREATE TABLE IF NOT EXISTS retain_heads (
    ix INTEGER NOT NULL, key TEXT NOT NULL, rev INTEGER NOT NULL, instant INTEGER, matched INTEGER NOT NULL,
    beneath INTEGER NOT NULL, PRIMARY KEY (ix, key)) WITHOUT ROWID;
"""
"""``retain_indexes``: one row per index -- the container's key, the test's ``repr``, its instant and match in SQL
over ``{key}`` and ``{value}`` (what the trigger, the build and the check all work out), and ``next``, the key the
build goes on after, NULL once built."""

_UPSERT = ("ON CONFLICT (ix, key) DO UPDATE SET rev = excluded.rev, instant = excluded.instant, "
           "matched = excluded.matched, beneath = excluded.beneath WHERE excluded.rev >= retain_heads.rev")


@dataclass(frozen=True, slots=True)
class Heads:
    """One index: its id; whether it is built (every record of the container in); whether its SQL is the one this
    retain writes for its test (False: another retain built it, whose test may read a stamp otherwise -- it is
    not used, and the next pass builds it anew)."""

    ix: int
    built: bool
    current: bool = True

    @property
    def usable(self) -> bool:
        return self.built and self.current


def indexable(test: ItemTest) -> bool:
    """Whether a heads index can say ``test``: one a version of the item's own record decides, in SQL."""
    return _statement(test) is not None


def find(db: sqlite3.Connection, container: str, test: ItemTest) -> Heads | None:
    """The index of ``test`` over the record ``container`` (its key), if the store keeps one."""
    row = db.execute("SELECT id, next, instant, matches FROM retain_indexes WHERE container = ? AND test = ?",
                     (container, repr(test))).fetchone()
    return None if row is None else Heads(row[0], row[1] is None, (row[2], row[3]) == _statement(test))


def selecting(heads: Heads, container: str, cutoff: datetime | None) -> tuple[str, dict[str, Any]]:
    """The selection statement over a built index's records of ``container`` from the key ``:start`` (included) to
    ``:stop`` -- a page of :func:`~retain.logd.sqlite_pages.index_pages` -- in the baseline's view at the head (the
    reader's snapshot): the row the versions' statement gives (records, unreadable items, expired names and marks
    joined, records beneath items), each mark a version as there."""
    statement = (
        "SELECT count(*), total(NOT beneath AND instant IS NULL), group_concat(CASE WHEN NOT beneath AND "
        "instant <= :cutoff_us AND matched THEN substr(key, :cut) || char(30) || rev END, char(30)), total(beneath) "
        "FROM retain_heads WHERE ix = :ix AND key >= :start AND key < :stop")
    return statement, {**cutoff_params(cutoff), "ix": heads.ix, "cut": len(container) + 2}


def ranges(db: sqlite3.Connection, heads: Heads, container: str, most: int, least: int) -> list[tuple[str, str]]:
    """The index's records of ``container`` cut into at most ``most`` key ranges ``(start, stop)`` -- the first key
    in, the last out -- of about as many records each, none under ``least``."""
    start, end = container + SEP, container + _AFTER_SEP  # below every record's key in it: a name is never empty
    if most < 2:
        return [(start, end)]
    bounds = {"ix": heads.ix, "start": start, "end": end}
    records = db.execute("SELECT count(*) FROM retain_heads WHERE ix = :ix AND key >= :start AND key < :end",
                         bounds).fetchone()[0]
    count = min(most, records // least)
    keys = [start]
    for number in range(1, count):
        keys.append(db.execute("SELECT key FROM retain_heads WHERE ix = :ix AND key >= :start AND key < :end "
                               "ORDER BY key LIMIT 1 OFFSET :offset",
                               {**bounds, "offset": records * number // count}).fetchone()[0])
    return list(zip(keys, [*keys[1:], end], strict=True))


def build_step(db: sqlite3.Connection, container: str, test: ItemTest) -> bool:
    """One step of building the index of ``test`` over ``container``, inside the caller's write transaction:
    the first registers it and creates its triggers, each next one indexes the next :data:`CHUNK` records.
    True while more remains; False once it is built, or when the store keeps none for it (a test it cannot
    say, or :data:`MOST` indexes already)."""
    heads = find(db, container, test)
    if heads is not None and not heads.current:
        _drop(db, heads.ix)
        heads = None
    if heads is None:
        statement = _statement(test)
        if statement is None or db.execute("SELECT count(*) FROM retain_indexes").fetchone()[0] >= MOST:
            return False
        ix = db.execute("INSERT INTO retain_indexes (container, test, instant, matches, next) VALUES (?, ?, ?, ?, ?)",
                        (container, repr(test), *statement, container + SEP)).lastrowid
        assert ix is not None
        for trigger in _triggers(ix, container, statement):
            db.execute(trigger)
        return True
    if heads.built:
        return False
    after, instant, matches = db.execute("SELECT next, instant, matches FROM retain_indexes WHERE id = ?",
                                         (heads.ix,)).fetchone()
    end = container + _AFTER_SEP
    last = db.execute("SELECT max(key) FROM (SELECT DISTINCT key FROM nodes WHERE scope = 0 AND key > ? AND key < ? "
                      "ORDER BY key LIMIT ?)", (after, end, CHUNK)).fetchone()[0]
    if last is not None:
        db.execute(f"INSERT INTO retain_heads (ix, key, rev, instant, matched, beneath) "
                   f"{_worked_out(heads.ix, container, (instant, matches), 'AND n.key <= :last')} {_UPSERT}",
                   {"after": after, "end": end, "last": last})
    db.execute("UPDATE retain_indexes SET next = ? WHERE id = ?", (last, heads.ix))
    return last is not None


def drop_all(db: sqlite3.Connection) -> None:
    """Drop every heads index the store keeps -- their triggers, rows and registry -- in one transaction
    (``storage.retainIndexes`` off: no write pays a rule's test any more)."""
    indexes = [ix for (ix,) in db.execute("SELECT id FROM retain_indexes")]
    if not indexes:
        return
    db.execute("BEGIN IMMEDIATE")
    try:
        for ix in indexes:
            _drop(db, ix)
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def _drop(db: sqlite3.Connection, ix: int) -> None:
    """Drop index ``ix`` -- its triggers, its rows, its registry row -- inside the caller's transaction."""
    for trigger in _TRIGGERS:
        db.execute(f"DROP TRIGGER IF EXISTS {trigger.format(ix=ix)}")
    db.execute("DELETE FROM retain_heads WHERE ix = ?", (ix,))
    db.execute("DELETE FROM retain_indexes WHERE id = ?", (ix,))



def mismatches(db: sqlite3.Connection, shown: int) -> Iterator[str]:
    """Every record whose row in a built index differs from what its versions say (a row missing, extra or
    wrong): each index worked out again from the versions and compared, the first ``shown`` of each named."""
    if db.execute("SELECT 1 FROM sqlite_master WHERE name = 'retain_indexes'").fetchone() is None:
        return
    indexes = db.execute("SELECT id, container, instant, matches FROM retain_indexes WHERE next IS NULL").fetchall()
    triggers = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")}
    for ix, container, instant, matches in indexes:
        missing = [name.format(ix=ix) for name in _TRIGGERS if name.format(ix=ix) not in triggers]
        if missing:
            yield (f"heads index {ix} of {_shown(container)}: its trigger {', '.join(missing)} is missing: writes "
                   "no longer keep it")
        expected = _worked_out(ix, container, (instant, matches))
        kept = "SELECT ix, key, rev, instant, matched, beneath FROM retain_heads WHERE ix = :ix"
        params = {"ix": ix, "after": container + SEP, "end": container + _AFTER_SEP}
        differ = db.execute(f"SELECT key FROM ({expected} EXCEPT {kept}) UNION SELECT key FROM ({kept} EXCEPT "
                            f"{expected}) ORDER BY key LIMIT {int(shown)}", params)
        for (key,) in differ:
            yield (f"heads index {ix} of {_shown(container)}: the row of {_shown(key)} differs from its record's "
                   "newest version")


def _shown(key: str) -> str:
    """A record's key as the path a person writes (``jobs.j1``)."""
    return repr(key.replace(SEP, ".").lstrip("."))


def _worked_out(ix: int, container: str, statement: tuple[str, str], narrower: str = "") -> str:
    """The index's rows for the baseline's records past ``:after`` and before ``:end`` (and ``narrower``), as its
    trigger writes them."""
    return (f"SELECT {ix}, key, rev, {_columns(container, 'key', 'value', statement)} FROM ("
            "SELECT n.key AS key, max(n.rev) AS rev, n.kind AS kind, n.value AS value FROM nodes AS n "
            f"WHERE n.scope = 0 AND n.key > :after AND n.key < :end {narrower} GROUP BY n.key) WHERE kind <> 0")


def _triggers(ix: int, container: str, statement: tuple[str, str]) -> list[str]:
    """The triggers that keep index ``ix`` as each baseline version of a record in ``container`` is inserted: a
    tombstone takes the record's row away, any other version puts its own (a version older than the row's,
    which no writer inserts, changes nothing). Two, so that a tombstone -- a retain pass writes hundreds of
    thousands -- runs one statement."""
    when = (f"NEW.scope = 0 AND NEW.key > {_literal(container + SEP)} AND NEW.key < {_literal(container + _AFTER_SEP)}")
    gone, put = (name.format(ix=ix) for name in _TRIGGERS)
    return [f"CREATE TRIGGER {gone} AFTER INSERT ON nodes WHEN NEW.kind = 0 AND {when} BEGIN "
            f"DELETE FROM retain_heads WHERE ix = {ix} AND key = NEW.key; END",
            f"CREATE TRIGGER {put} AFTER INSERT ON nodes WHEN NEW.kind <> 0 AND {when} BEGIN "
            f"INSERT INTO retain_heads (ix, key, rev, instant, matched, beneath) SELECT {ix}, NEW.key, NEW.rev, "
            f"{_columns(container, 'NEW.key', 'NEW.value', statement)} WHERE true {_UPSERT}; END"]


def _columns(container: str, key: str, value: str, statement: tuple[str, str]) -> str:
    """``instant, matched, beneath`` of a record version (``key``, ``value``): a record beneath an item is only
    counted; a value SQLite cannot read as JSON (no logd writes one) has no stamp."""
    instant, matches = (part.replace("{key}", key).replace("{value}", value) for part in statement)
    beneath = f"(instr(substr({key}, {len(container) + 2}), char(31)) > 0)"
    return (f"CASE WHEN {beneath} OR NOT json_valid({value}) THEN NULL ELSE {instant} END, "
            f"CASE WHEN {beneath} OR NOT json_valid({value}) THEN 0 WHEN {matches} THEN 1 ELSE 0 END, {beneath}")


def _statement(test: ItemTest) -> tuple[str, str] | None:
    """The test's instant and match over a record's ``{key}`` and ``{value}``, every parameter written in as a
    literal (a trigger takes none); None when the test is not one a heads index says (not flat, or not in SQL)
    or a parameter cannot be written so (a NUL in a string)."""
    compiled = compile_test(test, 0, "{key}", "{value}", prefix="h")
    if compiled is None or not compiled.flat:
        return None
    literals: dict[str, str] = {}
    for name, value in compiled.params.items():
        literal = _literal(value)
        if literal is None:
            return None
        literals[name] = literal

    def written(sql: str) -> str:
        return _PARAMETER.sub(lambda found: literals[found.group(1)], sql)
    return written(compiled.instant(compiled.stamp)), written(compiled.matches)



def _literal(value: Any) -> str | None:
    """``value`` as a SQL literal: text quoted, an int or float as Python writes it (exactly, and read back as
    the same type); None for what cannot be written in a statement's text."""
    if isinstance(value, str):
        return None if "\x00" in value else "'" + value.replace("'", "''") + "'"
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return repr(value)
    return None
