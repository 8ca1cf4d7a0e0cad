"""Paths name places in the document tree: ``jobs.j1.status``, ``events(e42)``, ``list[3]``.

The grammar, strict so that a path means one place or is refused:

- the first segment is a name; each later one is ``.name`` (a map's child),
  ``(key)`` (a keyed-array element) or ``[index]`` (a dense-array position);
- a name or key is 1-128 characters of ``A-Z a-z 0-9 _ - : @ + ~`` (:data:`KEY_CHARS`);
  an index is a decimal integer without leading zeros;
- a wildcard -- ``*``, ``(*)``, ``[*]`` -- may stand only as the last segment
  of a request path (:func:`parse`); a schema pattern may use them anywhere
  (:func:`parse_pattern`);
- ``..``, empty segments and whitespace are refused; at most 64 segments and
  1024 characters.

Example:
    >>> str(parse("events(e42).payload"))
    'events(e42).payload'
    >>> parse("jobs.*").last
    Wild(kind='field')
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass
from typing import Literal

from retain.errors import InvalidPath

__all__ = ["KEY_CHARS", "NAMES", "Field", "Index", "Key", "Path", "ROOT", "Segment", "Wild", "check_key", "is_key",
           "parse", "parse_pattern"]

#: the characters a name or key may use; ``.()[]*`` are the grammar's own.
KEY_CHARS = frozenset(string.ascii_letters + string.digits + "_-:@+~")
MAX_KEY = 128
MAX_SEGMENTS = 64
MAX_PATH = 1024
_MAX_INDEX_DIGITS = 12


@dataclass(frozen=True, slots=True)
class Field:
    """``.name``: a child of a map."""

    name: str

    def __str__(self) -> str:
        return f".{self.name}"


@dataclass(frozen=True, slots=True)
class Key:
    """``(key)``: an element of a keyed array."""

    key: str

    def __str__(self) -> str:
        return f"({self.key})"


@dataclass(frozen=True, slots=True)
class Index:
    """``[index]``: a position in a dense array."""

    index: int

    def __str__(self) -> str:
        return f"[{self.index}]"


@dataclass(frozen=True, slots=True)
class Wild:
    """``*``, ``(*)`` or ``[*]``: every child of a map, keyed array or dense array."""

    kind: Literal["field", "key", "index"]

    def __str__(self) -> str:
        return {"field": ".*", "key": "(*)", "index": "[*]"}[self.kind]


Segment = Field | Key | Index | Wild


@dataclass(frozen=True, slots=True)
class Path:
    """A parsed path; ``Path(())`` is the root. ``str()`` gives the canonical text back."""

    segments: tuple[Segment, ...]

    def __str__(self) -> str:
        text = "".join(str(segment) for segment in self.segments)
        return text[1:] if text.startswith(".") else text

    def __truediv__(self, segment: Segment) -> Path:
        return Path((*self.segments, segment))

    @property
    def parent(self) -> Path:
        return Path(self.segments[:-1])

    @property
    def last(self) -> Segment | None:
        return self.segments[-1] if self.segments else None

    @property
    def is_wild(self) -> bool:
        return isinstance(self.last, Wild)

    def startswith(self, other: Path) -> bool:
        """Whether ``other`` is this path or one of its ancestors."""
        return self.segments[:len(other.segments)] == other.segments


ROOT = Path(())


#: a path of names only (``jobs.j1.status``), the common case, read in one match and one split
NAMES = re.compile(rf"[A-Za-z0-9_:@+~-]{{1,{MAX_KEY}}}(?:\.[A-Za-z0-9_:@+~-]{{1,{MAX_KEY}}}){{0,{MAX_SEGMENTS - 1}}}")


def parse(text: str) -> Path:
    """Parse a request path; a wildcard may only be the last segment.

    Raises:
        InvalidPath: naming the path, the position and what was expected.
    """
    if type(text) is str and len(text) <= MAX_PATH and NAMES.fullmatch(text):
        return Path(tuple(map(Field, text.split("."))))
    path = _parse(text)
    for segment in path.segments[:-1]:
        if isinstance(segment, Wild):
            raise InvalidPath(f"path {text!r}: a wildcard may only be the last segment "
                              f"(found {str(segment).lstrip('.')!r} in the middle)")
    return path


def parse_pattern(text: str) -> Path:
    """Parse a schema pattern: the same grammar, with wildcards allowed in any segment."""
    return _parse(text)


def is_key(key: object) -> bool:
    """Whether ``key`` is a valid name or key (the fast test; :func:`check_key` explains a failure)."""
    return isinstance(key, str) and 0 < len(key) <= MAX_KEY and KEY_CHARS.issuperset(key)


def check_key(key: object, what: str = "key") -> str:
    """Return ``key`` if it is a valid name or key, else raise :class:`InvalidPath` naming the fault."""
    if is_key(key):
        return key  # type: ignore[return-value]
    if not isinstance(key, str):
        raise InvalidPath(f"a {what} must be a string (got {key!r})")
    if not key or len(key) > MAX_KEY:
        raise InvalidPath(f"a {what} must be 1 to {MAX_KEY} characters (got {key!r})")
    for char in key:
        if char not in KEY_CHARS:
            raise InvalidPath(f"{what} {key!r} contains {char!r}: names and keys use A-Z a-z 0-9 _ - : @ + ~")
    return key


def _parse(text: object) -> Path:
    if not isinstance(text, str):
        raise InvalidPath(f"a path must be a string such as 'jobs.j1' (got {text!r})")
    if not text:
        raise InvalidPath("a path must not be empty (expected something like 'jobs.j1')")
    if len(text) > MAX_PATH:
        raise InvalidPath(f"path is {len(text)} characters; at most {MAX_PATH}")
    if ".." in text:
        raise InvalidPath(f"path {text!r}: '..' is refused (a path names a place; there is no parent step)")
    segments: list[Segment] = []
    position = 0
    while position < len(text):
        segment, position = _segment(text, position, first=not segments)
        segments.append(segment)
        if len(segments) > MAX_SEGMENTS:
            raise InvalidPath(f"path {text[:40]!r}...: more than {MAX_SEGMENTS} segments")
    if isinstance(segments[0], (Key, Index)) or segments[0] == Wild("key") or segments[0] == Wild("index"):
        raise InvalidPath(f"path {text!r}: the first segment must be a name (the root is a map)")
    return Path(tuple(segments))


def _segment(text: str, position: int, *, first: bool) -> tuple[Segment, int]:
    """The segment of ``text`` that starts at ``position`` (a ``(key)``, an ``[index]``, or a name after its
    ``.`` unless ``first``), and where the next one starts."""
    char = text[position]
    if char == "(":
        close = _closing(text, position, ")")
        inner = text[position + 1:close]
        return (Wild("key") if inner == "*" else Key(_name(text, inner, position + 1, "key"))), close + 1
    if char == "[":
        close = _closing(text, position, "]")
        inner = text[position + 1:close]
        return (Wild("index") if inner == "*" else Index(_index(text, inner, position + 1))), close + 1
    if not first:
        if char != ".":
            raise InvalidPath(f"path {text!r} at position {position}: expected '.', '(' or '[' "
                              f"after a segment (got {char!r})")
        position += 1
    end = position
    while end < len(text) and text[end] not in ".([":
        end += 1
    name = text[position:end]
    return (Wild("field") if name == "*" else Field(_name(text, name, position, "name"))), end


def _closing(text: str, start: int, close: str) -> int:
    end = text.find(close, start + 1)
    if end < 0:
        raise InvalidPath(f"path {text!r} at position {start}: {text[start]!r} is never closed by {close!r}")
    return end


def _name(text: str, name: str, position: int, what: str) -> str:
    if not name:
        raise InvalidPath(f"path {text!r} at position {position}: empty {what} "
                          f"(expected 1-{MAX_KEY} characters of A-Z a-z 0-9 _ - : @ + ~)")
    if len(name) > MAX_KEY:
        raise InvalidPath(f"path {text!r} at position {position}: a {what} is at most {MAX_KEY} characters")
    for offset, char in enumerate(name):
        if char not in KEY_CHARS:
            where = "a wildcard is '*' alone" if char == "*" else "names and keys use A-Z a-z 0-9 _ - : @ + ~"
            raise InvalidPath(f"path {text!r} at position {position + offset}: {char!r} is not allowed "
                              f"in a {what}; {where}")
    return name


def _index(text: str, digits: str, position: int) -> int:
    if not digits.isascii() or not digits.isdigit() or len(digits) > _MAX_INDEX_DIGITS or \
            (len(digits) > 1 and digits[0] == "0"):
        raise InvalidPath(f"path {text!r} at position {position}: index {digits!r} is not a position "
                          "(expected a decimal integer without leading zeros, or '*')")
    return int(digits)
