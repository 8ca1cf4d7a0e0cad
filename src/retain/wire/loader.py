"""YAML read from the parser's event stream: registered tags only, no aliases, bounded depth.

:func:`load_yaml` builds the value with a small non-recursive builder over the events
(libyaml's parser when present), so

- only ``!or``, ``!logd-key``, ``!logd-auto-id``, ``!raw`` and the core scalar and
  collection tags are accepted; any other tag is refused, naming it;
- anchors and aliases are refused (no alias bomb can expand);
- collections nest at most :attr:`~retain.wire.bounds.WireLimits.max_depth` deep;
- plain scalars resolve by the YAML 1.2 core schema: ``null ~`` and the empty scalar,
  ``true false`` (and their capitalised forms), decimal, ``0o`` and ``0x`` integers,
  decimal floats and ``.inf``/``.nan``; everything else -- ``yes``, ``on``, ``1:1:1``
  (YAML 1.1's sexagesimal, whose conversion was quadratic), timestamps -- is a string;
- an integer has at most :attr:`~retain.wire.bounds.WireLimits.max_int_digits` digits, checked
  before it is converted;
- map keys are strings as written (``1: a`` has the key ``"1"``); a duplicate key is refused.

Text that is not YAML at all raises :class:`NotYaml`; YAML that is refused raises
:class:`~retain.errors.InvalidDocument`. :func:`retain.wire.documents.load` is the way in.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import yaml

from retain.errors import InvalidDocument, LimitExceeded
from retain.wire.bounds import WireLimits, check_digits
from retain.wire.tags import TAG_NAMES, Or, build

__all__ = ["NotYaml", "check_depth", "load_yaml"]

_CORE = "tag:yaml.org,2002:"
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


# The YAML 1.2 core schema's plain scalars (https://yaml.org/spec/1.2.2/#1032-tag-resolution).
_NULLS = frozenset({"", "~", "null", "Null", "NULL"})
_BOOLS = {"true": True, "True": True, "TRUE": True, "false": False, "False": False, "FALSE": False}
_INT = re.compile(r"[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+")
_FLOAT = re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?")
_SPECIAL_FLOATS = {".inf": float("inf"), ".Inf": float("inf"), ".INF": float("inf"), "+.inf": float("inf"),
                   "+.Inf": float("inf"), "+.INF": float("inf"), "-.inf": float("-inf"), "-.Inf": float("-inf"),
                   "-.INF": float("-inf"), ".nan": float("nan"), ".NaN": float("nan"), ".NAN": float("nan")}


def _resolve(text: str) -> str:
    """The core schema's tag for a plain scalar."""
    if text in _NULLS:
        return _CORE + "null"
    if text in _BOOLS:
        return _CORE + "bool"
    if _INT.fullmatch(text):
        return _CORE + "int"
    if text in _SPECIAL_FLOATS or _FLOAT.fullmatch(text):
        return _CORE + "float"
    return _CORE + "str"


def _null(text: str, limits: WireLimits) -> None:
    if text not in _NULLS:
        raise ValueError(text)


def _bool(text: str, limits: WireLimits) -> bool:
    return _BOOLS[text]


def _int(text: str, limits: WireLimits) -> int:
    if not _INT.fullmatch(text):
        raise ValueError(text)
    if text.startswith(("0o", "0x")):
        check_digits(text[2:], limits)
        return int(text[2:], 8 if text[1] == "o" else 16)
    check_digits(text, limits)
    return int(text)


def _float(text: str, limits: WireLimits) -> float:
    if text in _SPECIAL_FLOATS:
        return _SPECIAL_FLOATS[text]
    if not _FLOAT.fullmatch(text):
        raise ValueError(text)
    return float(text)


_SCALARS: dict[str, Callable[[str, WireLimits], Any]] = {
    _CORE + "null": _null,
    _CORE + "bool": _bool,
    _CORE + "int": _int,
    _CORE + "float": _float,
    _CORE + "str": lambda text, limits: text,
}
_REGISTERED = ", ".join(TAG_NAMES)


class NotYaml(InvalidDocument):
    """The text is not YAML at all (a syntax error), as opposed to YAML that is refused."""


