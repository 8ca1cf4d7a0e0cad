"""The store: commits, reads at any kept commit, sessions with an author and a scope, compaction.

Example:
    >>> store = Store.open(":memory:")
    >>> ops = store.session(author="verse/ops")
    >>> ops.patch([{"set": "jobs.j1", "value": {"status": "running"}}]).commit
    1
    >>> ops.get("jobs.j1.status").value
    'running'

Every write is one commit, numbered 1, 2, 3 ... without gaps across the whole store
(scoped commits included), with the server's time, its author and its delta as
applied. Listeners registered with :meth:`Store.listen` see each commit after it is
durable; the server's watch hub is one. One thread at a time may use a store.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import Any, Generic, TypeVar

from retain._fields import quoted
from retain.clock import format_rfc3339, utc_now
from retain.errors import Compacted, InvalidRequest, LimitExceeded, NotFound
from retain.logd import history
from retain.logd.bulk import NewRecords, as_ops, new_records, places, plan_bulk, read_ahead
from retain.logd.draft import Draft, check_node, record_key
from retain.logd.patch_ops import Delete, Op, parse_ops, parse_precondition
from retain.logd.paths import ROOT, Path, check_key, parse
from retain.logd.postgres import PostgresBackend, is_postgres_url
from retain.logd.schema import Schema
from retain.logd.settings import Settings
from retain.logd.sqlite import SqliteBackend
from retain.logd.steps import Step, drive
from retain.logd.storage import BASELINE, GONE, KEYED, Backend, CommitRecord, ItemTest, Reads, ScopeRecord
from retain.logd.view import View, list_items, read_value
from retain.wire import Token, check_author
from retain.wire.tags import from_plain, to_plain

__all__ = ["PRUNE_RECORDS", "Compaction", "Delta", "Listing", "Outcome", "Read", "ScopeInfo", "Session", "Store",
           "Written", "delta_for", "run_write", "run_writes"]

Clock = Callable[[], datetime]
R = TypeVar("R")
log = logging.getLogger(__name__)

#: records (a key in a scope, with all its versions) one step of a compaction prunes
PRUNE_RECORDS = 10_000


@dataclass(frozen=True, slots=True)
class Written:
    """A write committed as ``commit``."""

    commit: int


@dataclass(frozen=True, slots=True)
class Read:
    """The value at a path, read at ``commit``."""

    commit: int
    value: Any


@dataclass(frozen=True, slots=True)
class Listing:
    """A container's children, read at ``commit``: a map for ``*``, a list for ``(*)`` and ``[*]``."""

    commit: int
    items: Any


@dataclass(frozen=True, slots=True)
class Delta:
    """A commit as a watcher sees it: only the ops that touch the watched prefix."""

    commit: int
    author: str
    time: str
    ops: tuple[dict[str, Any], ...]


@dataclass(frozen=True, slots=True)
class Outcome(Generic[R]):
    """What one write of :meth:`Store.together` came to: its value, or the error it failed with."""

    value: R | None = None
    error: Exception | None = None


@dataclass(frozen=True, slots=True)
class ScopeInfo:
    name: str
    created: int


@dataclass(frozen=True, slots=True)
class Compaction:
    """What a compaction pass did: the new boundary, the snapshots kept below it, versions removed."""

    boundary: int
    snapshots: tuple[int, ...]
    removed: int


