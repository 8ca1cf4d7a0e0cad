"""``--limit NAME=VALUE`` for ``retain logd serve``: every bound of docs/logd.md's tables, by one name each.

The bounds live in three places -- the store's :class:`~retain.logd.settings.Settings` (what one request may
ask), the wire's :class:`~retain.wire.WireLimits` (one document, one connection) and the two transports' timeouts
-- and each has a documented default; an operator changes one without learning which object holds it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import click

__all__ = ["LIMIT_HELP", "LIMITS", "ServerLimits", "parse_limits"]

#: name -> (where it goes, the field there, the kind of value): "settings", "wire", "stream" or "http"
LIMITS: dict[str, tuple[str, str, type]] = {
    "patchOps": ("settings", "max_patch_ops", int),
    "retainRules": ("settings", "max_retain_rules", int),
    "pathLength": ("settings", "max_path_length", int),
    "scopes": ("settings", "max_scopes", int),
    "scopesPerToken": ("settings", "max_scopes_per_token", int),
    "depth": ("wire", "max_depth", int),
    "intDigits": ("wire", "max_int_digits", int),
    "unanswered": ("wire", "max_unanswered", int),
    "unsentBytes": ("wire", "max_unsent", int),
    "heldBytes": ("wire", "max_held", int),
    "inlineBytes": ("wire", "inline_bytes", int),
    "documentSeconds": ("stream", "document", float),
    "idleSeconds": ("stream", "idle", float),
    "httpIdleSeconds": ("http", "idle", float),
    "httpHeadersSeconds": ("http", "headers", float),
    "httpBodySeconds": ("http", "body", float),
}
LIMIT_HELP = ("A bound by its name, NAME=VALUE, repeatable: " + ", ".join(LIMITS)
              + " (docs/logd.md, Backpressure and timeouts; idleSeconds=0: never idle).")


@dataclass(frozen=True)
class ServerLimits:
    """The ``--limit`` values given, grouped by where each goes; what is not given keeps its default."""

    settings: dict[str, Any] = field(default_factory=dict)
    wire: dict[str, Any] = field(default_factory=dict)
    stream: dict[str, Any] = field(default_factory=dict)
    http: dict[str, Any] = field(default_factory=dict)

    def applied(self, defaults: Any, where: str) -> Any:
        """``defaults`` (a frozen dataclass) with this group's values put in; a value it refuses is a usage
        error naming the option."""
        given = getattr(self, where)
        try:
            return dataclasses.replace(defaults, **given) if given else defaults
        except (ValueError, TypeError) as exc:  # the dataclass's own check: InvalidSettings, InvalidInput, ...
            raise click.BadParameter(str(exc), param_hint="'--limit'") from exc


def parse_limits(given: Sequence[str]) -> ServerLimits:
    """``("patchOps=2000", "idleSeconds=60")`` as :class:`ServerLimits`, checked before anything starts.

    Raises:
        click.BadParameter: an unknown name, a missing ``=``, a value that is not a positive number of the
            right kind (``idleSeconds`` may be 0: never idle).
    """
    limits = ServerLimits()
    for text in given:
        name, equals, value = text.partition("=")
        if not equals or name not in LIMITS:
            raise click.BadParameter(f"expected NAME=VALUE with NAME one of {', '.join(LIMITS)} (got {text!r})",
                                     param_hint="'--limit'")
        where, attribute, kind = LIMITS[name]
        try:
            number = kind(value)
        except ValueError:
            number = None
        if number is None or number < 0 or (number == 0 and name != "idleSeconds"):
            raise click.BadParameter(f"{name} is a positive {'whole number' if kind is int else 'number'} "
                                     f"(got {value!r})", param_hint="'--limit'")
        getattr(limits, where)[attribute] = None if name == "idleSeconds" and number == 0 else number
    return limits
