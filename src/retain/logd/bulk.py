"""The bulk write path: a patch of whole new records (a producer's batch of jobs or events), written in rows.

:func:`new_records` reads a patch whose every op sets a map at a path of names
(``{set: jobs.j7, value: {...}}``) straight from its wire form: one match and one split per path, no
path objects. Inside the commit's transaction :func:`plan_bulk` then decides with one read of the parents
and all the places (:meth:`~retain.logd.storage.Backend.latest_absent`; in a scope the parents as the view
reads them, then one :meth:`~retain.logd.storage.Backend.absent` read) whether the patch
is only new records: each under a map record that exists and holds no leaf of that name, no two ops
on one place or one inside another, no schema rule reaching any of them, no record ever written at
any of those places. Then a draft has nothing to find -- no subtree to clear, no parent to rewrite,
no constraint to check: each value is its records' rows as they are (a map per record, its scalars
and lists its leaves, in the order given), the delta is one text built once, and the backend writes
the rows as they are.

Anything else goes the general way (:class:`~retain.logd.draft.Draft`), which answers exactly as it
always did, refusals included; a bulk patch commits the rows and the delta the draft would.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from retain.errors import InvalidRequest
from retain.logd.patch_ops import Op, Set
from retain.logd.paths import MAX_PATH, NAMES, ROOT, is_key, parse
from retain.logd.schema import Schema
from retain.logd.storage import BASELINE, MAP, SEP, ReadAhead, Row
from retain.logd.view import View, check_data, dumps, leaves, visible

__all__ = ["Bulk", "NewRecords", "Places", "as_ops", "new_records", "places", "plan_bulk", "read_ahead"]

#: ``(path text, map)`` per op, in order
NewRecords = list[tuple[str, dict[str, Any]]]
#: :meth:`~retain.logd.storage.Backend.latest_absent`: ``(scope, parents, keys, at) -> (rows, absent)``
LatestAbsent = Callable[[int, Sequence[str], Sequence[str], int], tuple[list[Row | None], bool]]
_LEAVES = (str, int, bool, type(None))
_NAMES_SEEN: set[str] = set()  # child names already found to be keys (status, updatedAt, ...): checked once
_NAMES_KEPT = 4096


@dataclass(frozen=True, slots=True)
class Bulk:
    """A patch of new records, ready to write: its rows, its delta as applied, and that delta's JSON text."""

    rows: list[Row]
    applied: list[dict[str, Any]]
    delta: str


@dataclass(frozen=True, slots=True)
class Places:
    """A patch of new records and where it writes: the record key of each op; each parent path with the names
    set under it (its leaves must not hold them), in the order the ops first name them; and the parents' keys."""

    records: NewRecords
    keys: list[str]
    parents: dict[str, set[str]]
    parent_keys: list[str]


def places(records: NewRecords) -> Places:
    """The places of ``records``, worked out once for :func:`read_ahead` and :func:`plan_bulk` both."""
    keys: list[str] = []
    parents: dict[str, set[str]] = {}
    for text, _ in records:
        keys.append(_key(text))
        parent, _, name = text.rpartition(".")
        names = parents.get(parent)
        if names is None:
            names = parents[parent] = set()
        names.add(name)
    return Places(records, keys, parents, [_key(parent) for parent in parents])


def new_records(ops: Sequence[Any]) -> NewRecords | None:
    """The ops as ``(path, map)`` when every one is ``{set: PATH, value: {...}}`` with a PATH of names only
    (which needs no other check to be a valid place); None for anything else, which :func:`parse_ops` reads."""
    records: NewRecords = []
    for op in ops:
        if type(op) is not dict or len(op) != 2:
            return None
        text, value = op.get("set"), op.get("value")
        if type(text) is not str or type(value) is not dict or len(text) > MAX_PATH or not NAMES.fullmatch(text):
            return None
        records.append((text, value))
    return records or None


def as_ops(records: NewRecords) -> tuple[Op, ...]:
    """The same patch as parsed ops, for the general way."""
    return tuple(Set(parse(text), value) for text, value in records)


