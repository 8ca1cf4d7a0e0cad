"""The schema: which arrays are keyed, which subtrees are raw, what a delete may not break.

A schema document maps a pattern (a path whose segments may be wildcards anywhere)
to a rule::

    events: !logd-key id                      # keyed array: each element carries its key in `id`
    runs: !logd-auto-id id                    # keyed; the store generates `id` when absent
    blobs.*.doc: !raw                         # carried, not owned: no paths into it, no schema inside
    jobs.*: {required: [status, updatedAt]}   # a job must keep these children
    pinned: {array: !logd-key name, minItems: 1}

A rule is one of the three tags, or a map of ``array`` (``!logd-key``/``!logd-auto-id``),
``raw`` (``!raw`` or ``true``), ``required`` (names of children that must exist) and
``minItems`` (the fewest children a container may keep). An array no rule keys is dense.
Keyed arrays cannot sit inside dense arrays. A write the schema forbids fails whole with
:class:`~retain.errors.SchemaViolation` naming the path and the rule.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from retain import _fields
from retain._fields import Where
from retain.errors import InvalidRequest, SchemaViolation
from retain.logd.paths import Field, Index, Key, Path, Wild, check_key, parse_pattern
from retain.wire import AutoId, LogdKey, Raw

__all__ = ["Keying", "Rule", "Schema", "tag_text"]

Keying = LogdKey | AutoId
_RULE_FIELDS = ("array", "raw", "required", "minItems")


@dataclass(frozen=True, slots=True)
class Rule:
    """One pattern's rule; ``str(rule.pattern)`` is how violations name it."""

    pattern: Path
    array: Keying | None = None
    raw: bool = False
    required: tuple[str, ...] = ()
    min_items: int | None = None

    def applies_to(self, path: Path) -> bool:
        if len(path.segments) != len(self.pattern.segments):
            return False
        return all(_segment_matches(want, got) for want, got in zip(self.pattern.segments, path.segments, strict=True))

    def to_document(self) -> Any:
        doc: dict[str, Any] = {}
        if self.array is not None:
            doc["array"] = self.array
        if self.raw:
            doc["raw"] = Raw()
        if self.required:
            doc["required"] = list(self.required)
        if self.min_items is not None:
            doc["minItems"] = self.min_items
        return doc


@dataclass(frozen=True, slots=True)
class Schema:
    """A parsed schema document; ``Schema()`` is no schema at all (every array dense)."""

    rules: tuple[Rule, ...] = ()

    @classmethod
    def parse(cls, document: Any) -> Schema:
        """Validate a schema document (a map of pattern -> rule).

        Raises:
            InvalidRequest: naming the pattern and what is wrong with its rule.
        """
        if document is None:
            return cls()
        if not isinstance(document, Mapping):
            raise InvalidRequest(f"a schema is a map of pattern -> rule (got {type(document).__name__})")
        return cls(tuple(_parse_rule(pattern, rule) for pattern, rule in document.items()))

    def to_document(self) -> dict[str, Any]:
        return {str(rule.pattern): rule.to_document() for rule in self.rules}

    def matching(self, path: Path) -> Iterator[Rule]:
        return (rule for rule in self.rules if rule.applies_to(path))

    def keying(self, path: Path) -> Keying | None:
        """How the array at ``path`` is keyed, or None for a dense array (or no array)."""
        return next((rule.array for rule in self.matching(path) if rule.array is not None), None)

    def raw_root(self, path: Path) -> Path | None:
        """The raw subtree ``path`` is at or inside, if any."""
        if not any(rule.raw for rule in self.rules):
            return None
        for depth in range(1, len(path.segments) + 1):
            prefix = Path(path.segments[:depth])
            if any(rule.raw for rule in self.matching(prefix)):
                return prefix
        return None

    def check_value(self, path: Path, value: Any) -> None:
        """Check a value about to be written whole at ``path`` against every rule inside it.

        Raises:
            SchemaViolation: naming the path and the rule broken.
        """
        if not self.rules:
            return
        stack = [(path, value)]
        while stack:
            here, node = stack.pop()
            if any(rule.raw for rule in self.matching(here)):
                continue
            self.check_node(here, node)
            if isinstance(node, dict):
                keying = None
                stack.extend((here / Field(name), child) for name, child in node.items())
            elif isinstance(node, list):
                keying = self.keying(here)
                if keying is None:
                    stack.extend((here / Index(i), child) for i, child in enumerate(node))
                else:
                    for child in node:
                        self.check_keyed_element(here, keying, child)
                        stack.append((here / Key(child[keying.field]), child))

    def reaches(self, path: Path) -> bool:
        """Whether any rule could apply at ``path`` or below it (else a write there needs no check)."""
        depth = len(path.segments)
        return any(len(rule.pattern.segments) >= depth and
                   all(map(_segment_matches, rule.pattern.segments[:depth], path.segments))
                   for rule in self.rules)

    def check_node(self, path: Path, node: Any) -> None:
        """Check ``required`` and ``minItems`` of the rules at ``path`` against a materialised node."""
        size = len(node) if isinstance(node, (dict, list)) else 0
        self.check_constraints(path, lambda name: isinstance(node, dict) and name in node,
                               lambda at_most: size)

    def check_constraints(self, path: Path, has_child: Callable[[str], bool], count: Callable[[int], int]) -> None:
        """Check the rules at ``path`` given lazy facts about the node there (for partial reads).

        ``count(at_most)`` may stop counting children once it reaches ``at_most``.
        """
        for rule in self.matching(path):
            for name in rule.required:
                if not has_child(name):
                    raise SchemaViolation(f"{path}: required child {name!r} is missing "
                                          f"(schema rule {rule.pattern}: required {list(rule.required)})")
            if rule.min_items is not None and (got := count(rule.min_items)) < rule.min_items:
                raise SchemaViolation(f"{path}: {got} items, fewer than {rule.min_items} "
                                      f"(schema rule {rule.pattern}: minItems {rule.min_items})")

    def check_keyed_element(self, path: Path, keying: Keying, element: Any) -> None:
        """An element of a keyed array must be a map carrying a valid key in the keying field."""
        if not isinstance(element, dict):
            raise SchemaViolation(f"{path}: elements of a keyed array are maps (got {type(element).__name__}); "
                                  f"schema rule {tag_text(keying)}")
        if keying.field not in element:
            raise SchemaViolation(f"{path}: element lacks its key field {keying.field!r} ({tag_text(keying)})")
        key = element[keying.field]
        if not isinstance(key, str):
            raise SchemaViolation(f"{path}: key field {keying.field!r} must be a string (got {key!r})")
        check_key(key, f"key in {path}")


