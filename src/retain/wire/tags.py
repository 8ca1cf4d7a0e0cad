"""The four registered tags of the request language, as values.

- ``!or [a, b]`` -> :class:`Or`: a match pattern that holds if any alternative does;
- ``!logd-key id`` -> :class:`LogdKey`: in a schema, an array keyed by each element's ``id``;
- ``!logd-auto-id id`` -> :class:`AutoId`: keyed too, the store generates ``id`` when absent
  (the field defaults to ``id`` when the tag has no value);
- ``!raw`` -> :class:`Raw`: in a schema, a subtree the store carries but does not own.

JSON spells a tag as a one-key map whose key is the tag: ``{"!or": ["done", "canceled"]}``,
``{"!logd-key": "id"}``, ``{"!raw": null}``. Tree keys cannot start with ``!``, so the
spelling never collides with data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["AutoId", "LogdKey", "Or", "Raw", "TAG_NAMES", "build", "from_plain", "spelled", "to_plain"]


@dataclass(frozen=True, slots=True)
class Or:
    """``!or [a, b, ...]``: matches what any alternative matches."""

    alternatives: tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class LogdKey:
    """``!logd-key <field>``: elements carry their key in ``field``."""

    field: str


@dataclass(frozen=True, slots=True)
class AutoId:
    """``!logd-auto-id [<field>]``: keyed by ``field``; generated for an element appended without one."""

    field: str = "id"


@dataclass(frozen=True, slots=True)
class Raw:
    """``!raw``: a subtree the store carries but does not own."""


#: tag text -> the class it builds.
TAG_NAMES: dict[str, type] = {"!or": Or, "!logd-key": LogdKey, "!logd-auto-id": AutoId, "!raw": Raw}


def to_plain(value: Any) -> Any:
    """Spell every tag in ``value`` the JSON way (``{"!or": [...]}``); other values pass through."""
    if isinstance(value, (Or, LogdKey, AutoId, Raw)):
        return to_plain(spelled(value))  # and the tags inside it (an !or's alternatives)
    if isinstance(value, dict):
        return {k: to_plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [to_plain(v) for v in value]
    return value


def spelled(value: Any) -> dict[str, Any]:
    """One tag's JSON spelling, one level deep: a :class:`json.JSONEncoder`'s ``default``, so that an encoder
    spells tags as :func:`to_plain` does without copying the whole value first (it calls this for what it cannot
    encode itself, and again for the tags inside).

    Raises:
        TypeError: ``value`` is no tag (nor anything else JSON carries), as the encoder would.
    """
    if isinstance(value, Or):
        return {"!or": list(value.alternatives)}
    if isinstance(value, (LogdKey, AutoId)):
        return {"!logd-key" if isinstance(value, LogdKey) else "!logd-auto-id": value.field}
    if isinstance(value, Raw):
        return {"!raw": None}
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def from_plain(value: Any) -> Any:
    """Read the JSON spelling back: a one-key map whose key is a registered tag becomes that tag."""
    if isinstance(value, dict):
        if len(value) == 1:
            (name, inner), = value.items()
            if name in TAG_NAMES:
                return build(name, from_plain(inner))
        return {k: from_plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [from_plain(v) for v in value]
    return value


def build(tag: str, value: Any) -> Any:
    """The tag object for ``tag`` applied to ``value`` (a list for !or, a field name or nothing otherwise).

    Raises:
        ValueError: when the value does not fit the tag.
    """
    if tag == "!or":
        if not isinstance(value, list):
            raise ValueError(f"!or takes a list of alternatives (got {value!r})")
        return Or(tuple(value))
    if tag == "!raw":
        if value not in (None, ""):
            raise ValueError(f"!raw takes no value (got {value!r})")
        return Raw()
    if tag == "!logd-auto-id" and value in (None, ""):
        return AutoId()
    if not isinstance(value, str) or not value:
        raise ValueError(f"{tag} takes a field name (got {value!r})")
    return LogdKey(value) if tag == "!logd-key" else AutoId(value)