class Store:
    """A versioned document tree on a :class:`~retain.logd.storage.Backend`."""

    def __init__(self, backend: Backend, *, settings: Settings | None = None, clock: Clock = utc_now) -> None:
        self.backend = backend
        self.settings = settings or Settings()
        self.clock = clock
        self._generation = -1
        self._revalidate()
        self._listeners: list[Callable[[CommitRecord], None]] = []
        self._published_up_to = self.head  # listeners have been told of every commit up to this one
        self._made_by: dict[str, set[str]] = {}  # token name -> the scopes it made here (some since dropped)
        self._held: list[CommitRecord] | None = None  # inside together(): commits not yet durable, told after
        self._scan_budget: int | None = None  # inside scans_at_most(): the bound on a patch's scans

    @classmethod
    def open(cls, target: str, *, settings: Settings | None = None, clock: Clock = utc_now) -> Store:
        """A store on ``target``: a ``postgresql://user@host:port/db`` URL (the tables made on first open), or a
        SQLite file path, plain or as ``sqlite:PATH`` (made if missing).

        Raises:
            StorageError: the database cannot be opened or holds a newer schema than this retain knows;
                StorageUnavailable when PostgreSQL cannot be reached.
        """
        settings = settings or Settings()
        if is_postgres_url(target):
            return cls(PostgresBackend(target), settings=settings, clock=clock)
        path = target.removeprefix("sqlite:")
        return cls(SqliteBackend(path, synchronous=settings.synchronous, retain_indexes=settings.retain_indexes),
                   settings=settings, clock=clock)

    def _revalidate(self) -> None:
        """Re-read the schema, the compaction boundary and the snapshots if another store changed them since
        this one read them. Called inside the transaction that relies on them (under the head row's lock), and
        before a read checks its commit; with an unshared backend only the first call reads."""
        if self._generation >= 0 and not self.backend.shared:
            return
        generation = self.backend.generation()
        if generation == self._generation:
            return
        schema = self.backend.meta("schema")
        self.schema = Schema.parse(from_plain(json.loads(schema))) if schema else Schema()
        self._boundary = int(self.backend.meta("boundary") or 0)
        self._snapshots = self.backend.snapshots()
        self._generation = generation

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.backend.close()

    @property
    def head(self) -> int:
        return self.backend.head()[0]

    def session(self, author: str = "anonymous", scope: str | None = None, *, maker: Token | None = None) -> Session:
        """A session writing as ``author``; with ``scope``, reading and writing that scope (made if new).

        Making a scope is a write: ``maker`` (the caller's token; None on an open server) needs ``write``, and
        may hold at most ``limits.scopesPerToken`` live scopes it made; the store at most ``limits.scopes``.

        Raises:
            Forbidden: ``maker`` may not write, and the scope is new.
            LimitExceeded: the scope is new and one of the two caps is reached (the refusal names it).
        """
        check_author(author)
        scope_id = BASELINE
        if scope is not None:
            scope_id = self._scope(check_key(scope, "scope name"), maker).id
        return Session(self, author, scope, scope_id)

    def _scope(self, name: str, maker: Token | None) -> ScopeRecord:
        """The live scope ``name``, made if there is none and ``maker`` may make it (on the writer thread)."""
        live = self.backend.scopes()
        found = next((record for record in live if record.name == name), None)
        if found is not None:
            return found
        if maker is not None:
            maker.require("write", f"create the scope {name!r}")
        if len(live) >= self.settings.max_scopes:
            raise LimitExceeded(f"cannot create the scope {name!r}: {len(live)} scopes are live and the limit "
                                f"limits.scopes is {self.settings.max_scopes}; drop one first ({{drop: {{scope: NAME}}}})")
        if maker is not None:
            # Only what is still live counts: a scope dropped since (by anyone) frees its place.
            mine = self._made_by.get(maker.name, set()) & {record.name for record in live}
            if len(mine) >= self.settings.max_scopes_per_token:
                raise LimitExceeded(f"cannot create the scope {name!r}: token {maker.name!r} has made {len(mine)} "
                                    f"live scopes and the limit limits.scopesPerToken is "
                                    f"{self.settings.max_scopes_per_token}; drop one first")
            self._made_by[maker.name] = mine | {name}
        return self.backend.create_scope(name)

    def together(self, writes: Sequence[Callable[[], R]], *,
                 apply: Callable[[Sequence[Callable[[], R]]], list[Outcome[R]]] | None = None) -> list[Outcome[R]]:
        """Run ``writes`` (each makes at most one commit through this store, as a patch does) in order as one
        transaction of the backend (:meth:`~retain.logd.storage.Backend.group`), which syncs once for all of
        them: each its own commit, numbered one after the other, and one that raises -- a failed precondition,
        a schema violation -- fails alone. Nothing is durable, and no listener told, before the whole group
        commits. When the group fails (a write failed after writing, or the commit did), nothing of it is
        stored and the writes run again one by one, each in a transaction of its own: each outcome is then its
        own, as if they had never been grouped. Returns each write's :class:`Outcome`, in order.

        ``apply(writes)``: how the group's writes run inside its transaction, in order, each to its
        :class:`Outcome` (:func:`run_writes`, here, by default); the server's writer has the event loop run
        the small ones while its thread waits (:mod:`retain.logd.writer`)."""
        outcomes: list[Outcome[R]] = []
        held: list[CommitRecord] = []
        self._held = held
        try:
            with self.backend.group():
                outcomes = (apply or run_writes)(writes)
        except Exception:  # the group is lost: none of it is durable, no one was told
            self._generation = -1  # a schema a write set went with it: read what is stored again
            self._revalidate()
            self._held = None
            return run_writes(writes)
        finally:
            self._held = None
        for record in held:
            self._published(record)
        return outcomes

    @contextmanager
    def scans_at_most(self, rows: int) -> Iterator[None]:
        """Within: a patch whose scans (a subtree it replaces or deletes, a schema's check of a container) would
        read more than ``rows`` rows raises :class:`~retain.logd.view.ScanBudgetExceeded` before it writes
        anything, so that one too big for where it runs can run elsewhere instead."""
        self._scan_budget = rows
        try:
            yield
        finally:
            self._scan_budget = None

    def listen(self, listener: Callable[[CommitRecord], None]) -> None:
        """Call ``listener(record)`` after every commit is durable, once each and in commit order -- on a
        shared backend every store's commits, as :meth:`catch_up` finds them in the log."""
        self._published_up_to = self.head
        self._listeners.append(listener)

    def catch_up(self) -> int:
        """Tell the listeners of every commit after the last one they were told of (other servers' commits,
        on a shared backend), in order; returns the commit they have now been told of. Call it from the
        thread that writes (the server's writer), so that it interleaves with this store's own commits."""
        if not self.backend.shared:
            return self._published_up_to
        first = self._published_up_to + 1
        if first > self.backend.head()[0]:
            return self._published_up_to
        for record in self.backend.commits(first, [BASELINE, *(scope.id for scope in self.backend.scopes())]):
            self._tell(record)
        return self._published_up_to

    def scopes(self) -> list[ScopeInfo]:
        return [ScopeInfo(record.name, record.created) for record in self.backend.scopes()]

    def drop_scope(self, name: str) -> None:
        """Drop a scope and every record it holds; the baseline is untouched.

        Raises:
            NotFound: no scope has that name.
        """
        found = [record for record in self.backend.scopes() if record.name == name]
        if not found:
            raise NotFound(f"no scope named {name!r}")
        self.backend.drop_scope(found[0].id)

    # -- history --------------------------------------------------------------------------------

    def compact(self, now: datetime | None = None) -> Compaction:
        """Fold history older than ``compaction.cutoff`` into the kept snapshots; honour the horizon. Every
        step of :meth:`compaction` here, one after the other."""
        return drive(self.compaction(now))

    def compaction(self, now: datetime | None = None) -> Generator[Step, Any, Compaction]:
        """:meth:`compact` as steps, each one transaction on the writer, so that a server runs other
        clients' requests between them: first the new boundary and snapshots (from then on nothing below
        the boundary is read but at a kept snapshot), then the versions no kept commit reads removed
        :data:`PRUNE_RECORDS` records at a time, then the space reclaimed. Steps cut short (a failure, a
        restart) leave versions no read can reach; the next compaction removes them."""
        boundary, snapshots = yield Step(partial(self._move_boundary, now), writes=True)
        removed, after = 0, None
        while True:
            pruned, after = yield Step(partial(self.backend.prune, boundary, after, PRUNE_RECORDS), writes=True)
            removed += pruned
            if after is None:
                break
        yield Step(self.backend.reclaim, writes=True)
        return Compaction(boundary, tuple(snapshots), removed)

    def _move_boundary(self, now: datetime | None) -> tuple[int, list[int]]:
        now_s = (now or self.clock()).timestamp()
        self._revalidate()
        head = self.head
        cutoff = now_s - self.settings.cutoff.total_seconds()
        new = history.boundary(self._boundary, head, self.backend.first_commit_since(cutoff))
        horizon = self.settings.horizon.total_seconds() if self.settings.horizon is not None else None
        picks = [pick for every, since in history.tier_windows(self.settings.tiers, now_s, horizon)
                 for pick in self.backend.last_per_bucket(new, since, every)]
        snapshots = history.choose_snapshots(picks, self._snapshots, self._boundary, new)
        self.backend.move_boundary(new, snapshots)
        self._boundary, self._snapshots = new, snapshots
        return new, snapshots

    def readable(self, at: int | None, head: int | None = None) -> int:
        """The commit a read at ``at`` runs at (the head when None), if history still serves it; ``head``: the
        head as the reader sees it (a snapshot's), else the store's.

        Raises:
            InvalidRequest: ``at`` is not a commit number up to the head.
            Compacted: no kept snapshot serves ``at``; names the nearest kept commits.
        """
        self._revalidate()
        head = self.head if head is None else head
        if at is None:
            return head
        if type(at) is not int or not 1 <= at <= head:
            raise InvalidRequest(f"at must be a commit number from 1 to the head {head} (got {quoted(at)})")
        if at < self._boundary and at not in self._snapshots:
            before, after = history.nearest(self._snapshots, at, self._boundary)
            kept = " and ".join(str(n) for n in (before, after) if n is not None)
            raise Compacted(f"commit {at} is compacted and no kept snapshot serves it; nearest kept: {kept} "
                            f"(every commit from {self._boundary} on is readable)", nearest=(before, after))
        return at

    # -- used by sessions -------------------------------------------------------------------------

    def _commit(self, session: Session, ops: Iterable[Op] | NewRecords,
                precondition: tuple[tuple[Path, Any], ...] = (), *, author: str | None,
                schema: Schema | None = None, plain: bool = False) -> Written:
        """One patch as one commit. With ``plain`` the ops are :data:`~retain.logd.bulk.NewRecords`: written as
        rows when :func:`~retain.logd.bulk.plan_bulk` finds them new records, else parsed for the draft."""
        if author is not None:
            check_author(author)
        when = self.clock().timestamp()
        where = places(list(ops)) if plain else None  # type: ignore[arg-type]
        # What plan_bulk reads first, sent with the lock to a database server (a round trip saved).
        ahead = None
        if where is not None and session.scope_id == BASELINE and not self.backend.local:
            ahead = read_ahead(where)
        with self.backend.transaction(ahead):
            head, last_time = self.backend.head()
            self._revalidate()
            view = View(self.backend, head, session.scope_id, scan_budget=self._scan_budget)
            if where is not None:
                bulk = plan_bulk(view, self.schema, where, self.backend.latest_absent, applied=bool(self._listeners))
                if bulk is not None:  # new records only: their rows as they are, the delta's text built once
                    record = CommitRecord(head + 1, max(when, last_time), author or session.author,
                                          session.scope_id, tuple(bulk.applied), bulk.delta)
                    self.backend.write(record, bulk.rows)
                    return self._durable(record)
                ops = as_ops(where.records)
            draft = Draft(view, schema or self.schema, head + 1)
            ops = tuple(ops)  # type: ignore[arg-type]
            for path in [path for path, _ in precondition] + [op.path for op in ops]:
                view.prefetch(path)  # the records on the way down each place in one read, not one each
            draft.prefetch([path for path, _ in precondition] + [op.path for op in ops if isinstance(op, Delete)])
            draft.precondition(precondition, self.settings.read_budget)
            meta = None
            if schema is not None:
                draft.applied.append({"schema": to_plain(schema.to_document())})
                meta = {"schema": json.dumps(to_plain(schema.to_document()))}
            for op in ops:
                draft.apply(op)
            draft.check()
            # Commit times never run backwards, even when the clock does: eras stay in order.
            record = CommitRecord(head + 1, max(when, last_time), author or session.author, session.scope_id,
                                  tuple(draft.applied))
            self.backend.write(record, draft.rows_to_write(), meta)
        if schema is not None:
            self.schema = schema
        return self._durable(record)

    def _keep_heads(self, container: str, test: ItemTest) -> bool:
        """One step of :meth:`~retain.logd.storage.Backend.keep_heads`, in a transaction of its own; True while more
        remains."""
        with self.backend.transaction():
            return self.backend.keep_heads(container, test)

    def _delete_items(self, session: Session, container: Path, items: Sequence[tuple[str, str]], test: ItemTest, *,
                      author: str | None, since: int | None = None, beneath: bool = True) -> Written | None:
        """A retain batch: delete whole items ``(name, mark)`` of ``container`` (the marks the backend's
        selection gave, read at ``since``) as one commit, each under its guard, checked by the backend in the
        statement that writes the tombstones. None, and nothing written, when a guard failed: the item moved, or
        the container went, since the pass read it. ``beneath`` False: no record lay beneath the items at
        ``since`` (see :meth:`~retain.logd.storage.Backend.delete_items`)."""
        if author is not None:
            check_author(author)
        when = self.clock().timestamp()
        scope = session.scope_id
        container_key = record_key(container)
        try:
            with self.backend.transaction():
                head, last_time = self.backend.head()
                self._revalidate()
                row = View(self.backend, head, scope).row(container_key)
                if row is None or row.kind == GONE or \
                        self.backend.delete_items(scope, container_key, items, test, head, head + 1, since=since,
                                                  beneath=beneath) != len(items):
                    raise _GuardFailed  # rolls the transaction back: nothing of the batch is written
                if any(rule.required or rule.min_items is not None for rule in self.schema.matching(container)):
                    check_node(View(self.backend, head + 1, scope), self.schema, container)
                texts = _item_texts(container, row.kind == KEYED, items)
                # The delta's text is built once, in one join; its ops as objects only for a listener to read.
                ops = tuple([{"delete": text} for text in texts]) if self._listeners else ()
                record = CommitRecord(head + 1, max(when, last_time), author or session.author, scope, ops,
                                      '[{"delete":"' + '"},{"delete":"'.join(texts) + '"}]')
                self.backend.write(record, ())
        except _GuardFailed:
            return None
        return self._durable(record)

    def _durable(self, record: CommitRecord) -> Written:
        """A commit's number once its transaction ended: its listeners told now, or, inside :meth:`together`,
        once the group's transaction is durable."""
        if self._held is not None:
            self._held.append(record)
            return Written(record.number)
        return self._published(record)

    def _published(self, record: CommitRecord) -> Written:
        """Tell every listener of a durable commit -- after the commits before it that other stores made."""
        if self.backend.shared and record.number > self._published_up_to + 1:
            earlier = [BASELINE, *(scope.id for scope in self.backend.scopes())]
            for other in self.backend.commits(self._published_up_to + 1, earlier):
                if other.number >= record.number:
                    break
                self._tell(other)
        self._tell(record)
        return Written(record.number)

    def _tell(self, record: CommitRecord) -> None:
        if record.number <= self._published_up_to:
            return  # told already
        self._published_up_to = record.number
        for listener in self._listeners:
            try:
                listener(record)
            except Exception:  # the commit is durable already; a listener's failure must not undo the answer
                log.exception("logd: commit listener failed on commit %d", record.number)


