"""Writing the document tree: a :class:`Draft` applies one patch's operations over a view of the head.

The operations become pending records (new versions and tombstones) read back through
the draft itself, so a later op sees an earlier one. The store commits the pending
records (:meth:`Draft.rows_to_write`) in one transaction after :meth:`Draft.check`, or
drops them whole.

A patch's cost is linear in its ops (3,000 ``set``s of one map's
fields took 6 s, 8,000 took 245 s): a map record edited leaf by leaf keeps its decoded
leaves in the draft, and is encoded once, when something reads it whole or at the end --
not decoded and re-encoded whole by every op.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from retain.errors import InvalidRequest, NotFound, PreconditionFailed, SchemaViolation
from retain.logd.match import ABSENT, matches
from retain.logd.patch_ops import Delete, Op, Set
from retain.logd.paths import Field, Index, Key, Path, check_key, is_key
from retain.logd.schema import Keying, Schema, tag_text
from retain.logd.storage import GONE, KEYED, MAP, SEP, Row
from retain.logd.view import (
    Location,
    Reader,
    View,
    check_data,
    dumps,
    leaves,
    locate,
    merge,
    name_in,
    navigate,
    read_value,
    walk,
)
from retain.wire import AutoId

__all__ = ["Draft", "check_node", "record_key"]

_KEEP_SUBTREE = 64  # rows of one scanned subtree a draft keeps for a second read
_AFTER_SEP = chr(ord(SEP) + 1)  # above SEP, below every key character: key + _AFTER_SEP ends key's subtree


class Draft:
    """One patch in the making: operations applied as pending records over a view of the head."""

    def __init__(self, view: View, schema: Schema, rev: int) -> None:
        self.view, self.schema, self.rev = view, schema, rev
        self.at = view.at
        self.pending: dict[str, Row] = {}
        self._children: dict[str, set[str]] = {}  # pending keys by parent key
        self._read: dict[str, Row | None] = {}  # the view's records, as this draft read them
        self._scanned: dict[str, list[Row]] = {}  # the view's small subtrees, as this draft scanned them
        self.applied: list[dict[str, Any]] = []
        self._written: list[Path] = []  # set paths whose subtree the schema checks at the end
        self._shrunk: list[Path] = []   # parents of deleted places: required / minItems may break
        self._next_id = 0
        self._own: dict[str, dict[str, Any]] = {}  # decoded leaves of pending maps, encoded when read whole

    # -- reading through the pending records ------------------------------------------------

    def row(self, key: str) -> Row | None:
        if key in self._own:
            self._flush(key)
        return self._peek(key)

    def rows_to_write(self) -> Iterable[Row]:
        """Every pending record version, encoded: what the store writes."""
        for key in list(self._own):
            self._flush(key)
        return self.pending.values()

    def _peek(self, key: str) -> Row | None:
        """The record at ``key`` as this draft sees it; a map edited leaf by leaf may not be encoded yet (its
        leaves are :meth:`_leaves`)."""
        pending = self.pending.get(key)
        if pending is not None:
            return None if pending.kind == GONE else pending
        if key not in self._read:  # the draft runs inside one transaction: what it read stays true
            self._read[key] = self.view.row(key)
        return self._read[key]

    def rows(self, key: str, *, children: bool = False) -> Iterator[Row]:
        inside = key + SEP
        for dirty in [found for found in self._own if found == key or found.startswith(inside)]:
            self._flush(dirty)
        if children:
            mine = sorted(self._children.get(key, ()))
            base = self.view.rows(key, children=True)
        else:
            mine, stack = [], [key]
            while stack:
                found = stack.pop()
                if found in self.pending:
                    mine.append(found)
                stack.extend(self._children.get(found, ()))
            mine.sort()
            base = self._subtree(key)
        return merge(base, (self.pending[k] for k in mine))

    def _subtree(self, key: str) -> Iterator[Row]:
        """The view's rows in ``key``'s subtree; a small one is kept, so that a place a precondition
        read and an op then deletes is scanned once (a batch of retain deletes reads each item twice)."""
        kept = self._scanned.get(key)
        if kept is not None:
            yield from kept
            return
        rows: list[Row] | None = []
        for row in self.view.rows(key):
            if rows is not None:
                rows.append(row)
                if len(rows) > _KEEP_SUBTREE:
                    rows = None  # a big subtree streams, as it did
            yield row
        if rows is not None:
            self._scanned[key] = rows

    def prefetch(self, paths: Iterable[Path]) -> None:
        """Read the records at many sibling places in one range scan, before the precondition and the ops
        read them one by one: a batch of deletes of a container's items (a retain batch) is one query
        instead of two per item. A read cache only: it holds what the draft would have read anyway."""
        siblings: dict[str, set[str]] = {}
        for path in paths:
            try:
                key = record_key(path)
            except NotFound:
                continue  # a position inside a dense array is no record of its own
            if key:
                siblings.setdefault(key[:key.rfind(SEP)], set()).add(key)
        for parent, keys in siblings.items():
            if len(keys) < 2 or self.row(parent) is None:
                continue  # one place is read as cheaply alone; under no parent there is nothing to read
            found: dict[str, list[Row]] = {key: [] for key in keys}
            ordered = sorted(keys)
            start = len(parent) + 1
            for row in self.view.rows(ordered[0], end=ordered[-1] + _AFTER_SEP):
                cut = row.key.find(SEP, start)
                subtree = found.get(row.key if cut < 0 else row.key[:cut])
                if subtree is not None:  # rows of the siblings between them are passed over
                    subtree.append(row)
            for key, rows in found.items():
                own = rows[0] if rows and rows[0].key == key else None
                self._read.setdefault(key, None if own is None or own.kind == GONE else own)
                if len(rows) <= _KEEP_SUBTREE:
                    self._scanned.setdefault(key, rows)

    def _pend(self, row: Row) -> None:
        """Add a pending record version, indexed under its parent so subtrees are found without a scan."""
        if row.key not in self.pending and row.key:
            self._children.setdefault(row.key[:row.key.rfind(SEP)], set()).add(row.key)
        self.pending[row.key] = row
        self._own.pop(row.key, None)

    def _leaves(self, key: str, row: Row) -> dict[str, Any]:
        """The leaves of the map record ``row`` at ``key``, to change in place and hand to :meth:`_pend_leaves`."""
        own = self._own.get(key)
        return leaves(row) if own is None else own

    def _pend_leaves(self, key: str, own: dict[str, Any]) -> None:
        """A new version of the map record at ``key`` with leaves ``own``, encoded only when read whole."""
        self._pend(Row(key, MAP))
        self._own[key] = own

    def _flush(self, key: str) -> None:
        self.pending[key] = Row(key, MAP, dumps(self._own.pop(key)))

    def _locate(self, path: Path) -> Location:
        """:func:`~retain.logd.view.locate` through this draft, without encoding maps edited leaf by leaf."""
        return walk(path, self._peek, self._leaves)

    # -- operations ----------------------------------------------------------------------------

    def precondition(self, entries: tuple[tuple[Path, Any], ...], budget: int | None) -> None:
        """Every ``(path, pattern)`` must hold of the state this draft starts from.

        Read through the draft itself (no op is applied yet, so it is the view's state), so that
        what the precondition read is not read again by the ops that follow.
        """
        assert not self.pending, "a precondition is checked before any op"
        for path, pattern in entries:
            try:
                value = read_value(self, path, budget)
            except NotFound:
                value = ABSENT
            if not matches(pattern, value):
                state = "it does not exist" if value is ABSENT else "it does not match"
                raise PreconditionFailed(f"precondition on {path} failed at commit {self.at}: {state}; "
                                         "nothing was written")

    def apply(self, op: Op) -> None:
        inside = self.schema.raw_root(op.path)
        if inside is not None and inside != op.path:
            raise SchemaViolation(f"{op.path} goes inside the !raw subtree {inside}: write it whole")
        if isinstance(op, Delete):
            self._delete(op.path)
            self.applied.append({"delete": str(op.path)})
        elif isinstance(op, Set):
            self.applied.append({"set": str(op.path), "value": self._set(op.path, op.value)})
        else:
            self.applied.append(self._append(op.path, op.value))

    def check(self) -> None:
        """The schema's verdict on the state this draft leaves; raises :class:`SchemaViolation`."""
        if not self.schema.rules:
            return
        for path in dict.fromkeys(self._written):  # a place written twice is checked once, as it ends
            if self.schema.reaches(path):
                try:
                    value = read_value(self, path)
                except (NotFound, InvalidRequest):
                    continue  # a later op of this patch removed or replaced the place
                self.schema.check_value(path, value)
        for path in dict.fromkeys(self._shrunk):  # a batch of sibling deletes checks their parent once
            check_node(self, self.schema, path)

    # -- set ------------------------------------------------------------------------------------

    def _set(self, path: Path, value: Any) -> Any:
        location = self._locate(path)
        depth = location.depth
        if depth < len(path.segments) and location.leaf is not None and depth + 1 < len(path.segments):
            return self._set_inside_leaf(path, location, value)
        if depth < len(path.segments) - 1 and location.leaf is None:
            self._create(path, depth)
        return self._put(path, value)

    def _create(self, path: Path, depth: int) -> None:
        """Make the missing records between the deepest existing one and ``path``'s parent."""
        for end in range(depth + 1, len(path.segments)):
            place = Path(path.segments[:end])
            if isinstance(place.last, Index):
                raise NotFound(f"{path}: {place} does not exist; a dense array grows by append")
            self._put(place, [] if self.schema.keying(place) else {})

    def _put(self, path: Path, value: Any) -> Any:
        """Write ``value`` whole at ``path``, whose parent is a record; returns it as stored."""
        parent_key = record_key(path.parent)
        parent = self._peek(parent_key)
        if parent is None:
            raise NotFound(f"{path}: {path.parent} does not exist")
        name = name_in(path, len(path.segments) - 1, path.last, parent)  # type: ignore[arg-type]
        key = parent_key + SEP + name
        if parent.kind == KEYED:
            value = self._element(path.parent, value, given=name)
        kind = self._kind_for(path, value)
        if parent.kind == KEYED and kind != MAP:
            raise SchemaViolation(f"{path}: an element of a keyed array is a record, not !raw")
        self._clear(key)
        own = self._leaves(parent_key, parent) if parent.kind == MAP else None
        if own is not None and (name in own or kind is None):
            if kind is None:
                checked = check_data(value, path, names=self.schema.raw_root(path) is None)
                own.pop(name, None)
                own[name] = checked
            else:
                own.pop(name, None)
            self._pend_leaves(parent_key, own)
        if kind is not None:
            value = self._emit(key, path, value, kind)
        self._written.append(path)
        return value

    def _kind_for(self, path: Path, value: Any) -> int | None:
        if self.schema.raw_root(path) is not None:
            return None
        keying = self.schema.keying(path)
        if keying is not None:
            if not isinstance(value, list):
                raise SchemaViolation(f"{path} is a keyed array ({tag_text(keying)}): its value is a list of maps "
                                      f"(got {type(value).__name__})")
            return KEYED
        return MAP if isinstance(value, dict) else None

    def _emit(self, key: str, path: Path, value: Any, kind: int) -> Any:
        """Pending records for a map or keyed array written whole; returns the value as stored."""
        if kind == KEYED:
            keying = self.schema.keying(path)
            assert keying is not None
            self._pend(Row(key, KEYED))
            stored, seen = [], set()
            for element in value:
                element = self._element(path, element, given=None, keying=keying)
                element_key = element[keying.field]
                if element_key in seen:
                    raise SchemaViolation(f"{path}: two elements with key {element_key!r} ({tag_text(keying)})")
                seen.add(element_key)
                stored.append(self._emit(key + SEP + element_key, path / Key(element_key), element, MAP))
            return stored
        own, stored_map = {}, {}
        for name, child in value.items():
            if not is_key(name):
                check_key(name, f"name in {path}")
            child_path = path / Field(name)
            child_kind = self._kind_for(child_path, child)
            if child_kind is None:
                own[name] = stored_map[name] = check_data(child, child_path,
                                                             names=self.schema.raw_root(child_path) is None)
            else:
                stored_map[name] = self._emit(key + SEP + name, child_path, child, child_kind)
        self._pend(Row(key, MAP, dumps(own)))
        return stored_map

    def _element(self, array: Path, element: Any, *, given: str | None, keying: Keying | None = None) -> Any:
        """A keyed-array element with its key field filled in (from the path, or generated)."""
        keying = keying or self.schema.keying(array)
        if keying is None:
            raise SchemaViolation(f"{array} is stored as a keyed array but the schema no longer keys it")
        if not isinstance(element, dict):
            raise SchemaViolation(f"{array}: elements of a keyed array are maps (got {type(element).__name__}); "
                                  f"schema rule {tag_text(keying)}")
        if keying.field in element:
            if given is not None and element[keying.field] != given:
                raise SchemaViolation(f"{array}({given}): the element's key field {keying.field!r} says "
                                      f"{element[keying.field]!r} ({tag_text(keying)})")
        elif given is not None:
            element = {keying.field: given, **element}
        elif isinstance(keying, AutoId):
            element = {keying.field: self._new_key(array), **element}
        self.schema.check_keyed_element(array, keying, element)
        return element

    def _new_key(self, array: Path) -> str:
        """A fresh key: this commit's number and a counter, zero-padded so keys sort by arrival."""
        prefix = record_key(array) + SEP
        while True:
            self._next_id += 1
            key = f"{self.rev:010d}-{self._next_id:04d}"
            if self.row(prefix + key) is None:
                return key

    def _set_inside_leaf(self, path: Path, location: Location, value: Any) -> Any:
        own = self._leaves(location.key, location.row)
        inner = path.segments[location.depth + 1:]
        holder = navigate(own[location.leaf], inner[:-1], path)  # type: ignore[index]
        last = inner[-1]
        value = check_data(value, path, names=True)
        if isinstance(last, Index) and isinstance(holder, list):
            if last.index >= len(holder):
                raise NotFound(f"{path}: no position {last.index} (the array has {len(holder)}); use append")
            holder[last.index] = value
        elif isinstance(last, Field) and isinstance(holder, dict):
            holder[last.name] = value
        else:
            raise InvalidRequest(f"{path}: {last} does not fit a {type(holder).__name__}")
        self._pend_leaves(location.key, own)
        self._written.append(path)
        return value

    # -- delete ---------------------------------------------------------------------------------

    def _delete(self, path: Path) -> None:
        location = self._locate(path)
        depth = location.depth
        if depth == len(path.segments):
            self._clear(location.key)
        elif location.leaf is not None:
            own = self._leaves(location.key, location.row)
            inner = path.segments[depth + 1:]
            if not inner:
                del own[location.leaf]
            else:
                holder = navigate(own[location.leaf], inner[:-1], path)
                last = inner[-1]
                navigate(holder, (last,), path)  # raises NotFound when absent
                del holder[last.index if isinstance(last, Index) else last.name]  # type: ignore[union-attr]
            self._pend_leaves(location.key, own)
        else:
            raise NotFound(f"{path} does not exist at commit {self.at}; nothing was written")
        self._shrunk.append(path.parent)

    def _clear(self, key: str) -> None:
        """Tombstone every visible record in ``key``'s subtree."""
        for row in list(self.rows(key)):
            if row.kind != GONE:
                self._pend(Row(row.key, GONE))

    # -- append ---------------------------------------------------------------------------------

    def _append(self, path: Path, value: Any) -> dict[str, Any]:
        location = self._locate(path)
        if location.depth == len(path.segments):
            if location.row.kind != KEYED:
                raise InvalidRequest(f"{path} is a map; append adds to an array")
            element = self._element(path, value, given=None)
            key = element[self.schema.keying(path).field]  # type: ignore[union-attr]
            if self.row(location.key + SEP + key) is not None:
                raise PreconditionFailed(f"{path}({key}) already exists; set it to replace it. Nothing was written")
            place = path / Key(key)
            return {"set": str(place), "value": self._put(place, element)}
        if location.leaf is not None:
            own = self._leaves(location.key, location.row)
            array = navigate(own[location.leaf], path.segments[location.depth + 1:], path)
            if not isinstance(array, list):
                raise InvalidRequest(f"{path} is a {type(array).__name__}; append adds to an array")
            array.append(check_data(value, path, names=True))
            self._pend_leaves(location.key, own)
            self._written.append(path)
            return {"append": str(path), "value": value}
        return {"set": str(path), "value": self._set(path, [value])}


def check_node(reader: Reader, schema: Schema, path: Path) -> None:
    """The schema's ``required`` and ``minItems`` at ``path`` over the state ``reader`` reads (a draft's, or a
    view of a commit just written); raises :class:`SchemaViolation`."""
    location = locate(reader, path)
    if location.depth < len(path.segments):
        if location.leaf is not None:
            try:
                schema.check_node(path, read_value(reader, path))
            except NotFound:
                pass
        return
    key, row = location.key, location.row
    own = leaves(row) if row.kind == MAP else {}

    def has_child(name: str) -> bool:
        return name in own or reader.row(key + SEP + name) is not None

    def count(at_most: int) -> int:
        total = len(own)
        for child in reader.rows(key, children=True):
            if total >= at_most:
                break
            total += child.kind != GONE
        return total

    schema.check_constraints(path, has_child, count)


def record_key(path: Path) -> str:
    """The storage key of a path made of names and keys only."""
    parts = []
    for segment in path.segments:
        if isinstance(segment, Field):
            parts.append(segment.name)
        elif isinstance(segment, Key):
            parts.append(segment.key)
        else:
            raise NotFound(f"{path}: {segment} is a position inside a dense array, not a record")
    return "".join(SEP + part for part in parts)
