"""Documents of the request language: YAML (or JSON) with the registered tags, bounded, in either format.

A document whose text parses as JSON is JSON, with tags spelled ``{"!or": [...]}``
(see :mod:`retain.wire.tags`); it is answered in JSON. Everything else is YAML (which may
use the JSON spelling of a tag too), read safely by :mod:`retain.wire.loader`: registered
tags only, no aliases, at most :attr:`WireLimits.max_bytes` long and :attr:`WireLimits.max_depth` deep.

A document in the braced shape -- ``{retain: {`` on the first line, block content,
``}}`` on the last -- reads as the block document it stands for (:mod:`retain.wire.braced`),
and as plain YAML only when that fails; :func:`dump_braced` writes answers in that shape.

:func:`receive` is what a transport does with what it received (bytes, or a
:class:`~retain.wire.bounds.TooLarge`); :func:`answer_format` is the format it answers a
document in that could not be read.
"""

from __future__ import annotations

import functools
import json
from typing import Any, Literal

import yaml

from retain.errors import InvalidDocument
from retain.wire.bounds import TooLarge, WireLimits, check_digits, refuse_size
from retain.wire.braced import brace, unbrace
from retain.wire.dumpers import BracedDumper, Dumper
from retain.wire.loader import NotYaml, check_depth, load_yaml
from retain.wire.tags import from_plain, spelled

__all__ = ["Format", "answer_format", "dump", "dump_braced", "load", "receive", "split_documents"]

Format = Literal["yaml", "json"]


def load(data: bytes | str, limits: WireLimits = WireLimits()) -> tuple[Any, Format]:
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
            value = _json_decoder(limits).decode(text)
        except json.JSONDecodeError:
            pass  # not JSON: YAML flow style, read below
        except RecursionError:
            raise InvalidDocument(f"document nests deeper than {limits.max_depth}") from None
        else:
            check_depth(value, limits.max_depth)
            return (from_plain(value) if _may_hold_tags(text) else value), "json"
    braced = unbrace(text)
    if braced is None:
        return from_plain(load_yaml(text, limits)), "yaml"
    # Braced first: block content in braces is seldom YAML, and when it is, it may not mean what it shows.
    block, line_shift = braced
    try:
        value = load_yaml(block, limits, line_shift)
    except NotYaml as not_block:
        try:
            value = load_yaml(text, limits)  # flow YAML that happens to have the braced shape
        except NotYaml:
            raise not_block from None
    return from_plain(value), "yaml"


def receive(document: bytes | TooLarge, limits: WireLimits) -> tuple[Any, Format]:
    """A document as a transport received it, loaded; one that outgrew ``limits`` on its way in is refused.

    Raises:
        InvalidDocument: too large, or refused by :func:`load`.
    """
    if isinstance(document, TooLarge):
        raise refuse_size(document, limits)
    return load(document, limits)


def answer_format(document: bytes | TooLarge) -> Format:
    """The format to answer a document in when it cannot be loaded: JSON if it opens as JSON would."""
    if isinstance(document, TooLarge):
        return "yaml"
    return "json" if document.lstrip()[:1] in (b"{", b"[") else "yaml"


def dump(value: Any, fmt: Format) -> bytes:
    """One document in ``fmt``, without the stream's end line."""
    if fmt == "json":
        return _JSON.encode(value).encode() + b"\n"
    return yaml.dump(value, Dumper=Dumper, sort_keys=False, allow_unicode=True,
                     default_flow_style=False, width=120).encode()


def dump_braced(value: Any) -> str:
    """A YAML document in the braced shape: ``{result: {retain: {`` + block content + ``}}}``.

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
    return brace(names, value, lambda body: yaml.dump(body, Dumper=BracedDumper, sort_keys=False,
                                                      allow_unicode=True, default_flow_style=None, width=120))


# Made once (json.dumps with any option set makes an encoder per call); tags spelled as the encoder meets them,
# rather than by a copy of the whole answer (to_plain) first.
_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=spelled)


def _may_hold_tags(text: str) -> bool:
    """Whether a JSON text may spell a tag (``{"!or": ...}``): a key that starts with ``!``, written as it is or
    escaped. Without one, :func:`~retain.wire.tags.from_plain` would copy the value unchanged."""
    return "!" in text or "\\u0021" in text


def split_documents(text: str) -> list[str]:
    """A YAML stream's documents, split on the marker lines ``---`` and ``...``; blank ones dropped."""
    documents: list[str] = []
    current: list[str] = []
    for line in text.splitlines(keepends=True):
        if line.rstrip() in ("---", "...") or line.startswith("--- "):
            documents.append("".join(current))
            current = [line[4:]] if line.startswith("--- ") else []
        else:
            current.append(line)
    documents.append("".join(current))
    return [document for document in documents if document.strip()]


@functools.lru_cache(maxsize=16)
def _json_decoder(limits: WireLimits) -> json.JSONDecoder:
    """The decoder of JSON requests under ``limits``, made once (json.loads with a hook set makes one per call)."""
    return json.JSONDecoder(parse_constant=_refuse_constant, parse_int=lambda digits: _json_int(digits, limits),
                            parse_float=_json_float)


def _refuse_constant(name: str) -> Any:
    raise InvalidDocument(f"{name} is not JSON: numbers are finite")


def _json_int(digits: str, limits: WireLimits) -> int:
    check_digits(digits, limits)
    return int(digits)


def _json_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise InvalidDocument(f"{text[:40]} is out of a float's range: numbers are finite")
    return value
