"""A retain request and its rules, checked whole before anything runs; which items a rule expires.

Everything here is pure: :func:`parse_retain` turns a request body into a frozen
:class:`RetainRequest` (or refuses it, :class:`~retain.errors.InvalidRetain`, naming the
rule and the field), :func:`select` decides over the items a pass read, and
:func:`item_pattern` builds the precondition a batch's delete asserts per item.

Example:
    >>> request = parse_retain({"now": "2026-09-12T08:00:00Z", "what": [
    ...     {"path": "jobs.*", "match": {"status": Or(("done", "canceled"))}, "age": ".updatedAt", "after": "1d"}]})
    >>> rule = request.rules[0]
    >>> select([("j1", {"status": "done", "updatedAt": "2026-09-10T08:00:00Z"}),
    ...         ("j2", {"status": "done", "updatedAt": 1789200000})], rule, request.now)
    Selection(expired=(('j1', '2026-09-10T08:00:00Z'),), unreadable=1)

The rules of a rule:

- ``path`` names the children of one container: ``jobs.*`` (a map) or ``events(*)``
  (a keyed array). A path naming one node, a dense array ``[*]``, ``..`` and a
  wildcard anywhere but last are refused;
- ``age`` is a field path into each item, ``.updatedAt`` or nested ``.timing.updatedAt``
  (names only: no keys, positions or wildcards);
- ``after`` is a positive duration (:mod:`retain.durations`: ``1h``, ``90m``, ``1y6w``);
- ``match``, when given, is an object pattern (:mod:`retain.logd.match`) that may not name
  the age field, because a batch's precondition combines the two into one object pattern.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from retain import _fields, durations
from retain._fields import Where
from retain.clock import format_rfc3339, parse_rfc3339
from retain.errors import InvalidInput, InvalidRetain
from retain.logd.match import check_pattern, matches
from retain.logd.paths import Field, Key, Path, Wild, parse
from retain.logd.storage import ItemTest, Selection
from retain.wire import Or

__all__ = ["DEFAULT_BATCH", "RetainRequest", "RetainRule", "Selection", "cutoff", "item_pattern", "parse_retain",
           "select"]

DEFAULT_BATCH = 256
MAX_AUTHOR = 256
REQUEST_FIELDS = ("now", "batch", "author", "what")
RULE_FIELDS = ("path", "match", "age", "after")
_RULE_SHAPE = "{path: jobs.*, match?: {status: done}, age: .updatedAt, after: 1d}"

@dataclass(frozen=True, slots=True)
class RetainRule:
    """One rule: the items of ``path`` whose timestamp at ``age`` is ``after`` old or more, and match ``match``."""

    path: Path
    age: tuple[str, ...]
    after: timedelta
    match: Mapping[str, Any] | None = None

    @property
    def container(self) -> Path:
        return self.path.parent

    @property
    def keyed(self) -> bool:
        """True for ``events(*)``: the elements of a keyed array; False for ``jobs.*``: a map's children."""
        return self.path.last == Wild("key")

    def item(self, name: str) -> Path:
        """The path of one item of the container, by its name or key."""
        return self.container / (Key(name) if self.keyed else Field(name))

    @property
    def test(self) -> ItemTest:
        """What the rule asks of each item, as a backend's SQL answers it."""
        return ItemTest(self.age, self.match)

    def to_document(self) -> dict[str, Any]:
        """The rule in its wire form (tags as tag objects)."""
        document: dict[str, Any] = {"path": str(self.path)}
        if self.match is not None:
            document["match"] = dict(self.match)
        document["age"] = "." + ".".join(self.age)
        document["after"] = durations.format(self.after)
        return document


@dataclass(frozen=True, slots=True)
class RetainRequest:
    """A checked retain request: the rules in the order sent, and how to run them.

    ``now`` is None when the request leaves it to the server's clock.
    """

    rules: tuple[RetainRule, ...]
    now: datetime | None = None
    batch: int = DEFAULT_BATCH
    author: str | None = None

    def to_document(self) -> dict[str, Any]:
        """The request body in its wire form (``{retain: <this>}`` is the request)."""
        document: dict[str, Any] = {}
        if self.now is not None:
            document["now"] = format_rfc3339(self.now)
        document["batch"] = self.batch
        if self.author is not None:
            document["author"] = self.author
        document["what"] = [rule.to_document() for rule in self.rules]
        return document


