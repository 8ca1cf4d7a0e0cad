"""A patch's operations and precondition, parsed from their wire form before anything is read.

- ``{set: PATH, value: V}`` sets a place (creating missing maps on the way);
- ``{delete: PATH}`` removes a place and everything under it;
- ``{append: PATH, value: V}`` adds an element to an array: a keyed array takes the
  key from the element (``!logd-auto-id`` generates one), a dense array grows at the end.

A precondition is a map ``{PATH: pattern}`` in the match language; every entry must hold.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from retain.errors import InvalidRequest
from retain.logd.match import check_pattern
from retain.logd.paths import Path, parse

__all__ = ["Append", "Delete", "Op", "Set", "parse_op", "parse_ops", "parse_precondition"]


@dataclass(frozen=True, slots=True)
class Set:
    path: Path
    value: Any


@dataclass(frozen=True, slots=True)
class Delete:
    path: Path


@dataclass(frozen=True, slots=True)
class Append:
    path: Path
    value: Any


Op = Set | Delete | Append
_SHAPES = "{set: PATH, value: V}, {delete: PATH} or {append: PATH, value: V}"


def parse_op(op: Any, where: str = "op") -> Op:
    """One operation from its wire form (an :data:`Op` passes through)."""
    if isinstance(op, (Set, Delete, Append)):
        return op
    if type(op) is dict and len(op) == 2 and "set" in op and "value" in op:  # the common shape, at once
        return Set(_place(op["set"], where), op["value"])
    if not isinstance(op, Mapping):
        raise InvalidRequest(f"{where}: an op is {_SHAPES} (got {op!r})")
    verbs = [name for name in ("set", "delete", "append") if name in op]
    extra = sorted(set(op) - {"set", "delete", "append", "value"})
    if len(verbs) != 1 or extra:
        raise InvalidRequest(f"{where}: an op is {_SHAPES} (got keys {sorted(op)})")
    verb = verbs[0]
    path = _place(op[verb], where)
    if verb == "delete":
        if "value" in op:
            raise InvalidRequest(f"{where}: a delete takes no value")
        return Delete(path)
    if "value" not in op:
        raise InvalidRequest(f"{where}: {verb} needs a value")
    return Set(path, op["value"]) if verb == "set" else Append(path, op["value"])


def parse_ops(ops: Any) -> tuple[Op, ...]:
    if not isinstance(ops, Sequence) or isinstance(ops, (str, bytes)) or not ops:
        raise InvalidRequest(f"ops must be a non-empty list of {_SHAPES} (got {ops!r})")
    return tuple(parse_op(op, f"ops[{index}]") for index, op in enumerate(ops))


def parse_precondition(precondition: Any) -> tuple[tuple[Path, Any], ...]:
    if precondition is None:
        return ()
    if not isinstance(precondition, Mapping):
        raise InvalidRequest(f"a precondition ('if') is a map of path -> pattern (got {precondition!r})")
    return tuple((_place(text, "if"), check_pattern(pattern, f"if {text}"))
                 for text, pattern in precondition.items())


def _place(text: Any, where: str) -> Path:
    path = text if isinstance(text, Path) else parse(text)
    if path.is_wild:
        raise InvalidRequest(f"{where}: {path} has a wildcard; a write or a precondition names one place")
    return path
