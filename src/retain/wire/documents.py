"""The wire: YAML (or JSON) documents with the registered tags, framed on a stream, bounded.

Loading is safe by construction: documents are read from the YAML *event* stream
(libyaml when present) by a small non-recursive builder, so

- only ``!or``, ``!logd-key``, ``!logd-auto-id``, ``!raw`` and the core scalar and
  collection tags are accepted; any other tag is refused, naming it;
- anchors and aliases are refused (no alias bomb can expand);
- a document is at most :attr:`Limits.max_bytes` long and :attr:`Limits.max_depth` deep;
- plain scalars resolve as PyYAML's safe loader does (YAML 1.1), except that a
  timestamp stays a string: the tree holds RFC 3339 strings, not datetimes;
- map keys are strings as written (``1: a`` has the key ``"1"``); a duplicate key is refused.

A document in seed 004's braced shape -- ``{retain: {`` on the first line, block content,
``}}`` on the last -- reads as the block document it stands for (:mod:`retain.wire.braced`),
and as plain YAML only when that fails; :func:`dump_braced` writes answers in that shape.

A document whose text parses as JSON is JSON, with tags spelled ``{"!or": [...]}``
(see :mod:`retain.wire.tags`); it is answered in JSON. Everything else is YAML
(which may use the JSON spelling of a tag too).

On a stream (TCP or Unix socket) each document ends with a line ``...`` -- the YAML
document end marker -- both ways; :class:`Framer` splits a byte stream on it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

import yaml
from yaml.constructor import SafeConstructor
from yaml.nodes import ScalarNode

from retain.errors import InvalidDocument, InvalidRequest, LogdError
from retain.wire.braced import brace, unbrace
from retain.wire.tags import TAG_NAMES, AutoId, LogdKey, Or, Raw, build, from_plain, to_plain

__all__ = ["END", "Format", "Framer", "Limits", "TooLarge", "answer_error", "answer_result", "dump", "dump_braced",
           "frame", "load", "parse_request", "split_documents"]

Format = Literal["yaml", "json"]
END = b"...\n"  # the line that ends a document on a stream
_CORE = "tag:yaml.org,2002:"
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_DUMPER_BASE = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


@dataclass(frozen=True, slots=True)
class Limits:
    """Bounds on one document: its size in bytes and how deeply collections nest."""

    max_bytes: int = 16 * 1024 * 1024
    max_depth: int = 64


class _Resolver(yaml.resolver.BaseResolver):
    """PyYAML's implicit scalar types, minus timestamps, merge keys and ``=``."""


for _first, _resolvers in yaml.resolver.Resolver.yaml_implicit_resolvers.items():
    for _tag, _regexp in _resolvers:
        if _tag in (_CORE + "bool", _CORE + "int", _CORE + "float", _CORE + "null"):
            _Resolver.add_implicit_resolver(_tag, _regexp, [_first])

_RESOLVER = _Resolver()
_CONSTRUCTOR = SafeConstructor()
_SCALARS = {
    _CORE + "null": lambda text: None,
    _CORE + "bool": lambda text: _CONSTRUCTOR.construct_yaml_bool(ScalarNode(_CORE + "bool", text)),
    _CORE + "int": lambda text: _CONSTRUCTOR.construct_yaml_int(ScalarNode(_CORE + "int", text)),
    _CORE + "float": lambda text: _CONSTRUCTOR.construct_yaml_float(ScalarNode(_CORE + "float", text)),
    _CORE + "str": str,
}
_REGISTERED = ", ".join(TAG_NAMES)


