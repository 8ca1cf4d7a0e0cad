"""The one narrow interface between the tree logic and whatever stores its rows.

The tree is kept as *records*: one row version per map or keyed-array node, keyed
by ``(scope, key, rev)``. A record's ``value`` is the JSON of its leaf children
(scalars, dense arrays, raw documents); its map and keyed-array children are
records of their own. A ``GONE`` version is a tombstone. Keys are the node's
names joined by :data:`SEP` behind a leading :data:`SEP` (the root is ``""``), so
a subtree is one key range and a scan in key order is a pre-order walk.

Everything above this module (views, drafts, history, the store) talks to a
:class:`Backend` only. :class:`~retain.logd.sqlite.SqliteBackend` is the embedded
one; a PostgreSQL backend implements the same methods and nothing else changes.

Two of them answer a retain rule in the backend's own query language, so that a pass
over a million items never brings them into Python: :meth:`Reads.select_items` decides
which items of a container expire (the same answer as the pure
:func:`~retain.logd.retain_rules.select`, an :class:`ItemTest` saying what it asks of an
item), and :meth:`Backend.delete_items` writes a batch's tombstones under its guard in
one statement. A long read runs on a snapshot of its own (:meth:`Backend.reading`),
beside the writer.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

__all__ = ["BASELINE", "GONE", "KEYED", "MAP", "SEP", "Backend", "CommitRecord", "ItemTest", "ReadAhead", "Reads",
           "Record", "Row", "ScopeRecord", "Selected", "Selection"]

SEP = "\x1f"  # below every key character: a node sorts before its descendants, they before its next sibling
GONE, MAP, KEYED = 0, 1, 2
#: a record's place in the version table, in its order: ``(scope, key)``
Record = tuple[int, str]
BASELINE = 0  # the scope id of the baseline; scopes get 1, 2, ...


@dataclass(frozen=True, slots=True)
class Row:
    """One version of one record as read (the scope and rev are the reader's business)."""

    key: str
    kind: int
    value: str | None = None  # JSON object of leaf children for MAP; None for KEYED and GONE


@dataclass(frozen=True, slots=True)
class CommitRecord:
    """One commit in the log: number, server time (epoch seconds), author, scope, delta.

    ``ops`` is the delta as applied, in wire form; None once compaction folded it away.
    """

    number: int
    time: float
    author: str
    scope: int
    ops: tuple[dict[str, Any], ...] | None
    #: ``ops`` as JSON text, when the writer built it already (a retain batch, a bulk patch): the backend
    #: stores it as given. The writer may then leave ``ops`` empty when no listener will read them.
    delta: str | None = None


@dataclass(frozen=True, slots=True)
class ScopeRecord:
    id: int
    name: str
    created: int  # the head commit when the scope was made


@dataclass(frozen=True, slots=True)
class ItemTest:
    """What a retain rule asks of each item of a container, for a backend to answer in its own SQL.

    An item is a record child of the container (a map's child, a keyed array's element). Its timestamp is
    the value at ``age`` (names, one per level: ``("timing", "at")``); the item is *unreadable* when that is
    missing or not a string :func:`retain.clock.parse_rfc3339` reads (strict RFC 3339: ``T``/``t``, ``Z``/``z``
    or an offset under 24h, fractions truncated to microseconds, no ``:60``, no impossible date, an instant
    inside years 1-9999 in UTC). A readable item *expires* at a cutoff when its instant is at or before the
    cutoff and ``match`` (a map pattern, :mod:`retain.logd.match`; None: any item) holds of it. A batch's
    *guard* holds of an item when the text at ``age`` is still the text the pass read and ``match`` still
    holds: the retain request's precondition, which a writer that touched the item in between makes fail.
    """

    age: tuple[str, ...]
    match: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Selection:
    """What a rule decided over the items it read: those to delete, each with what its guard checks (the
    timestamp text read, or a backend's mark of the version it read), in container order; and how many
    items had no timestamp the pass could read."""

    expired: tuple[tuple[str, str], ...]
    unreadable: int


@dataclass(frozen=True, slots=True)
class ReadAhead:
    """The read a transaction will make first -- :meth:`Backend.latest_absent` of ``parents`` and ``keys`` in
    ``scope``, at the commit the transaction opens on -- for a backend that can send it with the lock (one
    round trip to a database server instead of two). A hint: the read is made all the same."""

    scope: int
    parents: tuple[str, ...]
    keys: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Selected:
    """A backend's selection: :class:`Selection`'s answer, and how many records the read touched.
    ``beneath``: whether any record lay beneath the container's items (False only when the backend
    knows there was none, at the commit read)."""

    selection: Selection
    records: int
    beneath: bool = True
    #: False when the backend would select faster once the pass built what it keeps for the test
    #: (:meth:`Backend.keep_heads`)
    indexed: bool = True


class Reads(Protocol):
    """Reading rows at a commit: what a view and a retain selection need, from the writer or a snapshot."""

    def head(self) -> tuple[int, float]:
        """The newest commit's number and time, ``(0, 0.0)`` for an empty store."""

    def latest(self, scope: int, key: str, at: int) -> Row | None:
        """The newest version of one record in one scope at or before ``at`` (tombstones included)."""

    def latest_of(self, scope: int, keys: Sequence[str], at: int) -> list[Row | None]:
        """:meth:`latest` of each of ``keys``, in their order, in one read (a path's records on the way down)."""

    def scan(self, scope: int, key: str, at: int, *, children: bool = False, end: str | None = None) -> Iterator[Row]:
        """Newest version at or before ``at`` of each record in ``key``'s subtree (itself included), in key
        order; with ``children`` only its direct children; with ``end``, of every record from ``key`` up to
        ``end`` (exclusive): several siblings' subtrees in one range. Tombstones included."""

    def select_items(self, scope: int, container: str, at: int, test: ItemTest, cutoff: datetime | None,
                     limit: int) -> Selected | None:
        """``test`` over every record child of the record ``container`` at ``at``, in the view of ``scope``:
        the expired items in key order, each with a mark :meth:`Backend.delete_items` takes back, and how
        many were unreadable -- the answer :func:`~retain.logd.retain_rules.select` gives over the same items
        (``cutoff`` None: nothing expires). ``records`` counts the visible records of the container's subtree,
        up to ``limit``: at ``limit`` the read stopped there and the selection is not to be used. None when
        this backend cannot say ``test`` in its query language: the caller selects in Python."""

    def reselect_items(self, scope: int, container: str, at: int, test: ItemTest, cutoff: datetime | None,
                       names: Sequence[str]) -> tuple[tuple[str, str], ...] | None:
        """:meth:`select_items` over the items ``names`` of ``container`` only, at ``at``: those ``test`` still
        expires, in the order named, each with the mark :meth:`Backend.delete_items` takes back (a name no longer
        there, or no longer expired, is left out). A retain pass reads a failed batch's items again with it.
        None when this backend cannot say ``test`` in its query language, or cannot read the items now."""


class Backend(Reads, Protocol):
    """Rows, commits, scopes and history bookkeeping; no tree logic lives behind it."""

    #: whether :meth:`reading` gives a connection of its own, so that a long read can run beside the writer
    reads_apart: bool
    #: whether other stores (other servers) may write to the same rows: the store then re-reads what it
    #: caches when :meth:`generation` moved, and publishes every server's commits from the log, in order
    shared: bool
    #: whether a read never waits on a network (a file in this process's page cache): a server may then
    #: answer a small read on its event loop rather than hand it to a reader thread
    local: bool

    def generation(self) -> int:
        """A number that grows whenever the schema, the compaction boundary or the snapshots change
        (always 0 where no other store writes)."""

    def transaction(self, ahead: ReadAhead | None = None) -> AbstractContextManager[None]:
        """One atomic, serialised write: every read inside sees the state it will commit over. ``ahead``: the
        first read it will make, which a backend may send with the lock."""

    def group(self) -> AbstractContextManager[None]:
        """Several :meth:`transaction` s inside as one durable unit where the backend can (one sync for all): each
        one that fails takes back only its own writes. A backend that cannot commits each one alone."""

    def reading(self, *, keep: bool = False) -> AbstractContextManager[Reads]:
        """A snapshot to read from: every read through it sees the same commits. With :attr:`reads_apart` it
        is a connection of its own, used by one thread, while the writer goes on committing. ``keep``: the
        calling thread's connection is kept open for its next read (a server's reader threads)."""

    def write(self, record: CommitRecord, rows: Iterable[Row], meta: dict[str, str] | None = None) -> None:
        """Inside a transaction: append the commit, its row versions (rev = its number) and meta changes."""

    def absent(self, scope: int, keys: Sequence[str], at: int) -> bool:
        """Whether no version of any record in the subtrees of ``keys`` exists at or before ``at``, in
        ``scope`` or the baseline: one read that lets a patch of new records skip looking each one up."""

    def latest_absent(self, scope: int, parents: Sequence[str], keys: Sequence[str],
                      at: int) -> tuple[list[Row | None], bool]:
        """What a patch of new records reads, in one query where the backend can: :meth:`latest` of each of
        ``parents`` in ``scope``, and :meth:`absent` of ``keys``."""

    def delete_items(self, scope: int, container: str, items: Sequence[tuple[str, str]], test: ItemTest,
                     at: int, rev: int, *, since: int | None = None, beneath: bool = True) -> int:
        """Inside a transaction: tombstone (at ``rev``) every visible record of each item ``(name, mark)`` of
        ``container`` whose guard (:class:`ItemTest`, against what the mark says was read) holds at ``at``, in
        ``scope``'s view, writing in ``scope``. Returns how many items' guards held: fewer than ``len(items)``
        means the caller must roll the transaction back. Only for items :meth:`select_items` (or
        :meth:`reselect_items`) selected, in key order. ``since``: a commit at which the marks still say what the items
        hold -- the one they were read at, or a later one when only the caller's own deletes of other items came
        between. A backend may look first whether anything committed since, or changed in the items' key span since
        (nothing did: every guard holds).
        ``beneath`` False: no record lay beneath the items at ``since``; a backend that finds nothing changed
        since may then leave out looking for them."""

    def keep_heads(self, container: str, test: ItemTest) -> bool:
        """Inside a transaction: one step of building what the backend keeps to select ``test`` over the record
        ``container`` faster (a SQLite store's heads index, :mod:`retain.logd.sqlite_heads`); True while more
        remains. A backend that keeps nothing answers False. Changes no record and makes no commit."""

    def commits(self, first: int, scopes: Sequence[int]) -> Iterator[CommitRecord]:
        """Commits numbered ``first`` and later, in order, from the given scopes."""

    def meta(self, name: str) -> str | None: ...

    def scopes(self) -> list[ScopeRecord]: ...

    def create_scope(self, name: str) -> ScopeRecord:
        """The live scope called ``name``, made now if there is none."""

    def drop_scope(self, scope: int) -> None:
        """Remove a scope and every row version it holds; its commits stay in the log."""

    def first_commit_since(self, time: float) -> int | None:
        """The lowest commit number whose time is ``time`` or later."""

    def last_per_bucket(self, below: int, since: float | None, every: float) -> list[int]:
        """For commits numbered below ``below`` and timed ``since`` or later: the last of each
        ``every``-second bucket (buckets aligned to the epoch)."""

    def snapshots(self) -> list[int]: ...

    def move_boundary(self, boundary: int, snapshots: Sequence[int]) -> None:
        """In one transaction: keep exactly ``snapshots`` below ``boundary``, drop the deltas of the commits
        below it, record it. From then on nothing below it is read but at a kept snapshot."""

    def prune(self, boundary: int, after: Record | None, records: int) -> tuple[int, Record | None]:
        """In one transaction, over the next ``records`` records ``(scope, key)`` after ``after`` (from the
        first when None) in key order: remove every row version no kept commit (nor any commit from
        ``boundary`` on) reads, then baseline tombstones with nothing older. Returns how many row versions
        went and the last record it covered (None: no record was left after ``after``)."""

    def reclaim(self) -> None:
        """Return freed space to the file system, so removed versions are gone from disk."""

    def check(self, full: bool = False) -> list[str]:
        """What is damaged in the store, as the database reports it; empty when nothing is. ``full``: every
        check the database has (slow: reads every page and index), else a quick one (run at open)."""

    def close(self) -> None: ...