def run_write(write: Callable[[], R]) -> Outcome[R]:
    """A write run here to its :class:`Outcome`: its value, or the exception it raised."""
    try:
        return Outcome(value=write())
    except Exception as exc:  # that write's own failure, its own answer
        return Outcome(error=exc)


def run_writes(writes: Sequence[Callable[[], R]]) -> list[Outcome[R]]:
    """Each write run here, in order, to its :class:`Outcome` (how :meth:`Store.together` runs them by default)."""
    return [run_write(write) for write in writes]


class _GuardFailed(Exception):
    """A retain batch's guard did not hold (internal: it rolls the batch's transaction back)."""


def _item_texts(container: Path, keyed: bool, items: Sequence[tuple[str, str]]) -> list[str]:
    """The canonical path text of each item (``jobs.j1``, ``events(e1)``), without a Path per item.
    Names are keys, so the texts need no JSON escaping either."""
    prefix = str(container)
    if keyed:
        return [f"{prefix}({name})" for name, _ in items]
    prefix = prefix + "." if prefix else ""
    return [prefix + name for name, _ in items]


class Session:
    """An author and an optional scope; every read and write goes through one."""

    def __init__(self, store: Store, author: str, scope: str | None, scope_id: int,
                 reads: Reads | None = None, read_budget: int | None = None) -> None:
        self.store, self.author, self.scope, self.scope_id = store, author, scope, scope_id
        self.reads = reads  # a snapshot its reads go through, instead of the writer's connection
        #: the most records one get or list may touch: the store's ``read_budget`` unless this is lower
        self.read_budget = min(store.settings.read_budget, read_budget or store.settings.read_budget)

    def on(self, reads: Reads, read_budget: int | None = None) -> Session:
        """This session reading through ``reads`` (a snapshot on a reader thread): its gets and lists do not
        wait for the writer. Writes still go to the writer. ``read_budget``: a lower budget for its reads."""
        return Session(self.store, self.author, self.scope, self.scope_id, reads, read_budget)

    def view(self, at: int | None = None) -> View:
        """The tree as this session sees it at ``at`` (the head when None)."""
        if self.reads is not None:
            return View(self.reads, self.store.readable(at, self.reads.head()[0]), self.scope_id)
        return View(self.store.backend, self.store.readable(at), self.scope_id)

    def patch(self, ops: Iterable[Op | Mapping[str, Any]], *,
              precondition: Mapping[str, Any] | Mapping[Path, Any] | None = None,
              author: str | None = None) -> Written:
        """Apply ``ops`` as one commit if ``precondition`` holds; all or nothing.

        Raises:
            PreconditionFailed: a precondition entry did not hold; nothing was written.
            SchemaViolation: the schema forbids the result; nothing was written.
            NotFound: a delete or a position named nothing.
            InvalidRequest: an op, path or value that cannot mean what it says.
        """
        ops = list(ops)
        if precondition is None and (records := new_records(ops)) is not None:
            return self.store._commit(self, records, author=author, plain=True)
        return self.store._commit(self, parse_ops(ops), parse_precondition(precondition), author=author)

    def set_schema(self, document: Any, *, author: str | None = None) -> Written:
        """Replace the schema; it applies to every later write. The change is a commit."""
        return self.store._commit(self, (), schema=Schema.parse(document), author=author)

    def get(self, path: str | Path | None = None, *, at: int | None = None) -> Read:
        """The value at ``path`` (the whole tree when None) at ``at`` (the head when None)."""
        place = ROOT if path is None else _read_path(path)
        if place.is_wild:
            raise InvalidRequest(f"get names one place; use list for {place}")
        view = self.view(at)
        return Read(view.at, read_value(view, place, self.read_budget))

    def list(self, path: str | Path, *, at: int | None = None) -> Listing:
        """The children of a container: ``jobs.*``, ``events(*)``, ``list[*]``."""
        view = self.view(at)
        return Listing(view.at, list_items(view, _read_path(path), self.read_budget))

    def deltas(self, path: str | Path | None = None, *, first: int | None = None) -> Iterator[Delta]:
        """Commits from ``first`` on (the next one when None) whose delta touches ``path``, in order.

        Raises:
            Compacted: deltas from ``first`` were folded away; read the current state and watch from there.
        """
        prefix = ROOT if path is None else _read_path(path)
        store = self.store
        store._revalidate()
        # On a shared backend the backlog ends where the listeners' commits begin: every commit once.
        last = store.catch_up() if store.backend.shared else None
        start = (last if last is not None else store.head) + 1 if first is None else first
        if type(start) is not int or start < 1:
            raise InvalidRequest(f"from must be a commit number >= 1 (got {first!r})")
        if start < self.store._boundary:
            raise Compacted(f"deltas before commit {self.store._boundary} are compacted; read at the current "
                            f"commit and watch from there", nearest=(None, self.store._boundary))
        scopes = (BASELINE,) if self.scope_id == BASELINE else (BASELINE, self.scope_id)
        for record in self.store.backend.commits(start, scopes):
            if last is not None and record.number > last:
                return
            delta = delta_for(record, prefix)
            if delta is not None:
                yield delta

    def sees(self, record: CommitRecord) -> bool:
        """Whether a commit lands in this session's view (the baseline's, or the baseline's and its scope's)."""
        return record.scope in (BASELINE, self.scope_id)


