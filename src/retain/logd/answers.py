"""What each logd verb answers: the ``result`` of ``{result: {verb: result}}``, one ``TypedDict`` a verb.

The server's verbs (:mod:`retain.logd.verbs`) build these and the clients (:mod:`retain.logd.client`) read
them, so both ends of the wire are checked against one shape. A value read from the store (``value``,
``items``, a delta's ops) is any document value; everything around it is typed.
"""

from __future__ import annotations

from typing import Any, TypedDict

__all__ = ["AuthResult", "CommitResult", "CompactResult", "DeltaDocument", "DeltaBody", "DropResult",
           "GetResult", "ListResult", "RetainPassResult", "RuleResultDocument", "SchemaResult", "ScopeEntry",
           "ScopesResult", "SessionResult", "WatchResult"]


class AuthResult(TypedDict):
    """``auth``: the name of the token presented (None on an open server)."""

    name: str | None


class SessionResult(TypedDict):
    """``session``: who the connection now writes as, and in which scope."""

    author: str
    scope: str | None


class CommitResult(TypedDict):
    """``patch``, and ``schema`` with ``set``: the commit written."""

    commit: int


class SchemaResult(TypedDict):
    """``schema`` without ``set``: the schema in force at the head."""

    commit: int
    schema: dict[str, Any]


class GetResult(TypedDict):
    """``get``: the value at the path, read at ``commit``."""

    commit: int
    value: Any


class ListResult(TypedDict):
    """``list``: the container's children at ``commit`` (a map for ``*``, a list for ``(*)`` and ``[*]``)."""

    commit: int
    items: Any


#: ``watch``: the prefix watched, the first commit its deltas carry, the head when it started
#: (``from`` is a Python keyword, hence this form)
WatchResult = TypedDict("WatchResult", {"path": str, "from": int, "commit": int})


class ScopeEntry(TypedDict):
    """One live scope, as ``scopes`` lists it."""

    name: str
    created: int


class ScopesResult(TypedDict):
    """``scopes``: every live scope."""

    scopes: list[ScopeEntry]


class DropResult(TypedDict):
    """``drop``: the scope dropped."""

    scope: str


class CompactResult(TypedDict):
    """``compact``: the commit below which history is gone, the snapshots kept, the versions removed."""

    boundary: int
    snapshots: list[int]
    removed: int


class _RuleRequired(TypedDict):
    path: str
    deleted: int


class RuleResultDocument(_RuleRequired, total=False):
    """One retain rule's outcome: ``deleted`` always, the other counts only when not zero."""

    unreadable: int
    skipped: int
    retried: int


class RetainPassResult(TypedDict):
    """``retain``: the pass's ``now``, its last commit, what it deleted in all and rule by rule."""

    now: str
    commit: int
    deleted: int
    rules: list[RuleResultDocument]


class DeltaBody(TypedDict):
    """A commit as a watcher sees it: only the ops under the watched prefix."""

    commit: int
    author: str
    time: str
    ops: list[dict[str, Any]]


class DeltaDocument(TypedDict):
    """``{delta: ...}``: what a watch pushes, one commit a document."""

    delta: DeltaBody
