"""The braced spelling of the retain request's documents (docs/logd-retain.md): flow braces around block content.

Seed 004 writes a retain request and its answer as::

    {retain: {
      now: "2026-09-12T08:00:00Z"
      what:
      - path: jobs.*
        age: .updatedAt
        after: 1d
    }}

which is not YAML (a flow map may hold no block content), yet reads plainly as the
block document it stands for::

    retain:
      now: "2026-09-12T08:00:00Z"
      what:
      - ...

:func:`unbrace` turns the first into the second. The shape is exact: a first line of one
or more ``{NAME:`` openers ending in ``{`` (a comment may follow), a last line of as many ``}``
as there are ``{``, and between them block content, so no line ends in a comma (a line that
does is flow YAML, read as such). The loader reads a document of this shape as its block form
first: block content inside braces is seldom valid flow YAML, and when it is (one entry),
it means the same, except for slips that flow YAML would read as something else. :func:`brace` writes a
document in that shape, as docs/logd-retain.md prints answers.

Example:
    >>> unbrace('{retain: {\\n  what: []\\n}}\\n')
    ('retain:\\n    what: []\\n', 0)
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["brace", "unbrace"]

_NAME = r"[A-Za-z0-9_-]+"
_HEADER = re.compile(rf"\{{\s*({_NAME})\s*:\s*((?:\{{\s*{_NAME}\s*:\s*)*)\{{\s*(?:#.*)?")
_OPENER = re.compile(rf"\{{\s*({_NAME})\s*:")
_CLOSER = re.compile(r"(\}+)\s*(?:#.*)?")
_INDENT = "  "


def unbrace(text: str) -> tuple[str, int] | None:
    """The block YAML a braced document stands for, and how many lines further down its content
    moved (the header's extra lines, for error positions); None when ``text`` is not in that shape."""
    lines = text.splitlines()
    content = [index for index, line in enumerate(lines) if line.strip() and not line.lstrip().startswith("#")]
    if len(content) < 2:
        return None
    first, last = content[0], content[-1]
    header = _HEADER.fullmatch(lines[first].strip())
    closer = _CLOSER.fullmatch(lines[last].strip())
    if header is None or closer is None:
        return None
    names = [header.group(1), *_OPENER.findall(header.group(2))]
    if len(closer.group(1)) != len(names) + 1:
        return None
    inner = lines[first + 1:last]
    if any(line.split(" #")[0].rstrip().endswith(",") for line in inner):
        return None  # flow content with a slip in it, not block content: let the YAML error stand
    # Lines before the header (blank, comments) stay, so an error's line number moves only by the
    # header's extra lines.
    block = [*lines[:first], *(f"{_INDENT * depth}{name}:" for depth, name in enumerate(names))]
    block += [_INDENT * len(names) + line if line.strip() else "" for line in inner]
    return "\n".join(block) + "\n", len(names) - 1


def brace(names: Sequence[str], value: Any, dump_block: Callable[[Any], str]) -> str:
    """``value`` nested under ``names`` in the braced shape; ``dump_block`` writes the block content.

    ``brace(["result", "retain"], body, dump)`` gives ``{result: {retain: {`` + body's lines, indented
    by two + ``}}}``.
    """
    body = "".join(_INDENT + line if line.strip() else line for line in dump_block(value).splitlines(keepends=True))
    return "{" + ": {".join(names) + ": {\n" + body + "}" * (len(names) + 1) + "\n"