def plan_bulk(view: View, schema: Schema, where: Places, latest_absent: LatestAbsent, *,
              applied: bool = True) -> Bulk | None:
    """The patch (:func:`places` of its records) as new records' rows, or None when it must go the general way.

    ``latest_absent`` is the backend's :meth:`~retain.logd.storage.Backend.latest_absent`: the parents'
    newest versions, and whether no record was ever written in any of the new keys' subtrees (in the view's
    scope or the baseline), at the commit ``view`` reads. Without ``applied`` the delta is its text alone
    (nobody listens for its ops).
    """
    records = where.records
    if schema.rules:
        for text, _ in records:
            path = parse(text)
            if schema.reaches(path) or schema.raw_root(path) is not None:
                return None
    texts = {text for text, _ in records}
    if len(texts) != len(records) or any(text in texts for parent in where.parents for text in _up_to(parent)):
        return None  # two ops on one place, or one inside another's: the draft orders them
    found, absent = _parents_and_absent(view, latest_absent, where.parent_keys, where.keys)
    for names, row in zip(where.parents.values(), found, strict=False):
        if row is None or row.kind != MAP or not names.isdisjoint(leaves(row)):
            return None  # no map there, or a leaf of that name to replace
    rows: list[Row] = []
    pieces: list[str] = []
    for (text, value), key in zip(records, where.keys, strict=False):
        written = _records(key, value, rows)
        if written is None:
            return None  # a value the tree cannot hold: the draft says why
        own, flat = written
        pieces.append(f'{{"set":"{text}","value":{own if flat else dumps(value)}}}')
    if not absent:
        return None
    ops = [{"set": text, "value": value} for text, value in records] if applied else []
    return Bulk(rows, ops, "[" + ",".join(pieces) + "]")


def read_ahead(where: Places) -> ReadAhead:
    """The read :func:`plan_bulk` makes first in the baseline, for the backend to send with the transaction's lock
    (:meth:`~retain.logd.storage.Backend.transaction`)."""
    return ReadAhead(BASELINE, tuple(where.parent_keys), tuple(where.keys))


def _key(path: str) -> str:
    """The record key of a path of names (``jobs.j7``); the root's is ``""``."""
    return SEP + path.replace(".", SEP) if path else ""


def _parents_and_absent(view: View, latest_absent: LatestAbsent, parents: list[str],
                        keys: list[str]) -> tuple[list[Row | None], bool]:
    """The record ``view`` sees at each parent key, and whether the new keys are absent: in the baseline one
    read (a round trip to a database server saved per patch)."""
    if view.scope == BASELINE:
        latest, absent = latest_absent(BASELINE, parents, keys, view.at)
        return [visible(key, row) for key, row in zip(parents, latest, strict=False)], absent
    # A scope's view of a record reads the baseline's version and the ancestors' too: the view reads those.
    return [view.row(key) for key in parents], latest_absent(view.scope, (), keys, view.at)[1]


def _up_to(path: str) -> list[str]:
    """``a.b.c`` and every place above it: ``a``, ``a.b``, ``a.b.c`` (none for the root)."""
    names = path.split(".") if path else []
    return [".".join(names[:end]) for end in range(1, len(names) + 1)]


def _records(key: str, value: dict[str, Any], rows: list[Row]) -> tuple[str, bool] | None:
    """Append the rows of the map ``value`` written whole at ``key``; returns the JSON of its leaves and
    whether that is all of it (no child map: the text is ``value``'s own), or None for what the tree
    cannot hold."""
    flat = True
    for name, child in value.items():
        if name not in _NAMES_SEEN:
            if type(name) is not str or not is_key(name):
                return None
            if len(_NAMES_SEEN) >= _NAMES_KEPT:
                _NAMES_SEEN.clear()
            _NAMES_SEEN.add(name)
        kind = type(child)
        if kind in _LEAVES:
            continue
        if kind is dict:
            flat = False
            if _records(key + SEP + name, child, rows) is None:
                return None
        elif kind is float:
            if not math.isfinite(child):
                return None
        elif kind is list:
            try:
                check_data(child, ROOT, names=True)
            except InvalidRequest:
                return None
        else:
            return None
    own = dumps(value if flat else {name: child for name, child in value.items() if type(child) is not dict})
    rows.append(Row(key, MAP, own))
    return own, flat
