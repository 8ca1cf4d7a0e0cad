"""Answers written in docd's braced spelling (docs/docd.md): braces on one line, one retain rule per line.

::

    {result: {retain: {now: "2026-09-12T08:00:00Z", commit: 4127, deleted: 300, rules: [
      {path: jobs.*, deleted: 300, owner: logd}
      {path: verse.ctl.runs.*, owner: verse.ctl, error: {code: unsupported, message: "unsupported ..."}}
      {path: verse.*, deleted: 0, owner: logd, under: [verse.ctl]}
    ]}}}

For people (the demo, a terminal): YAML flow style, strings plain where they read back
as the same string and double-quoted where they would not (:class:`retain.wire.FlowDumper`). It is not a wire format:
the rules' lines carry no commas, as in docs/docd.md. Any other answer is one flow line.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from retain.wire.dumpers import FlowDumper

__all__ = ["render_answer"]


def _flow(value: Any) -> str:
    text = yaml.dump(value, Dumper=FlowDumper, default_flow_style=True, sort_keys=False, allow_unicode=True,
                     width=float("inf"))
    return text.strip().removesuffix("...").strip()


def render_answer(answer: Mapping[str, object]) -> str:
    """An answer document as docs/logd-retain.md writes it (a retain result one rule per line), ending in a newline."""
    result = answer.get("result") if isinstance(answer, dict) else None
    retain = result.get("retain") if isinstance(result, dict) else None
    if not isinstance(retain, dict) or not isinstance(retain.get("rules"), list):
        return _flow(answer) + "\n"
    head = ", ".join(f"{_flow(name)}: {_flow(value)}" for name, value in retain.items() if name != "rules")
    lines = [f"{{result: {{retain: {{{head}{', ' if head else ''}rules: ["]
    lines += [f"  {_flow(rule)}" for rule in retain["rules"]]
    lines.append("]}}}")
    return "\n".join(lines) + "\n"
