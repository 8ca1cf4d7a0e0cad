"""What the live-tier tests share: streams filled with known ids, and reading ids back."""

from __future__ import annotations

import redis

__all__ = ["BASE_MS", "append", "at_node_boundary", "fill", "ms_of", "remaining"]

BASE_MS = 1_789_000_000_000


def ms_of(entry_id: bytes | str) -> tuple[int, int]:
    """An entry id as ``(ms, seq)``, so that ids sort as the server orders them."""
    text = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
    ms, seq = text.split("-")
    return int(ms), int(seq)


def fill(conn: redis.Redis, key: str, steps: list[int]) -> list[tuple[int, int]]:
    """Append one entry per step; a step of 0 stays in the same millisecond (seq + 1)."""
    ids, ms, seq = [], BASE_MS, 0
    pipe = conn.pipeline(transaction=False)
    for index, step in enumerate(steps):
        ms, seq = (ms, seq + 1) if step == 0 and index else (ms + step, 0)
        pipe.xadd(key, {"i": str(index)}, id=f"{ms}-{seq}")
        ids.append((ms, seq))
    pipe.execute()
    return ids


def append(conn: redis.Redis, key: str, count: int) -> list[bytes]:
    """Add ``count`` entries to ``key`` in one round trip; return their ids, in order."""
    pipe = conn.pipeline(transaction=False)
    for index in range(count):
        pipe.xadd(key, {"i": str(index)})
    return list(pipe.execute())


def at_node_boundary(removed: int, length: int, node: int) -> bool:
    """Entries appended in order fill nodes of ``node`` entries; only the last may be partial."""
    return removed % node == 0 or removed == length


def remaining(conn: redis.Redis, key: str) -> list[tuple[int, int]]:
    """The ids left in ``key``, as ``(ms, seq)``."""
    return [ms_of(entry_id) for entry_id, _ in conn.xrange(key)]