def delta_for(record: CommitRecord, prefix: Path) -> Delta | None:
    """The commit as a watcher of ``prefix`` sees it, or None when no op touches the prefix."""
    if record.ops is None:
        raise Compacted(f"the delta of commit {record.number} is compacted")
    above = str(prefix)
    touching = tuple(op for op in record.ops if _touches(op, above))
    if not touching:
        return None
    return Delta(record.number, record.author, format_rfc3339(datetime.fromtimestamp(record.time, UTC), timespec="microseconds"), touching)


def _touches(op: dict[str, Any], prefix: str) -> bool:
    """Whether an op's place is at, above or below ``prefix``: compared as canonical path texts, so that a
    watcher of a busy store parses no path a commit names."""
    text = op.get("set") or op.get("delete") or op.get("append")
    if text is None:
        return not prefix  # a schema change concerns a watcher of the whole tree only
    return _at_or_below(text, prefix) or _at_or_below(prefix, text)


def _at_or_below(text: str, above: str) -> bool:
    """Whether the place ``text`` is ``above`` or inside it (a segment of ``text`` begins where ``above`` ends)."""
    return not above or text == above or (text.startswith(above) and text[len(above)] in ".([")


def _read_path(path: str | Path) -> Path:
    return path if isinstance(path, Path) else parse(path)

