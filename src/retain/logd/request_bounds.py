"""Bounded work: a request larger than the settings' limits is refused before it runs.

One pass over the request's shape, no store I/O: the number of ops in a patch
(``limits.patchOps``), of rules in a retain (``limits.retainRules``), and the length of every
path it names (``limits.pathLength``) -- a get's, a list's, a watch's, each op's, each
precondition's, each rule's. The refusal is :class:`~retain.errors.LimitExceeded`
(``limit_exceeded``) naming the limit and its value. The document's own bounds (size, depth,
integer digits) are the wire's (:class:`~retain.wire.WireLimits`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from retain.errors import LimitExceeded
from retain.logd.settings import Settings

__all__ = ["check_request"]

_OP_VERBS = ("set", "delete", "append")


def check_request(settings: Settings, verb: str, body: dict[str, Any]) -> None:
    """Refuse a request whose size passes one of ``settings``' limits.

    Raises:
        LimitExceeded: naming the limit, its value and what the request asked.
    """
    if verb == "patch":
        _count(body.get("ops"), settings.max_patch_ops, "ops in a patch", "limits.patchOps")
    if verb == "retain":
        _count(body.get("what"), settings.max_retain_rules, "rules in a retain", "limits.retainRules")
    for path in _paths(verb, body):
        if len(path) > settings.max_path_length:
            raise LimitExceeded(f"{verb}: a path of {len(path)} characters ({path[:40]!r}...); the limit "
                                f"limits.pathLength is {settings.max_path_length}")


def _count(items: object, limit: int, what: str, name: str) -> None:
    if isinstance(items, list) and len(items) > limit:
        raise LimitExceeded(f"{len(items)} {what}; the limit {name} is {limit}: split it")


def _paths(verb: str, body: dict[str, Any]) -> Iterator[str]:
    """Every path a request names (what is not a string is the verb's own to refuse)."""
    candidates: list[object] = [body.get("path")]
    if verb == "patch":
        ops = body.get("ops")
        for op in ops if isinstance(ops, list) else ():
            if isinstance(op, dict):
                candidates.extend(op.get(name) for name in _OP_VERBS)
        precondition = body.get("if")
        if isinstance(precondition, dict):
            candidates.extend(precondition)
    if verb == "retain":
        rules = body.get("what")
        for rule in rules if isinstance(rules, list) else ():
            if isinstance(rule, dict):
                candidates.append(rule.get("path"))
    return (path for path in candidates if isinstance(path, str))
