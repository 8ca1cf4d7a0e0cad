"""The retain pass: ageing log-like records out by request, as ordinary precondition-guarded deletes.

A client sends rules and a time; for each rule, in order, the pass

1. reads the rule's container at the head, in the session's view (a scope's, in a scoped
   session), under ``storage.readBudget``, on a snapshot of its own (the writer goes on);
2. decides which items expired: in the backend's SQL (:meth:`~retain.logd.storage.Reads.select_items`,
   reading only the fields the rule names), or, where that SQL cannot say the rule, with the
   pure :func:`~retain.logd.retain_rules.select` over the items read whole -- the same answer;
3. deletes them whole in commits of at most ``batch`` items, each under a guard asserting per
   item the timestamp read and the rule's match: checked by the backend in the statement that
   writes the batch's tombstones (:meth:`~retain.logd.storage.Backend.delete_items`), or, on the
   general path, as a :meth:`Session.patch` precondition. A batch whose guard no longer holds
   wrote nothing: its items are read again afresh (the same ``now``, the same rule), those the rule
   no longer takes are left alone, and the rest are tried again in two halves, each under a guard on
   what that read saw -- halving down to one item, at most :func:`tries` times in all. An item that
   has not been written since the pass read it is alone in its batch by the last of them, and goes;
   only an item that lost every try counts as ``skipped`` (``retried`` counts the items tried again).

The pass is a generator of :class:`Step`\\ s -- one read per rule, one write per batch -- so that
whoever drives it decides where each runs: :func:`run_retain` runs them in place, one after the
other; logd's server runs the reads beside its writer and queues each batch behind the writes
other clients sent meanwhile, so that no client waits for a whole pass.

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
from collections.abc import Callable, Generator, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import Any

from retain.clock import format_rfc3339, parse_rfc3339
from retain.errors import InvalidRequest, InvalidRetain, LogdError, NotFound, PreconditionFailed
from retain.logd.answers import RetainPassResult, RuleResultDocument
from retain.logd.draft import record_key
from retain.logd.patch_ops import Delete
from retain.logd.paths import Field, Path, Wild
from retain.logd.retain_rules import RetainRequest, RetainRule, cutoff, item_pattern, parse_retain, select
from retain.logd.schema import Rule, Schema
from retain.logd.steps import Step, drive
from retain.logd.storage import KEYED, MAP, Reads, Selected, Selection
from retain.logd.store import Session, Written
from retain.logd.view import View, iter_items, leaves, locate, over_budget, read_value

__all__ = ["RETRIES_ALONE", "BeforeBatch", "Pass", "RetainResult", "RuleResult", "retain_pass", "run_retain", "tries"]


#: ``before_batch(rule_index, item_paths)``: called before each delete a rule tries -- a batch, or part of one
#: tried again -- after the read its guard asserts.
BeforeBatch = Callable[[int, tuple[Path, ...]], None]

#: the tries an item still gets once it is alone in its batch: for an item written since the read but still
#: expired, whose every read again may be followed by another write
RETRIES_ALONE = 2

_HIDDEN = object()  # an item whose timestamp (or match) lies inside !raw: retain never looks there


#: A pass: the steps it yields, each sent back its ``run()``'s value; its return value is the result.
Pass = Generator[Step, Any, "RetainResult"]


@dataclass(frozen=True, slots=True)
class RuleResult:
    """What one rule did. ``unreadable`` items had no timestamp it could read. Of the items it selected,
    ``deleted`` went and ``skipped`` lost every try; the rest were written since the read so that the rule no
    longer takes them, and stay. ``retried`` items were read again after their batch's guard failed and tried
    again (each counted once; they are among ``deleted`` and ``skipped``). ``read_at`` and ``commits`` stay off
    the wire."""

    path: str
    deleted: int
    unreadable: int = 0
    skipped: int = 0
    retried: int = 0
    read_at: int = 0
    commits: tuple[int, ...] = ()

    def to_document(self) -> RuleResultDocument:
        """``{path, deleted, unreadable?, skipped?, retried?}``: ``deleted`` always, the others only when not zero."""
        document = RuleResultDocument(path=self.path, deleted=self.deleted)
        if self.unreadable:
            document["unreadable"] = self.unreadable
        if self.skipped:
            document["skipped"] = self.skipped
        if self.retried:
            document["retried"] = self.retried
        return document

    def summary(self) -> str:
        """``jobs.*: 300, 2 unreadable, 1 skipped, 4 retried`` (zero counts left out)."""
        return ", ".join([f"{self.path}: {self.deleted}", *(f"{count} {name}" for name, count in self._counts())])

    def _counts(self) -> list[tuple[str, int]]:
        """The counts the wire carries only when not zero, in their order there."""
        return [(name, count) for name, count in (("unreadable", self.unreadable), ("skipped", self.skipped),
                                                  ("retried", self.retried)) if count]


@dataclass(frozen=True, slots=True)
class RetainResult:
    """What a retain request did: the ``now`` it aged by, the commit a read sees it all at, per rule."""

    now: datetime
    commit: int
    rules: tuple[RuleResult, ...]

    @property
    def deleted(self) -> int:
        return sum(rule.deleted for rule in self.rules)

    def to_document(self) -> RetainPassResult:
        """The answer's body in the braced shape: ``{now, commit, deleted, rules: [...]}``."""
        return {"now": format_rfc3339(self.now), "commit": self.commit, "deleted": self.deleted,
                "rules": [rule.to_document() for rule in self.rules]}

    @classmethod
    def from_document(cls, document: Mapping[str, Any]) -> RetainResult:
        """Read an answer's body back (a client's view: ``read_at`` and ``commits`` are not on the wire)."""
        now = parse_rfc3339(document["now"])
        if now is None:
            raise InvalidRequest(f"a retain result carries an RFC 3339 now (got {document['now']!r})")
        rules = tuple(RuleResult(rule["path"], rule["deleted"], rule.get("unreadable", 0), rule.get("skipped", 0),
                                 rule.get("retried", 0)) for rule in document["rules"])
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
    read and every delete it tries (tests race a writer there). Every step runs here, one after the other.

    Raises:
        InvalidRetain: the request cannot mean what it says (nothing ran), or a rule disagrees with
            the store (``runs.*`` over a keyed array).
        ReadBudgetExceeded: a rule's container holds more records than ``storage.readBudget``.
        SchemaViolation: the schema forbids a batch's delete.
        Any error after the first rule ran names what the rules before it committed.
    """
    return drive(retain_pass(session, request, before_batch=before_batch))


def retain_pass(session: Session, request: RetainRequest | Mapping[str, Any], *,
                before_batch: BeforeBatch | None = None) -> Pass:
    """The pass :func:`run_retain` runs, as :class:`Step`\\ s for a driver of its own (logd's server).

    The request is checked whole here, before any step (raises :class:`~retain.errors.InvalidRetain`).
    """
    request = parse_retain(request)
    return _steps(session, request, before_batch)


def _steps(session: Session, request: RetainRequest, before_batch: BeforeBatch | None) -> Pass:
    store = session.store
    now = request.now if request.now is not None else store.clock()
    done: list[RuleResult] = []
    for index, rule in enumerate(request.rules):
        tally = _Tally()
        try:
            read: _Read = yield Step(partial(_read, session, rule, now), writes=not store.backend.reads_apart)
            expired = read.selection.expired
            hook = None if before_batch is None else partial(before_batch, index)
            for start in range(0, len(expired), request.batch):
                yield from _settle(session, read, expired[start:start + request.batch], request.author, tally, hook)
            if not read.indexed:
                yield from _keep_heads(session, rule)
        except LogdError as exc:
            raise _failed(exc, request, index, done, tally.committed) from exc
        done.append(RuleResult(str(rule.path), sum(items for _, items in tally.committed), read.selection.unreadable,
                               tally.skipped, len(tally.retried), read.at,
                               tuple(commit for commit, _ in tally.committed)))
    commit = max(max((rule.read_at, *rule.commits)) for rule in done)
    return RetainResult(now, commit, tuple(done))


def _keep_heads(session: Session, rule: RetainRule) -> Generator[Step, Any, None]:
    """Once the rule's deletes are in: build what the backend keeps to select it faster next time (a SQLite
    store's heads index), a short write step at a time, so that other clients' writes come between."""
    store, container = session.store, record_key(rule.container)
    while (yield Step(partial(store._keep_heads, container, rule.test), writes=True)):
        pass


def tries(batch: int) -> int:
    """The most deletes a batch of ``batch`` items may try for one item: one per halving down to one item -- so
    that an item nobody writes is alone in its batch by the last of them, where nothing else can fail its
    guard -- and :data:`RETRIES_ALONE` more.

    Example:
        >>> tries(256), tries(1)
        (11, 3)
    """
    return (batch - 1).bit_length() + 1 + RETRIES_ALONE


@dataclass(slots=True)
class _Tally:
    """One rule's deletes so far: ``(commit, items)`` of each committed, the items skipped, the names of those tried
    again."""

    committed: list[tuple[int, int]] = field(default_factory=list)
    skipped: int = 0
    retried: set[str] = field(default_factory=set)
    #: commits ``(first, last]`` that are all this rule's own deletes (none yet: ``first == last``)
    own: tuple[int, int] | None = None

    def since(self, read_at: int) -> int:
        """The latest commit at which marks read at ``read_at`` still say what their items hold: past it, only this
        rule's own deletes may have come, and each removed other items, outside the part's key span (the batches
        and their halves go in key order and never share an item). A backend that finds nothing committed since
        then needs no look at the span."""
        if self.own is None:
            return read_at
        first, last = self.own
        return last if first <= read_at <= last else read_at

    def committed_own(self, commit: int, items: int) -> None:
        """One of this rule's deletes committed as ``commit``: it extends the run of its own commits when it came
        right after the last of them, else (another client committed between) starts a new one."""
        self.committed.append((commit, items))
        assert self.own is not None  # set before the rule's first delete (_settle)
        first, last = self.own
        self.own = (first, commit) if commit == last + 1 else (commit - 1, commit)


def _settle(session: Session, read: _Read, batch: tuple[tuple[str, str], ...], author: str | None, tally: _Tally,
            before: Callable[[tuple[Path, ...]], None] | None) -> Generator[Step, Any, None]:
    """Delete one batch: as one commit under its guard; where the guard fails, read its items again afresh and try
    those the rule still takes in two halves, each under a guard on that read, down to one item, at most
    :func:`tries` times in all. The work is a stack with the first half on top, so items go in container order.
    Each part goes with the commit its marks were read at, and whether records may have lain beneath its items then
    (the read again does not count them)."""
    store = session.store
    if tally.own is None:
        tally.own = (read.at, read.at)
    pending = [(batch, tries(len(batch)), read.at, read.beneath)]
    while pending:
        items, left, since, beneath = pending.pop()
        if before is not None:
            before(tuple(read.rule.item(name) for name, _ in items))
        written: Written | None = yield Step(partial(read.delete, session, items, author, tally.since(since),
                                                     beneath), writes=True)
        if written is not None:
            tally.committed_own(written.commit, len(items))
            continue
        if left == 1:
            tally.skipped += len(items)  # every try lost: asking again reads the items afresh
            continue
        names = tuple(name for name, _ in items)
        again: tuple[int, tuple[tuple[str, str], ...]] | None = yield Step(
            partial(read.again, session, names), writes=not store.backend.reads_apart)
        if again is None:
            tally.skipped += len(items)  # they cannot be judged now (Reads.reselect_items)
            continue
        at, fresh = again
        tally.retried.update(name for name, _ in fresh)
        half = (len(fresh) + 1) // 2
        for part in (fresh[half:], fresh[:half]):
            if part:
                pending.append((part, left - 1, at, True))


@dataclass(frozen=True, slots=True)
class _Read:
    """What a rule read at commit ``at``, aging by ``now``: its selection, and how its batches are deleted -- by the
    backend's guarded statement when the backend selected (``in_sql``), else as patches under preconditions.
    ``beneath``: whether records may lie beneath the items (False: the backend's selection saw none). ``indexed``
    False: the backend would select this rule faster once it built what it keeps for it (:func:`_keep_heads`)."""

    rule: RetainRule
    now: datetime
    selection: Selection
    at: int
    in_sql: bool
    beneath: bool = True
    indexed: bool = True

    def again(self, session: Session, names: tuple[str, ...]) -> tuple[int, tuple[tuple[str, str], ...]] | None:
        """Read the named items afresh, on a snapshot at the head, and select among them as the read did (the same
        ``now``, the same rule): the commit read at, and those the rule still takes, in the order named, each with
        what its guard is to assert now. None when they cannot be judged now (the backend could not read them in
        its SQL)."""
        store, rule = session.store, self.rule
        with store.backend.reading() as reader:
            view = View(reader, reader.head()[0], session.scope_id)
            if not self.in_sql:
                return view.at, select(_named_items(view, rule, store.schema, names), rule, self.now).expired
            fresh = reader.reselect_items(view.scope, record_key(rule.container), view.at, rule.test,
                                          cutoff(self.now, rule.after), names)
            return None if fresh is None else (view.at, fresh)

    def delete(self, session: Session, batch: tuple[tuple[str, str], ...], author: str | None, since: int,
               beneath: bool = True) -> Written | None:
        """One batch as one commit under its guard; None (nothing written) when the guard failed. ``since``: the
        commit its marks were read at; ``beneath`` False: no record lay beneath its items then."""
        if self.in_sql:
            return session.store._delete_items(session, self.rule.container, batch, self.rule.test, author=author,
                                               since=since, beneath=beneath)
        paths = [self.rule.item(name) for name, _ in batch]
        precondition = {path: item_pattern(self.rule, stamp) for path, (_, stamp) in zip(paths, batch, strict=True)}
        try:
            return session.patch([Delete(path) for path in paths], precondition=precondition, author=author)
        except PreconditionFailed:
            return None


def _read(session: Session, rule: RetainRule, now: datetime) -> _Read:
    """Read a rule's container on a snapshot and select: in the backend's SQL where it can say the rule,
    else by reading the items whole and selecting in Python (a ``!raw`` subtree below the container, a
    match the SQL cannot say, a map item kept as a leaf)."""
    store = session.store
    schema, budget = store.schema, store.settings.read_budget
    container = rule.container
    inside = schema.raw_root(container)
    if inside is not None:
        raise InvalidRetain(f"{rule.path}: {container} is inside the !raw subtree {inside}; retain never looks "
                            "inside !raw")
    with store.backend.reading() as reader:
        view = View(reader, reader.head()[0], session.scope_id)
        selected = None if _raw_below(schema, container) else _select_in_sql(reader, view, rule, now, budget)
        if selected is not None:
            return _Read(rule, now, selected.selection, view.at, in_sql=True, beneath=selected.beneath,
                         indexed=selected.indexed)
        return _Read(rule, now, select(_items(view, rule, schema, budget), rule, now), view.at, in_sql=False)


def _select_in_sql(reader: Reads, view: View, rule: RetainRule, now: datetime, budget: int) -> Selected | None:
    """The rule's selection in the backend's SQL, or None where the general path must read the items."""
    container = rule.container
    try:
        location = locate(view, container)
    except InvalidRequest:
        return None  # the general path says how the rule disagrees with the store
    row = location.row
    if location.depth < len(container.segments) or (row.kind, rule.path.last) not in (
            (MAP, Wild("field")), (KEYED, Wild("key"))):
        return None  # no container record, or not the kind the rule names: the general path answers
    # A map's scalar (and list) children are items too: never a timestamp, unless a map was kept as a leaf.
    own = select(leaves(row).items(), rule, now) if row.kind == MAP else Selection((), 0)
    if own.expired:
        return None
    selected = reader.select_items(view.scope, location.key, view.at, rule.test, cutoff(now, rule.after), budget)
    if selected is None:
        return None
    if selected.records >= budget:
        raise over_budget(container, budget)  # with the container record itself, past the budget
    return Selected(Selection(selected.selection.expired, own.unreadable + selected.selection.unreadable),
                    selected.records, selected.beneath, selected.indexed)


def _raw_below(schema: Schema, container: Path) -> bool:
    """Whether a ``!raw`` rule of the schema may apply inside the container's items: their timestamps and
    match fields must then be judged by a reader that knows where ``!raw`` starts."""
    depth = len(container.segments)
    return any(rule.raw and len(rule.pattern.segments) > depth and
               Rule(Path(rule.pattern.segments[:depth])).applies_to(container) for rule in schema.rules)


def _items(view: View, rule: RetainRule, schema: Schema, budget: int) -> Iterator[tuple[str, Any]]:
    """The container's items as ``(name, value)`` pairs in container order, streamed: the pass keeps only
    what it selects. A keyed array's items are named by their keys."""
    try:
        items = iter_items(view, rule.path, budget)
    except NotFound:
        return iter(())  # no container, nothing to age
    except InvalidRequest as exc:
        raise _disagreement(view, rule, exc) from exc
    if any(schema_rule.raw for schema_rule in schema.rules):
        return ((name, _HIDDEN if _needs_raw(schema, rule, name) else value) for name, value in items)
    return items


def _named_items(view: View, rule: RetainRule, schema: Schema, names: tuple[str, ...]) -> Iterator[tuple[str, Any]]:
    """The named items of the container that are still there, as ``(name, value)`` pairs, as :func:`_items` gives
    them (an item whose timestamp or match lies inside ``!raw`` hidden)."""
    raw = any(schema_rule.raw for schema_rule in schema.rules)
    for name in names:
        if raw and _needs_raw(schema, rule, name):
            yield name, _HIDDEN
            continue
        try:
            yield name, read_value(view, rule.item(name))
        except NotFound:
            continue  # deleted since the read: nothing to age


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

