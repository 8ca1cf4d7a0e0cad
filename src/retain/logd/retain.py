"""The retain pass: ageing log-like records out by request, as ordinary precondition-guarded deletes.

A client sends rules and a time; for each rule, in order, the pass

1. reads the rule's container at the head, in the session's view (a scope's, in a scoped
   session), under ``storage.readBudget``;
2. decides with :func:`~retain.logd.retain_rules.select` (pure) which items expired;
3. deletes them whole in commits of at most ``batch`` items through :meth:`Session.patch`,
   each under a precondition asserting per item the timestamp read and the rule's match.
   A batch whose precondition no longer holds wrote nothing: its items count as ``skipped``.

The deletes are plain commits: watchers see them as deltas with the request's author, older
commits still read the records, and the schema applies. Everything is refused before any rule
runs when the request cannot mean what it says (:class:`~retain.errors.InvalidRetain`); an
error in a rule answers for the request and says what the rules before it committed.

Example:
    >>> result = run_retain(store.session(author="verse/ops"), {"now": "2026-09-12T08:00:00Z", "what": [
    ...     {"path": "jobs.*", "match": {"status": "done"}, "age": ".updatedAt", "after": "1d"}]})
    >>> result.to_document()
    {'now': '2026-09-12T08:00:00Z', 'commit': 7, 'deleted': 3, 'rules': [{'path': 'jobs.*', 'deleted': 3}]}
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from retain.errors import InvalidRequest, InvalidRetain, LogdError, NotFound, PreconditionFailed
from retain.logd.ops import Delete
from retain.logd.paths import Field, Path
from retain.clock import format_rfc3339, parse_rfc3339
from retain.logd.retain_rules import RetainRequest, RetainRule, item_pattern, parse_retain, select
from retain.logd.schema import Schema
from retain.logd.storage import KEYED, MAP
from retain.logd.store import Session
from retain.logd.view import View, iter_items, locate, read_value

__all__ = ["BeforeBatch", "RetainResult", "RuleResult", "run_retain"]

#: ``before_batch(rule_index, item_paths)``: called between the read and each batch's delete.
BeforeBatch = Callable[[int, tuple[Path, ...]], None]

_HIDDEN = object()  # an item whose timestamp (or match) lies inside !raw: retain never looks there


@dataclass(frozen=True, slots=True)
class RuleResult:
    """What one rule did. ``deleted + skipped`` are the items it selected; ``unreadable`` items had
    no timestamp it could read. ``read_at`` and ``commits`` stay off the wire."""

    path: str
    deleted: int
    unreadable: int = 0
    skipped: int = 0
    read_at: int = 0
    commits: tuple[int, ...] = ()

    def to_document(self) -> dict[str, Any]:
        """``{path, deleted, unreadable?, skipped?}``: ``deleted`` always, the other two only when not zero."""
        document: dict[str, Any] = {"path": self.path, "deleted": self.deleted}
        if self.unreadable:
            document["unreadable"] = self.unreadable
        if self.skipped:
            document["skipped"] = self.skipped
        return document

    def summary(self) -> str:
        """``jobs.*: 300, 2 unreadable, 1 skipped`` (zero counts left out)."""
        counts = [f"{count} {name}" for count, name in ((self.unreadable, "unreadable"), (self.skipped, "skipped"))
                  if count]
        return ", ".join([f"{self.path}: {self.deleted}", *counts])


@dataclass(frozen=True, slots=True)
class RetainResult:
    """What a retain request did: the ``now`` it aged by, the commit a read sees it all at, per rule."""

    now: datetime
    commit: int
    rules: tuple[RuleResult, ...]

    @property
    def deleted(self) -> int:
        return sum(rule.deleted for rule in self.rules)

    def to_document(self) -> dict[str, Any]:
        """The answer's body in seed 004's shape: ``{now, commit, deleted, rules: [...]}``."""
        return {"now": format_rfc3339(self.now), "commit": self.commit, "deleted": self.deleted,
                "rules": [rule.to_document() for rule in self.rules]}

    @classmethod
    def from_document(cls, document: Mapping[str, Any]) -> RetainResult:
        """Read an answer's body back (a client's view: ``read_at`` and ``commits`` are not on the wire)."""
        now = parse_rfc3339(document["now"])
        if now is None:
            raise InvalidRequest(f"a retain result carries an RFC 3339 now (got {document['now']!r})")
        rules = tuple(RuleResult(rule["path"], rule["deleted"], rule.get("unreadable", 0), rule.get("skipped", 0))
                      for rule in document["rules"])
        return cls(now, document["commit"], rules)

    def summary(self) -> str:
        """One line for a log: ``retain at <now>: deleted 312 (jobs.*: 300, 2 unreadable; events(*): 12), commit 9``."""
        return (f"retain at {format_rfc3339(self.now)}: deleted {self.deleted} "
                f"({'; '.join(rule.summary() for rule in self.rules)}), commit {self.commit}")


def run_retain(session: Session, request: RetainRequest | Mapping[str, Any], *,
               before_batch: BeforeBatch | None = None) -> RetainResult:
    """Run a retain request in ``session``: its view, its scope, its author unless the request names one.

    The request is checked whole first (a body is parsed with
    :func:`~retain.logd.retain_rules.parse_retain`). Without ``now`` it ages by the store's clock,
    read once here; the result carries the ``now`` used. ``before_batch`` is called between the
    read and every batch (tests race a writer there).

    Raises:
        InvalidRetain: the request cannot mean what it says (nothing ran), or a rule disagrees with
            the store (``runs.*`` over a keyed array).
        ReadBudgetExceeded: a rule's container holds more records than ``storage.readBudget``.
        SchemaViolation: the schema forbids a batch's delete.
        Any error after the first rule ran names what the rules before it committed.
    """
    request = parse_retain(request)
    now = request.now if request.now is not None else session.store.clock()
    done: list[RuleResult] = []
    for index, rule in enumerate(request.rules):
        committed: list[tuple[int, int]] = []  # (commit, items) of this rule's batches so far
        try:
            done.append(_run_rule(session, request, index, rule, now, committed, before_batch))
        except LogdError as exc:
            raise _failed(exc, request, index, done, committed) from exc
    commit = max(max((rule.read_at, *rule.commits)) for rule in done)
    return RetainResult(now, commit, tuple(done))


def _run_rule(session: Session, request: RetainRequest, index: int, rule: RetainRule, now: datetime,
              committed: list[tuple[int, int]], before_batch: BeforeBatch | None) -> RuleResult:
    schema = session.store.schema
    view = session.view()
    items = _read(view, rule, schema, session.store.settings.read_budget)
    selection = select(items, rule, now)
    deleted = skipped = 0
    expired = selection.expired
    for start in range(0, len(expired), request.batch):
        batch = expired[start:start + request.batch]
        paths = tuple(rule.item(name) for name, _ in batch)
        if before_batch is not None:
            before_batch(index, paths)
        precondition = {path: item_pattern(rule, stamp) for path, (_, stamp) in zip(paths, batch)}
        try:
            written = session.patch([Delete(path) for path in paths], precondition=precondition,
                                    author=request.author)
        except PreconditionFailed:
            skipped += len(batch)  # the state moved under the pass; asking again reads it afresh
            continue
        committed.append((written.commit, len(batch)))
        deleted += len(batch)
    return RuleResult(str(rule.path), deleted, selection.unreadable, skipped, view.at,
                      tuple(commit for commit, _ in committed))


def _read(view: View, rule: RetainRule, schema: Schema, budget: int) -> Iterator[tuple[str, Any]]:
    """The container's items as ``(name, value)`` pairs in container order, streamed: the pass keeps only
    what it selects. A keyed array's items are named by their keys."""
    container = rule.container
    inside = schema.raw_root(container)
    if inside is not None:
        raise InvalidRetain(f"{rule.path}: {container} is inside the !raw subtree {inside}; retain never looks "
                            "inside !raw")
    try:
        items = iter_items(view, rule.path, budget)
    except NotFound:
        return iter(())  # no container, nothing to age
    except InvalidRequest as exc:
        raise _disagreement(view, rule, exc) from exc
    if any(schema_rule.raw for schema_rule in schema.rules):
        return ((name, _HIDDEN if _needs_raw(schema, rule, name) else value) for name, value in items)
    return items


