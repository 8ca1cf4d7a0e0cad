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
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["BASELINE", "GONE", "KEYED", "MAP", "SEP", "Backend", "CommitRecord", "Row", "ScopeRecord"]

SEP = "\x1f"  # below every key character: a node sorts before its descendants, they before its next sibling
GONE, MAP, KEYED = 0, 1, 2
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


@dataclass(frozen=True, slots=True)
class ScopeRecord:
    id: int
    name: str
    created: int  # the head commit when the scope was made


class Backend(Protocol):
    """Rows, commits, scopes and history bookkeeping; no tree logic lives behind it."""

    def transaction(self) -> AbstractContextManager[None]:
        """One atomic, serialised write: every read inside sees the state it will commit over."""

    def head(self) -> tuple[int, float]:
        """The newest commit's number and time, ``(0, 0.0)`` for an empty store."""

    def latest(self, scope: int, key: str, at: int) -> Row | None:
        """The newest version of one record in one scope at or before ``at`` (tombstones included)."""

    def scan(self, scope: int, key: str, at: int, *, children: bool = False, end: str | None = None) -> Iterator[Row]:
        """Newest version at or before ``at`` of each record in ``key``'s subtree (itself included), in key
        order; with ``children`` only its direct children; with ``end``, of every record from ``key`` up to
        ``end`` (exclusive): several siblings' subtrees in one range. Tombstones included."""

    def write(self, record: CommitRecord, rows: Iterable[Row], meta: dict[str, str] | None = None) -> None:
        """Inside a transaction: append the commit, its row versions (rev = its number) and meta changes."""

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

    def prune(self, boundary: int, snapshots: Sequence[int]) -> int:
        """Keep exactly ``snapshots`` below ``boundary``; remove every row version no kept commit (nor any
        commit from ``boundary`` on) reads, baseline tombstones with nothing older, and the deltas of
        commits below ``boundary``. Returns how many row versions went."""

    def reclaim(self) -> None:
        """Return freed space to the file system, so removed versions are gone from disk."""

    def close(self) -> None: ...