# -- parsing --------------------------------------------------------------------------------------


def parse_retain(body: Any) -> RetainRequest:
    """Check a retain request body whole: ``{now?, batch?, author?, what: [rules]}``.

    A :class:`RetainRequest` passes through unchanged.

    Raises:
        InvalidRetain: naming the field (and the rule, ``what[1]``) and what was expected.
    """
    if isinstance(body, RetainRequest):
        return body
    if not isinstance(body, Mapping):
        raise InvalidRetain(f"a retain request is a map {{now?, batch?, author?, what: [rules]}} (got {body!r})")
    _fields.refuse_unknown(body, REQUEST_FIELDS, Where("retain", InvalidRetain))
    now = None
    if body.get("now") is not None:
        now = _now(body["now"])
    batch = body.get("batch", DEFAULT_BATCH)
    if type(batch) is not int or batch < 1:
        raise InvalidRetain(f"retain: batch is the most items one delete commit removes, an integer >= 1 "
                            f"(got {batch!r})")
    author = body.get("author")
    if author is not None and (not isinstance(author, str) or not 0 < len(author) <= MAX_AUTHOR):
        raise InvalidRetain(f"retain: author is a string of 1-{MAX_AUTHOR} characters (got {author!r})")
    what = body.get("what")
    if not isinstance(what, Sequence) or isinstance(what, (str, bytes)) or not what:
        raise InvalidRetain(f"retain: what is a non-empty list of rules {_RULE_SHAPE} (got {what!r})")
    rules = tuple(_rule(rule, f"retain what[{index}]") for index, rule in enumerate(what))
    return RetainRequest(rules, now, batch, author)


def _now(value: Any) -> datetime:
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise InvalidRetain(f"retain: now needs a timezone (got {value!r})")
        return value
    instant = parse_rfc3339(value)
    if instant is None:
        raise InvalidRetain(f"retain: now must be an RFC 3339 time such as 2026-09-12T08:00:00Z (got {value!r})")
    return instant


def _rule(rule: Any, where: str) -> RetainRule:
    if not isinstance(rule, Mapping):
        raise InvalidRetain(f"{where}: a rule is a map {_RULE_SHAPE} (got {rule!r})")
    _fields.refuse_unknown(rule, RULE_FIELDS, Where(where, InvalidRetain))
    for name in ("path", "age", "after"):
        if name not in rule:
            raise InvalidRetain(f"{where}: {name} is required; a rule is {_RULE_SHAPE}")
    path = _rule_path(rule["path"], where)
    where = f"{where} ({path})"
    age = _age(rule["age"], where)
    try:
        after = durations.parse(rule["after"])
    except InvalidInput as exc:
        raise InvalidRetain(f"{where}: after must be a positive duration such as 1d, 90m or 1y6w: {exc}") from None
    match = _match(rule.get("match"), age, where)
    return RetainRule(path, age, after, match)


def _rule_path(text: Any, where: str) -> Path:
    try:
        path = parse(text)
    except InvalidInput as exc:
        raise InvalidRetain(f"{where}: {exc}") from None
    last = path.last
    if not isinstance(last, Wild):
        raise InvalidRetain(f"{where}: path {path} names one node; a rule names the children of a container: "
                            f"{path}.* for a map, {path}(*) for a keyed array")
    if last.kind == "index":
        raise InvalidRetain(f"{where}: path {path} is a dense array: a position names a place, not an element, and "
                            f"shifts under every insert and delete. Declare {path.parent} keyed in the schema "
                            f"(!logd-key FIELD or !logd-auto-id) and write {path.parent}(*)")
    return path


