"""Reading the document tree over a backend's :class:`~retain.logd.storage.Reads`: views, paths to records, assembly.

A :class:`View` is the tree one session sees at one commit: the baseline's records,
overlaid record by record with its scope's own (a scope's record, or tombstone, wins).

Placement: a map or keyed-array node is a record; scalars, dense arrays and ``!raw``
documents are leaves kept inside their parent record's value. Dense arrays are leaves
because a position is not an identity: inserting before index 3 renumbers every later
element, so storing them apart would rewrite them all anyway.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from retain.errors import InvalidRequest, NotFound, ReadBudgetExceeded, StoreDamaged
from retain.logd.paths import Field, Index, Key, Path, Segment, Wild, check_key, is_key
from retain.logd.storage import BASELINE, GONE, KEYED, MAP, SEP, Reads, Row

__all__ = ["Location", "Reader", "ScanBudgetExceeded", "View", "check_data", "dumps", "iter_items", "leaves", "list_items",
           "locate", "merge", "name_in", "navigate", "over_budget", "read_value"]


class Reader(Protocol):
    """Anything the tree can be read through: a :class:`View`, or a draft over one."""

    at: int

    def row(self, key: str) -> Row | None: ...

    def rows(self, key: str, *, children: bool = False) -> Iterator[Row]: ...


# One encoder made once: json.dumps with any argument set makes a new one per call.
_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def dumps(value: Any) -> str:
    """A value's JSON as the store keeps it: compact, UTF-8 as it is, no NaN."""
    return _ENCODER.encode(value)


def leaves(row: Row) -> dict[str, Any]:
    """A map record's leaf children, freshly decoded (safe to change).

    Raises:
        StoreDamaged: the record's stored value does not decode; names its key.
    """
    if not row.value:
        return {}
    try:
        value = json.loads(row.value)
    except ValueError as exc:
        raise undecodable(row, exc) from exc
    if not isinstance(value, dict):
        raise undecodable(row, TypeError(f"a {type(value).__name__}, not a map"))
    return value


def undecodable(row: Row, exc: Exception) -> StoreDamaged:
    """The error of a record whose stored value does not decode (the store is damaged)."""
    shown = row.key.replace(SEP, ".").lstrip(".") or "the root"
    return StoreDamaged(f"the record {shown} (key {row.key!r}) does not decode ({exc}): the store is damaged")


def merge(base: Iterator[Row], over: Iterator[Row]) -> Iterator[Row]:
    """Two key-ordered scans as one; on the same key the overlay's version wins."""
    b, o = next(base, None), next(over, None)
    while b is not None or o is not None:
        if o is None or (b is not None and b.key < o.key):
            yield b  # type: ignore[misc]
            b = next(base, None)
        else:
            if b is not None and b.key == o.key:
                b = next(base, None)
            yield o
            o = next(over, None)


_EMPTY_ROOT = Row("", MAP, "{}")
_KIND_NAMES = {MAP: "a map", KEYED: "a keyed array"}


def visible(key: str, latest: Row | None) -> Row | None:
    """The record a baseline view sees at ``key`` given its newest version there: none for a tombstone, the
    empty root where the root was never written."""
    if latest is None:
        return _EMPTY_ROOT if key == "" else None
    return None if latest.kind == GONE else latest


class ScanBudgetExceeded(Exception):
    """A view's scans passed the bound it was made with (internal: the write reading through it is bigger
    than its caller would run where it is, and is run elsewhere instead)."""


class View:
    """The tree as one session sees it at commit ``at``; ``scan_budget``: the most rows its scans
    (:meth:`rows`) may return in all, past which they raise :class:`ScanBudgetExceeded`."""

    def __init__(self, backend: Reads, at: int, scope: int = BASELINE, *, scan_budget: int | None = None) -> None:
        self.backend, self.at, self.scope = backend, at, scope
        self._ahead: dict[str, Row | None] = {}  # records read ahead on the way down a path (prefetch)
        self._scan_budget = scan_budget

    def prefetch(self, path: Path) -> None:
        """Read the records on the way down to ``path`` (those not read ahead yet) in one read, before
        :func:`locate` asks for them one by one (a get of ``jobs.j1`` read the root, ``jobs`` and ``j1`` in three
        statements). A read cache: the view is at one commit, so what it holds stays true. The baseline's view
        only (a scope's reads two scopes per record)."""
        if self.scope != BASELINE:
            return
        keys = [key for key in _keys_down(path) if key not in self._ahead]
        if len(keys) > 1:
            self._ahead.update(zip(keys, self.backend.latest_of(BASELINE, keys, self.at), strict=True))

    def _latest(self, key: str) -> Row | None:
        if key in self._ahead:
            return self._ahead[key]
        if self.scope != BASELINE:
            row = self.backend.latest(self.scope, key, self.at)
            if row is not None:
                return row
        return self.backend.latest(BASELINE, key, self.at)

    def row(self, key: str) -> Row | None:
        """The visible record at ``key``, or None."""
        row = visible(key, self._latest(key))
        if row is None:
            return None
        if self.scope != BASELINE:
            # A scope may have removed an ancestor the baseline later wrote under.
            cut = key.rfind(SEP)
            while cut > 0:
                ancestor = self._latest(key[:cut])
                if ancestor is None or ancestor.kind == GONE:
                    return None
                cut = key.rfind(SEP, 0, cut)
        return row

    def rows(self, key: str, *, children: bool = False, end: str | None = None) -> Iterator[Row]:
        """Every record version visible in ``key``'s subtree (with ``end``: from ``key`` up to ``end``),
        tombstones included, in key order."""
        rows = self.backend.scan(BASELINE, key, self.at, children=children, end=end)
        if self.scope != BASELINE:
            rows = merge(rows, self.backend.scan(self.scope, key, self.at, children=children, end=end))
        return rows if self._scan_budget is None else self._counted(rows)

    def _counted(self, rows: Iterator[Row]) -> Iterator[Row]:
        for row in rows:
            assert self._scan_budget is not None
            self._scan_budget -= 1
            if self._scan_budget < 0:
                raise ScanBudgetExceeded(f"the scans passed their bound at {row.key!r}")
            yield row