def tag_text(keying: Keying) -> str:
    """How the keying is written in a schema, for messages."""
    return f"!logd-key {keying.field}" if isinstance(keying, LogdKey) else f"!logd-auto-id {keying.field}"


def _segment_matches(want: Any, got: Any) -> bool:
    if isinstance(want, Wild):
        return {"field": Field, "key": Key, "index": Index}[want.kind] is type(got)
    return bool(want == got)


def _parse_rule(pattern_text: Any, rule: Any) -> Rule:
    pattern = parse_pattern(pattern_text)
    where = f"schema rule {pattern_text!r}"
    if isinstance(rule, (LogdKey, AutoId, Raw)):
        rule = {"raw": True} if isinstance(rule, Raw) else {"array": rule}
    if not isinstance(rule, Mapping):
        raise InvalidRequest(f"{where}: a rule is !logd-key F, !logd-auto-id F, !raw or a map of "
                             f"{', '.join(_RULE_FIELDS)} (got {rule!r})")
    _fields.refuse_unknown(rule, _RULE_FIELDS, Where(where, InvalidRequest))
    array = rule.get("array")
    if array is not None:
        if not isinstance(array, (LogdKey, AutoId)):
            raise InvalidRequest(f"{where}: array must be !logd-key FIELD or !logd-auto-id FIELD (got {array!r})")
        check_key(array.field, f"key field of {where}")
        if any(isinstance(s, Index) or s == Wild("index") for s in pattern.segments):
            raise InvalidRequest(f"{where}: a keyed array cannot sit inside a dense array")
    raw = rule.get("raw", False)
    if isinstance(raw, Raw):
        raw = True
    if not isinstance(raw, bool):
        raise InvalidRequest(f"{where}: raw must be !raw or true/false (got {raw!r})")
    required = rule.get("required", [])
    if not isinstance(required, list) or not all(isinstance(name, str) for name in required):
        raise InvalidRequest(f"{where}: required must be a list of child names (got {required!r})")
    for name in required:
        check_key(name, f"required child of {where}")
    min_items = rule.get("minItems")
    if min_items is not None:
        _fields.whole_number(min_items, "minItems", Where(where, InvalidRequest))
    if raw and (array is not None or required or min_items is not None):
        raise InvalidRequest(f"{where}: a !raw subtree has no schema inside (drop array/required/minItems)")
    return Rule(pattern, array, raw, tuple(required), min_items)