def load(data: bytes | str, limits: Limits = Limits()) -> tuple[Any, Format]:
    """Load one document and say which format it was in.

    Raises:
        InvalidDocument: naming what was wrong (size, syntax, tag, alias, depth, duplicate key).
    """
    raw = data.encode() if isinstance(data, str) else bytes(data)
    if len(raw) > limits.max_bytes:
        raise InvalidDocument(f"document is {len(raw)} bytes; at most {limits.max_bytes}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidDocument(f"document is not UTF-8: {exc}") from None
    if not text.strip():
        raise InvalidDocument("empty document: expected a request such as {get: {path: jobs.j1}}")
    if text.lstrip()[:1] in ("{", "["):
        try:
            value = json.loads(text, parse_constant=_refuse_constant)
        except json.JSONDecodeError:
            pass  # not JSON: YAML flow style, read below
        except RecursionError:
            raise InvalidDocument(f"document nests deeper than {limits.max_depth}") from None
        else:
            _check_depth(value, limits.max_depth)
            return from_plain(value), "json"
    braced = unbrace(text)
    if braced is None:
        return from_plain(_load_yaml(text, limits)), "yaml"
    # Braced first: block content in braces is seldom YAML, and when it is, it may not mean what it shows.
    block, line_shift = braced
    try:
        value = _load_yaml(block, limits, line_shift)
    except _NotYaml as not_block:
        try:
            value = _load_yaml(text, limits)  # flow YAML that happens to have the braced shape
        except _NotYaml:
            raise not_block from None
    return from_plain(value), "yaml"


def dump(value: Any, fmt: Format) -> bytes:
    """One document in ``fmt``, without the stream's end line."""
    if fmt == "json":
        return json.dumps(to_plain(value), ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
    return yaml.dump(value, Dumper=_Dumper, sort_keys=False, allow_unicode=True,
                     default_flow_style=False, width=120).encode()


def dump_braced(value: Any) -> str:
    """A YAML document in seed 004's braced shape: ``{result: {retain: {`` + block content + ``}}}``.

    The maps that each hold one map are the braces; what they hold is written as a block, its
    innermost lists and maps in flow style (``- {path: jobs.*, deleted: 300}``), and strings that
    would read as something else in double quotes (``now: "2026-09-12T08:00:00Z"``). :func:`load`
    reads it back. A document of any other shape is written as plain YAML.
    """
    names = []
    while isinstance(value, dict) and len(value) == 1:
        (name, inner), = value.items()
        if not isinstance(inner, dict) or not inner:
            break
        names.append(str(name))
        value = inner
    if not names:
        return dump(value, "yaml").decode()
    return brace(names, value, lambda body: yaml.dump(body, Dumper=_BracedDumper, sort_keys=False,
                                                      allow_unicode=True, default_flow_style=None, width=120))


def frame(value: Any, fmt: Format) -> bytes:
    """One document as it travels on a stream: the document, then the end line."""
    return dump(value, fmt) + END


def split_documents(text: str) -> list[str]:
    """A YAML stream's documents, split on the marker lines ``---`` and ``...``; blank ones dropped."""
    documents, current = [], []
    for line in text.splitlines(keepends=True):
        if line.rstrip() in ("---", "...") or line.startswith("--- "):
            documents.append("".join(current))
            current = [line[4:]] if line.startswith("--- ") else []
        else:
            current.append(line)
    documents.append("".join(current))
    return [document for document in documents if document.strip()]


def parse_request(value: Any) -> tuple[str, dict[str, Any]]:
    """``{verb: {...}}`` -> ``(verb, body)``; an absent body is ``{}``."""
    if not isinstance(value, dict):
        raise InvalidRequest(f"a request is a map {{verb: {{...}}}} (got {_kind(value)})")
    if len(value) != 1:
        raise InvalidRequest(f"a request holds exactly one verb (got {sorted(map(str, value)) or 'none'})")
    (verb, body), = value.items()
    if body is None:
        body = {}
    if not isinstance(body, dict):
        raise InvalidRequest(f"the body of {verb!r} is a map (got {_kind(body)})")
    return str(verb), body


def answer_result(verb: str, result: dict[str, Any]) -> dict[str, Any]:
    return {"result": {verb: result}}


def answer_error(error: LogdError) -> dict[str, Any]:
    return {"error": {"code": error.code, "message": str(error)}}


class TooLarge:
    """What :class:`Framer` yields for a document that outgrew the limit; its bytes were dropped."""

    def __init__(self, size: int) -> None:
        self.size = size


class Framer:
    """Split a byte stream into documents, each ended by a line ``...``; memory stays bounded.

    A document longer than ``max_bytes`` is dropped as it arrives and reported as
    :class:`TooLarge` when its end line comes, so the stream stays in step.
    """

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._buffer = bytearray()
        self._dropped = 0  # bytes of an oversized document dropped so far

    def feed(self, data: bytes) -> list[bytes | TooLarge]:
        self._buffer += data
        found: list[bytes | TooLarge] = []
        while True:
            end = self._end()
            if end is None:
                break
            start, stop = end
            document = bytes(self._buffer[:start])
            del self._buffer[:stop]
            if self._dropped:
                found.append(TooLarge(self._dropped + len(document)))
                self._dropped = 0
            elif len(document) > self.max_bytes:
                found.append(TooLarge(len(document)))
            else:
                found.append(document)
        if len(self._buffer) > self.max_bytes + len(END):
            keep = len(END)  # an end line may straddle the next chunk
            self._dropped += len(self._buffer) - keep
            del self._buffer[:-keep]
        return found

    def _end(self) -> tuple[int, int] | None:
        if self._buffer.startswith(END):
            return 0, len(END)
        index = self._buffer.find(b"\n" + END)
        return None if index < 0 else (index + 1, index + 1 + len(END))


class _Dumper(_DUMPER_BASE):  # type: ignore[misc, valid-type]
    """The safe dumper, plus the registered tags and tuples (as lists)."""


_Dumper.add_representer(Or, lambda d, v: d.represent_sequence("!or", list(v.alternatives), flow_style=True))
_Dumper.add_representer(LogdKey, lambda d, v: d.represent_scalar("!logd-key", v.field))
_Dumper.add_representer(AutoId, lambda d, v: d.represent_scalar("!logd-auto-id", v.field))
_Dumper.add_representer(Raw, lambda d, v: d.represent_scalar("!raw", ""))
_Dumper.add_representer(tuple, lambda d, v: d.represent_list(list(v)))


class _BracedDumper(_Dumper):
    """Strings that would not read back as strings in double quotes, as seed 004 writes them."""


def _represent_str(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    plain = dumper.resolve(ScalarNode, text, (True, False)) == _CORE + "str"
    return dumper.represent_scalar(_CORE + "str", text, style=None if plain else '"')


_BracedDumper.add_representer(str, _represent_str)


class _NotYaml(InvalidDocument):
    """The text is not YAML at all (a syntax error), as opposed to YAML that is refused."""


def _refuse_constant(name: str) -> Any:
    raise InvalidDocument(f"{name} is not JSON: numbers are finite")


def _kind(value: Any) -> str:
    return {dict: "a map", list: "a list", str: "a string", type(None): "nothing"}.get(type(value),
                                                                                     type(value).__name__)


def _check_depth(value: Any, limit: int) -> None:
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            if depth > limit:
                raise InvalidDocument(f"document nests deeper than {limit}")
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))


_KEY = object()  # a map waiting for its next key


def _load_yaml(text: str, limits: Limits, line_shift: int = 0) -> Any:
    """Build the value from parser events: no recursion, no aliases, registered tags only.

    ``line_shift``: how many lines the text was moved down from the one the sender wrote (errors name theirs).
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
                _add(stack, result, _scalar(event), event)
    except yaml.YAMLError as exc:
        raise _NotYaml(f"not a YAML or JSON document: {str(exc).splitlines()[0]}"
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


def _scalar(event: yaml.ScalarEvent) -> Any:
    tag, text = event.tag, event.value
    if tag in TAG_NAMES:
        try:
            return build(tag, text)
        except ValueError as exc:
            raise InvalidDocument(str(exc)) from None
    if tag is None or tag == "!":
        plain = event.implicit[0] and tag is None
        tag = _RESOLVER.resolve(ScalarNode, text, (True, False)) if plain else _CORE + "str"
    construct = _SCALARS.get(tag)
    if construct is None:
        raise InvalidDocument(f"unknown tag {_shown(tag)}: the registered tags are {_REGISTERED}")
    try:
        return construct(text)
    except (ValueError, yaml.YAMLError):
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
