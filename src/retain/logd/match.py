"""The match language: patterns that test structure and equality, nothing else.

- a scalar (null, bool, number, string) matches an equal value; a bool is never
  equal to a number, and ``1`` equals ``1.0``;
- a map pattern matches a map that has every named field, each matching its pattern
  (other fields are ignored);
- a list pattern matches a list of the same length, element by element;
- ``!or [a, b]`` matches what any alternative matches.

No ordering and no clock: the same pattern over the same value always gives the
same answer, which is why preconditions and retain's ``match`` share it.

Example:
    >>> matches({"status": Or(("done", "canceled"))}, {"status": "done", "at": "..."})
    True
"""

from __future__ import annotations

from typing import Any

from retain.errors import InvalidRequest
from retain.wire import Or

__all__ = ["ABSENT", "check_pattern", "matches"]

ABSENT = object()  # the value at a path that does not exist: matches no pattern
_SCALARS = (type(None), bool, int, float, str)


def matches(pattern: Any, value: Any) -> bool:
    """Whether ``value`` matches ``pattern`` (see the module docstring)."""
    if type(pattern) is str:  # the common case first: a string equals only an equal string
        return bool(pattern == value)
    if isinstance(pattern, Or):
        return any(matches(alternative, value) for alternative in pattern.alternatives)
    if value is ABSENT:
        return False
    if isinstance(pattern, dict):
        return isinstance(value, dict) and all(
            name in value and matches(sub, value[name]) for name, sub in pattern.items())
    if isinstance(pattern, list):
        return isinstance(value, list) and len(value) == len(pattern) and all(
            matches(sub, item) for sub, item in zip(pattern, value, strict=True))
    if isinstance(pattern, bool) or isinstance(value, bool):
        return type(pattern) is type(value) and pattern == value
    if isinstance(value, (dict, list)):
        return False
    return bool(pattern == value)


def check_pattern(pattern: Any, where: str) -> Any:
    """Return ``pattern`` if it is made of scalars, maps, lists and ``!or``; else raise.

    Raises:
        InvalidRequest: naming ``where`` and the part that is not a pattern.
    """
    stack = [pattern]
    while stack:
        item = stack.pop()
        if isinstance(item, Or):
            if not item.alternatives:
                raise InvalidRequest(f"{where}: !or needs at least one alternative")
            stack.extend(item.alternatives)
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif not isinstance(item, _SCALARS):
            raise InvalidRequest(f"{where}: {item!r} is not a pattern "
                                 "(expected scalars, maps, lists and !or [...])")
    return pattern
