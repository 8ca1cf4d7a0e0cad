"""A dry run of one beat: per stream, its length, what the window keeps, what a trim would remove now.

Nothing is written. For an exact (``=``) window the count is exact: the entries
outside the window. An approximate (``~``) window removes whole macro-nodes
only, and no command shows where a stream's nodes begin, so the preview gives
the range the whole nodes must fall in: at most every entry outside the window,
at least that less one node (``stream-node-max-entries``, read from the server).
Probing a copy of the stream would give the exact figure, but a copy doubles
the stream's memory on the server for an instant, which a dry run must not risk.

Example:
    >>> for row in preview(conn, policy, now=datetime.now(timezone.utc)):
    ...     print(row.describe())
    emq:{codemojex}:stream:activity  MAXLEN ~ 10000  length 25000  keeps 10000  a trim now removes 14901 to 15000 (whole nodes of at most 100 entries)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import redis.exceptions

from retain._redis import map_error
from retain.errors import RetainError
from retain.streams.policy import Policy, PolicyEntry, TrimCall, decide
from retain.windows import MaxLen, MinId

__all__ = ["StreamPreview", "approx_removes_at_least", "preview"]

#: entries read per XRANGE page when counting what lies before a MINID floor
PAGE = 10_000


@dataclass(frozen=True)
class StreamPreview:
    """What one stream's trim would do now, without doing it."""

    key: str
    #: the window as a beat would send it (an age resolved against ``now``)
    window: MaxLen | MinId
    length: int = 0
    #: entries outside the window: exactly what ``=`` removes, the most ``~`` can
    outside: int = 0
    #: the least a trim removes now: ``outside`` for ``=``, whole nodes for ``~``
    at_least: int = 0
    #: the reading of ``stream-node-max-entries`` behind ``at_least`` (None: unknown)
    node_entries: int | None = None
    #: the error reading the stream met (WRONGTYPE, ...); the figures are then zero
    error: RetainError | None = None

    @property
    def keeps(self) -> int:
        """Entries inside the window."""
        return self.length - self.outside

    def describe(self) -> str:
        """One line for people."""
        head = f"{self.key}  {self.window.describe()}"
        if self.error is not None:
            return f"{head}  error: {self.error}"
        if self.at_least == self.outside:
            removes = f"{self.outside}"
        else:
            removes = f"{self.at_least} to {self.outside} (whole nodes of at most {self.node_entries} entries)"
        return f"{head}  length {self.length}  keeps {self.keeps}  a trim now removes {removes}"


def approx_removes_at_least(window: MaxLen | MinId, outside: int, node_entries: int | None) -> int:
    """The least a ``~`` trim removes when ``outside`` entries lie outside ``window``.

    A ``~`` trim removes head nodes while the whole node lies outside the window:
    for MAXLEN it stops at the first node whose removal would leave fewer than
    ``count``, so fewer than one node's entries (at most ``node_entries - 1``) stay
    outside; for MINID it keeps the node holding the floor, whose entries before
    the floor number at most ``node_entries`` (one less unless its last entry was
    deleted). With no entry limit (0) or an unknown one, the least is 0.
    """
    if not window.approx:
        return outside
    if not node_entries or node_entries <= 0:
        return 0
    may_stay = node_entries - 1 if isinstance(window, MaxLen) else node_entries
    return max(0, outside - may_stay)


def preview(conn: Any, policy: Policy | Iterable[PolicyEntry], *, now: datetime) -> tuple[StreamPreview, ...]:
    """Read, never write: what each stream's trim in one beat at ``now`` would remove.

    Reads ``XLEN`` per stream, pages through ``XRANGE`` below a MINID floor to
    count what lies there, and ``CONFIG GET stream-node-max-entries`` once (a
    server that refuses CONFIG gives a lower bound of 0 for ``~``). A stream whose
    reads fail carries the error; the others are still previewed.

    Raises:
        InvalidPolicy, InvalidWindow: a malformed policy or a naive ``now``, before any I/O.
    """
    calls = decide(policy, now)
    node_entries = _node_entries(conn) if any(call.window.approx for call in calls) else None
    return tuple(_one(conn, call, node_entries) for call in calls)


def _one(conn: Any, call: TrimCall, node_entries: int | None) -> StreamPreview:
    try:
        length = int(conn.xlen(call.key))
        if isinstance(call.window, MaxLen):
            outside = max(0, length - call.window.count)
        else:
            outside = _count_before(conn, call.key, call.window.floor)
    except redis.exceptions.RedisError as exc:
        error = map_error(exc, call.key)
        error.__cause__ = exc
        return StreamPreview(call.key, call.window, error=error)
    at_least = approx_removes_at_least(call.window, outside, node_entries)
    return StreamPreview(call.key, call.window, length, outside, at_least, node_entries)


def _count_before(conn: Any, key: str, floor: str) -> int:
    """How many entries have an id below ``floor``, read a page at a time."""
    counted, low = 0, "-"
    while True:
        page = conn.xrange(key, min=low, max=f"({floor}", count=PAGE)
        counted += len(page)
        if len(page) < PAGE:
            return counted
        last = page[-1][0]
        low = "(" + (last.decode() if isinstance(last, bytes) else last)


def _node_entries(conn: Any) -> int | None:
    try:
        answer = conn.config_get("stream-node-max-entries")
    except redis.exceptions.RedisError:
        return None  # managed services often refuse CONFIG
    value = next(iter(answer.values()), None) if isinstance(answer, dict) else None
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None