def _age(text: Any, where: str) -> tuple[str, ...]:
    expected = "a field path into each item such as .updatedAt or .timing.updatedAt"
    if not isinstance(text, str) or not text.startswith(".") or len(text) < 2:
        raise InvalidRetain(f"{where}: age must be {expected} (got {text!r})")
    if ".." in text:
        raise InvalidRetain(f"{where}: age {text!r}: '..' is refused (a path names a place; there is no parent step)")
    try:
        path = parse(text[1:])
    except InvalidInput as exc:
        raise InvalidRetain(f"{where}: age must be {expected}: {exc}") from None
    if not all(isinstance(segment, Field) for segment in path.segments):
        raise InvalidRetain(f"{where}: age must be {expected}, names only (got {text!r})")
    return tuple(segment.name for segment in path.segments)  # type: ignore[union-attr]


def _match(pattern: Any, age: tuple[str, ...], where: str) -> Mapping[str, Any] | None:
    if pattern is None:
        return None
    if not isinstance(pattern, Mapping):
        shown = "!or [...]" if isinstance(pattern, Or) else repr(pattern)
        raise InvalidRetain(f"{where}: match must be an object such as {{status: !or [done, canceled]}}, so that a "
                            f"batch's precondition can combine it with the timestamp (got {shown})")
    try:
        check_pattern(pattern, f"{where}: match")
    except InvalidInput as exc:
        raise InvalidRetain(str(exc)) from None
    # Walk the age path down the pattern: a map on the way merges; anything else (or its end) names it.
    node: Any = pattern
    for depth, name in enumerate(age):
        if not isinstance(node, Mapping) or name not in node:
            return pattern
        node = node[name]
        if depth == len(age) - 1:
            raise InvalidRetain(f"{where}: match names the age field .{'.'.join(age)}; the age decides by "
                                "time and the precondition asserts the timestamp read: drop it from match")
        if not isinstance(node, Mapping):
            raise InvalidRetain(f"{where}: match tests .{'.'.join(age[:depth + 1])} whole, which holds the age "
                                f"field .{'.'.join(age)}; match its fields as a map instead")
    return pattern


# -- deciding -------------------------------------------------------------------------------------

_MISSING = object()


def timestamp_at(value: Any, age: tuple[str, ...]) -> Any:
    """The value at the age path inside an item, or a sentinel when the path is not there."""
    for name in age:
        if type(value) is not dict:
            return _MISSING
        value = value.get(name, _MISSING)
    return value


def select(items: Iterable[tuple[str, Any]], rule: RetainRule, now: datetime) -> Selection:
    """Which items ``rule`` expires at ``now``: pure, and the same answer for the same input.

    ``items`` are ``(name, value)`` pairs in container order. An item is kept and counted
    unreadable when its timestamp at ``age`` is missing or not RFC 3339 (whether or not
    ``match`` holds); kept when ``now - timestamp < after`` (so a future-dated item never
    expires) or when ``match`` does not hold; the rest are expired, with the timestamp text read.
    """
    before = cutoff(now, rule.after)
    expired: list[tuple[str, str]] = []
    unreadable = 0
    for name, value in items:
        text = timestamp_at(value, rule.age)
        stamped = parse_rfc3339(text)
        if stamped is None:
            unreadable += 1
        elif before is not None and stamped <= before and (rule.match is None or matches(rule.match, value)):
            expired.append((name, text))
    return Selection(tuple(expired), unreadable)


def cutoff(now: datetime, after: timedelta) -> datetime | None:
    """The latest instant an item may carry and expire: ``now - t >= after  <=>  t <= now - after``.
    None when that is before year 1: nothing is that old."""
    try:
        return now - after
    except OverflowError:
        return None


def item_pattern(rule: RetainRule, timestamp: str) -> dict[str, Any]:
    """The object pattern a batch asserts of one item: the rule's match with the timestamp read, merged."""
    pattern: dict[str, Any] = dict(rule.match) if rule.match is not None else {}
    node = pattern
    for name in rule.age[:-1]:
        inner = node.get(name)
        node[name] = dict(inner) if isinstance(inner, Mapping) else {}
        node = node[name]
    node[rule.age[-1]] = timestamp
    return pattern