def _needs_raw(schema: Schema, rule: RetainRule, name: str) -> bool:
    """Whether what the rule reads of an item (its timestamp, its match fields) lies inside !raw."""
    item = rule.item(name)
    age = Path((*item.segments, *(Field(part) for part in rule.age)))
    if schema.raw_root(age) is not None:
        return True
    return any(schema.raw_root(item / Field(field)) is not None for field in rule.match or ())


def _disagreement(view: View, rule: RetainRule, cause: InvalidRequest) -> InvalidRetain:
    """A rule whose wildcard does not fit its container, said with the form that would."""
    container = rule.container
    shape = _shape(view, container)
    if shape == "keyed":
        return InvalidRetain(f"{rule.path}: {container} is a keyed array; write the rule over its elements as "
                             f"{container}(*)")
    if shape == "dense":
        return InvalidRetain(f"{rule.path}: the schema gives {container} no identity: it is a dense array, whose "
                             f"positions shift under every insert and delete. Declare it keyed in the schema "
                             f"(!logd-key FIELD or !logd-auto-id) and write {container}(*)")
    if shape == "map":
        return InvalidRetain(f"{rule.path}: {container or 'the root'} is a map; write the rule over its children as "
                             f"{container}.*")
    return InvalidRetain(f"{rule.path}: {cause}")


def _shape(view: View, container: Path) -> str:
    location = locate(view, container)
    if location.depth == len(container.segments):
        return {MAP: "map", KEYED: "keyed"}.get(location.row.kind, "other")
    try:
        value = read_value(view, container)
    except LogdError:
        return "other"
    return "dense" if isinstance(value, list) else "map" if isinstance(value, dict) else "other"


def _failed(exc: LogdError, request: RetainRequest, index: int, done: list[RuleResult],
            committed: list[tuple[int, int]]) -> LogdError:
    """The same error, saying which rule failed and what the rules before it already committed."""
    rule = request.rules[index]
    ran = "; ".join(f"{result.path} deleted {result.deleted}{_in_commits(result.commits)}" for result in done)
    before = f"The rules before it ran and their deletes are committed: {ran}" if done else \
        "No rule ran before it"
    if committed:
        deleted = sum(items for _, items in committed)
        before += f"; this rule's earlier batches deleted {deleted}{_in_commits(tuple(c for c, _ in committed))}"
    message = f"retain rule {index + 1} of {len(request.rules)} ({rule.path}) failed: {exc}. {before}."
    failed = copy.copy(exc)  # the same class and code, with the context added
    failed.args = (message,)
    return failed


def _in_commits(commits: tuple[int, ...]) -> str:
    if not commits:
        return ""
    if len(commits) == 1:
        return f" (commit {commits[0]})"
    return f" (commits {commits[0]}-{commits[-1]})"

