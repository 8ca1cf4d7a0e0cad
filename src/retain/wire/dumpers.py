"""YAML written: the registered tags and tuples represented, and the one string representer.

- :class:`Dumper`: block YAML for the wire (libyaml's emitter when present); strings as
  the emitter chooses.
- :class:`BracedDumper`: the block content of the braced answers
  (:func:`~retain.wire.documents.dump_braced`), strings by :func:`represent_str`.
- :class:`FlowDumper`: flow YAML for people (docd's rendered answers), strings by
  :func:`represent_str`.

:func:`represent_str` writes a string plain only where a reader takes it back as that
same string, in block or flow context, and in double quotes otherwise -- as docs/logd-retain.md
writes ``now: "2026-09-12T08:00:00Z"`` and ``message: "unsupported operation: ..."``.

Every dumper quotes a string that a YAML 1.1 reader *or* a YAML 1.2 core-schema reader
(:mod:`retain.wire.loader`) would take for something else: ``yes`` (1.1's bool) and
``1e5`` or ``0o17`` (1.2's float and int) alike.
"""

from __future__ import annotations

import io
import re
from typing import Any

import yaml
from yaml.emitter import Emitter
from yaml.nodes import ScalarNode

from retain.wire.tags import AutoId, LogdKey, Or, Raw

__all__ = ["BracedDumper", "Dumper", "FlowDumper", "represent_str"]

_STR = "tag:yaml.org,2002:str"
_BASE = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
# libyaml's emitter cannot be asked how it would write a scalar; Python's can, and the answer
# depends on no state but allow_unicode (every dumper here writes Unicode as it is).
_ANALYZER = Emitter(io.StringIO(), allow_unicode=True)


def represent_str(dumper: Any, text: str) -> ScalarNode:
    """``text`` plain where it reads back as the same string, in block or flow context; else double-quoted.

    ``dumper``: any PyYAML dumper (the C ones too), as a representer is called.
    """
    plain = (dumper.resolve(ScalarNode, text, (True, False)) == _STR
             and _ANALYZER.analyze_scalar(text).allow_flow_plain)
    node: ScalarNode = dumper.represent_scalar(_STR, text, style=None if plain else '"')
    return node


def _represent_tags(dumper: Any) -> None:
    dumper.add_representer(Or, lambda d, v: d.represent_sequence("!or", list(v.alternatives), flow_style=True))
    dumper.add_representer(LogdKey, lambda d, v: d.represent_scalar("!logd-key", v.field))
    dumper.add_representer(AutoId, lambda d, v: d.represent_scalar("!logd-auto-id", v.field))
    dumper.add_representer(Raw, lambda d, v: d.represent_scalar("!raw", ""))
    dumper.add_representer(tuple, lambda d, v: d.represent_list(list(v)))


class Dumper(_BASE):  # type: ignore[misc, valid-type]
    """The safe dumper, plus the registered tags and tuples (as lists)."""


class BracedDumper(Dumper):
    """:class:`Dumper` with strings that would not read back as strings in double quotes."""


class FlowDumper(yaml.SafeDumper):
    """Python's safe dumper (it can write any width), the tags, tuples, and :func:`represent_str`."""


def _quote_core_numbers(dumper: Any) -> None:
    """Resolve YAML 1.2's numbers that 1.1 reads as strings (``1e5``, ``0o17``) as numbers too, so a string
    spelled like one is quoted."""
    dumper.add_implicit_resolver("tag:yaml.org,2002:int", re.compile(r"^0o[0-7]+$"), list("0"))
    dumper.add_implicit_resolver("tag:yaml.org,2002:float",
                                 re.compile(r"^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?$"),
                                 list("-+.0123456789"))


_represent_tags(Dumper)
_represent_tags(FlowDumper)
_quote_core_numbers(Dumper)
_quote_core_numbers(FlowDumper)
BracedDumper.add_representer(str, represent_str)
FlowDumper.add_representer(str, represent_str)