def check_depth(value: Any, limit: int) -> None:
    """Refuse a loaded value whose collections nest deeper than ``limit`` (without recursing)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            if depth > limit:
                raise InvalidDocument(f"document nests deeper than {limit}")
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))


_KEY = object()  # a map waiting for its next key


def load_yaml(text: str, limits: WireLimits, line_shift: int = 0) -> Any:
    """Build the value from parser events: no recursion, no aliases, registered tags only.

    ``line_shift``: how many lines the text was moved down from the one the sender wrote (errors name theirs).

    Raises:
        NotYaml: the text is not YAML.
        InvalidDocument: the YAML is refused (a tag, an alias, the depth, a duplicate key).
    """
    stack: list[list[Any]] = []  # [container, tag, pending key or _KEY]
    result: list[Any] = []
    documents = 0
    try:
        for event in yaml.parse(text, Loader=_LOADER):
            if isinstance(event, yaml.AliasEvent):
                raise InvalidDocument(f"aliases are refused (*{event.anchor}): write the value out")
            anchor = getattr(event, "anchor", None)
            if anchor is not None:
                raise InvalidDocument(f"anchors are refused (&{anchor}): write each value out")
            if isinstance(event, yaml.DocumentStartEvent):
                documents += 1
                if documents > 1:
                    raise InvalidDocument("one document per request: end each with a line '...'")
            elif isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                if len(stack) >= limits.max_depth:
                    raise InvalidDocument(f"document nests deeper than {limits.max_depth}")
                is_map = isinstance(event, yaml.MappingStartEvent)
                tag = _collection_tag(event.tag, is_map)
                stack.append([{} if is_map else [], tag, _KEY])
            elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                container, tag, _ = stack.pop()
                _add(stack, result, Or(tuple(container)) if tag == "!or" else container, None)
            elif isinstance(event, yaml.ScalarEvent):
                _add(stack, result, _scalar(event, limits), event)
    except yaml.YAMLError as exc:
        raise NotYaml(f"not a YAML or JSON document: {str(exc).splitlines()[0]}"
                      f"{_where(exc, line_shift)}") from None
    return result[0] if result else None


def _where(exc: yaml.YAMLError, line_shift: int) -> str:
    mark = getattr(exc, "problem_mark", None)
    if mark is None:
        return ""
    return f" (line {max(mark.line + 1 - line_shift, 1)}, column {mark.column + 1})"


def _collection_tag(tag: str | None, is_map: bool) -> str | None:
    if tag in (None, "!", _CORE + ("map" if is_map else "seq")):
        return None
    if tag == "!or" and not is_map:
        return tag
    if tag in TAG_NAMES:
        raise InvalidDocument(f"{tag} does not take a {'map' if is_map else 'list'}")
    raise InvalidDocument(f"unknown tag {_shown(tag)}: the registered tags are {_REGISTERED}")


def _shown(tag: str) -> str:
    return tag.replace(_CORE, "!!")


def _scalar(event: yaml.ScalarEvent, limits: WireLimits) -> Any:
    tag, text = event.tag, event.value
    if tag in TAG_NAMES:
        try:
            return build(tag, text)
        except ValueError as exc:
            raise InvalidDocument(str(exc)) from None
    if tag is None or tag == "!":
        plain = event.implicit[0] and tag is None
        tag = _resolve(text) if plain else _CORE + "str"
    construct = _SCALARS.get(tag)
    if construct is None:
        raise InvalidDocument(f"unknown tag {_shown(tag)}: the registered tags are {_REGISTERED}")
    try:
        return construct(text, limits)
    except LimitExceeded:
        raise
    except (ValueError, KeyError):
        raise InvalidDocument(f"{text!r} is not a {_shown(tag)}") from None


def _add(stack: list[list[Any]], result: list[Any], value: Any, event: yaml.ScalarEvent | None) -> None:
    if not stack:
        result.append(value)
        return
    top = stack[-1]
    container = top[0]
    if isinstance(container, list):
        container.append(value)
    elif top[2] is _KEY:
        if event is None:
            raise InvalidDocument("map keys are strings, not maps or lists")
        key = event.value if event.tag is None else value
        if not isinstance(key, (str, int, float, bool)):
            raise InvalidDocument(f"map keys are strings (got {key!r})")
        key = str(key)
        if key in container:
            raise InvalidDocument(f"duplicate key {key!r}")
        top[2] = key
    else:
        container[top[2]] = value
        top[2] = _KEY