def _keys_down(path: Path) -> list[str]:
    """The record keys a walk down ``path`` may read: the root's, then one per leading name (a position or a
    wildcard is inside a record, or a list of them)."""
    keys, key = [""], ""
    for segment in path.segments:
        if isinstance(segment, Field):
            key += SEP + segment.name
        elif isinstance(segment, Key):
            key += SEP + segment.key
        else:
            break
        keys.append(key)
    return keys


@dataclass(frozen=True, slots=True)
class Location:
    """Where a path lands: the deepest record on it, and how far the path got."""

    key: str
    row: Row
    depth: int  # segments the record covers; == len(path) when the path names the record
    leaf: str | None  # the leaf child of ``row`` the rest of the path goes into, if any


def name_in(path: Path, depth: int, segment: Segment, row: Row) -> str:
    """The child name ``segment`` gives under the record ``row``; refused when it does not fit its kind."""
    if row.kind == MAP and isinstance(segment, Field):
        return segment.name
    if row.kind == KEYED and isinstance(segment, Key):
        return segment.key
    prefix = Path(path.segments[:depth])  # for the refusal only: made on every step it cost every read
    here = str(prefix) or "the root"
    if row.kind == KEYED:
        raise InvalidRequest(f"{path}: {here} is a keyed array; name its elements {prefix}(key)")
    raise InvalidRequest(f"{path}: {here} is a map; name its children {here}.name" if prefix.segments
                         else f"{path}: the root is a map; start with a name")


def locate(reader: Reader, path: Path) -> Location:
    """Walk ``path`` down the records as far as they go."""
    return walk(path, reader.row, lambda _key, row: leaves(row))


def walk(path: Path, row_of: Callable[[str], Row | None],
         leaf_names: Callable[[str, Row], Mapping[str, Any]]) -> Location:
    """:func:`locate` over any way of reading a record (``row_of(key)``) and a map's leaf children
    (``leaf_names(key, row)``): a draft walks its own records, with maps it edits leaf by leaf still decoded."""
    key, row = "", row_of("")
    assert row is not None
    for depth, segment in enumerate(path.segments):
        name = name_in(path, depth, segment, row)
        child_key = key + SEP + name
        child = row_of(child_key)
        if child is None:
            leaf = name if row.kind == MAP and name in leaf_names(key, row) else None
            return Location(key, row, depth, leaf)
        key, row = child_key, child
    return Location(key, row, len(path.segments), None)


def navigate(value: Any, segments: tuple[Segment, ...], path: Path) -> Any:
    """Follow ``segments`` into a leaf's JSON (dense arrays and the maps inside them)."""
    for segment in segments:
        if isinstance(segment, Index) and isinstance(value, list):
            if segment.index >= len(value):
                raise NotFound(f"{path}: no position {segment.index} (the array has {len(value)} elements)")
            value = value[segment.index]
        elif isinstance(segment, Field) and isinstance(value, dict):
            if segment.name not in value:
                raise NotFound(f"{path} does not exist")
            value = value[segment.name]
        else:
            raise InvalidRequest(f"{path}: {segment} does not fit a {type(value).__name__} inside a dense "
                                 "array or leaf (use [index] for lists and .name for maps)")
    return value


def _assemble(reader: Reader, key: str, row: Row, budget: int | None, path: Path) -> Any:
    """The value of the record at ``key`` with its whole subtree, counting records against ``budget``."""
    top: Any = leaves(row) if row.kind == MAP else []
    for name, value in _children(reader, key, row, budget, path):
        if row.kind == MAP:
            top[name] = value
        else:
            top.append(value)
    return top


def _children(reader: Reader, key: str, row: Row, budget: int | None, path: Path) -> Iterator[tuple[str, Any]]:
    """The record children of the record at ``key``, each with its whole subtree, in key order, each one
    yielded as soon as it is whole (a key-ordered scan is a pre-order walk), so a caller can stream them."""
    # The hot loop of every big read: locals, and each record's prefix (key + SEP) made once.
    stack: list[tuple[str, Any, int]] = [(key + SEP, None, row.kind)]  # (prefix, value, kind) down to here
    current: tuple[str, Any] | None = None  # the child being assembled
    count, limit, loads = 1, budget, json.loads
    for found in reader.rows(key):
        found_key, kind = found.key, found.kind
        if kind == GONE or found_key == key:
            continue
        while not found_key.startswith(stack[-1][0]):
            stack.pop()
        parent_prefix, parent, parent_kind = stack[-1]
        name = found_key[len(parent_prefix):]
        if SEP in name:
            continue  # an orphan: its parent is not visible here
        count += 1
        if limit is not None and count > limit:
            raise over_budget(path, limit)
        try:
            value: Any = (loads(found.value) if found.value else {}) if kind == MAP else []
        except ValueError as exc:
            raise undecodable(found, exc) from exc
        if parent is None:  # a child of the top record: the one before it is whole
            if current is not None:
                yield current
            current = (name, value)
        elif parent_kind == MAP:
            parent[name] = value
        else:
            parent.append(value)
        stack.append((found_key + SEP, value, kind))
    if current is not None:
        yield current


def over_budget(path: Path, limit: int) -> ReadBudgetExceeded:
    """The error of a read of ``path`` that would touch more than ``limit`` records."""
    return ReadBudgetExceeded(f"reading {path or 'the root'} touches more than {limit} records "
                              f"(storage.readBudget = {limit}); raise storage.readBudget or split the collection")


def read_value(reader: Reader, path: Path, budget: int | None = None) -> Any:
    """The value at ``path`` (the root for ``Path(())``).

    Raises:
        NotFound: nothing is there.
        ReadBudgetExceeded: the subtree holds more than ``budget`` records.
    """
    if isinstance(reader, View):
        reader.prefetch(path)
    location = locate(reader, path)
    if location.depth == len(path.segments):
        return _assemble(reader, location.key, location.row, budget, path)
    if location.leaf is not None:
        return navigate(leaves(location.row)[location.leaf], path.segments[location.depth + 1:], path)
    raise NotFound(f"{path} does not exist at commit {reader.at}")


def list_items(reader: Reader, path: Path, budget: int | None = None) -> Any:
    """The children of the container ``path`` ends in a wildcard under: a map for ``*``, a list otherwise.

    Raises:
        InvalidRequest: the wildcard does not fit the container (``jobs(*)`` over a map, ...).
    """
    items = iter_items(reader, path, budget)
    return dict(items) if path.last == Wild("field") else [value for _, value in items]


def iter_items(reader: Reader, path: Path, budget: int | None = None) -> Iterator[tuple[str, Any]]:
    """The children of a container as ``(name, value)`` pairs, one at a time, in :func:`list_items`' order.

    A keyed array's element is named by its key, a dense array's by its position. The container is
    found and checked before this returns; the items are read as they are consumed, so a caller
    that keeps few of them holds few (the read budget still counts every record).

    Raises:
        NotFound: no container is there.
        InvalidRequest: the wildcard does not fit the container (``jobs(*)`` over a map, ...).
    """
    wild = path.last
    if not isinstance(wild, Wild):
        raise InvalidRequest(f"list takes a container's children: {path}.*, {path}(*) or {path}[*]")
    container = path.parent
    if isinstance(reader, View):
        reader.prefetch(container)
    location = locate(reader, container)
    if location.depth == len(container.segments):
        row = location.row
        if (row.kind, wild.kind) not in ((MAP, "field"), (KEYED, "key")):
            fit = f"{container}.*" if row.kind == MAP else f"{container}(*)"
            raise InvalidRequest(f"{path}: {container or 'the root'} is {_KIND_NAMES[row.kind]}; list {fit}")
        records = _children(reader, location.key, row, budget, container)
        return itertools.chain(leaves(row).items(), records) if row.kind == MAP else records
    value = read_value(reader, container)
    if wild.kind == "index" and isinstance(value, list):
        return ((str(index), item) for index, item in enumerate(value))
    if wild.kind == "field" and isinstance(value, dict):
        return iter(value.items())
    shape = "a dense array" if isinstance(value, list) else type(value).__name__
    fits: dict[type, str] = {list: f"{container}[*]", dict: f"{container}.*"}
    fit = fits.get(type(value), "nothing: it is not a container")
    raise InvalidRequest(f"{path}: {container} is {shape}; list {fit}")


def check_data(value: Any, where: Path, *, names: bool) -> Any:
    """A value the tree can hold: JSON data, no tags; with ``names``, map keys obey the key grammar."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for name, child in item.items():
                if not isinstance(name, str):
                    raise InvalidRequest(f"{where}: map keys are strings (got {name!r})")
                if names and not is_key(name):
                    check_key(name, f"name in {where}")
                stack.append(child)
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise InvalidRequest(f"{where}: {item} is not a number JSON can carry")
        elif item is not None and not isinstance(item, (bool, int, str)):
            raise InvalidRequest(f"{where}: {item!r} is not data (tags such as !or are for patterns and "
                                 "schemas, not values)")
    return value


