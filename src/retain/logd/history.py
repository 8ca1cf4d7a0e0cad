"""What compaction keeps: pure decisions over commit numbers and times, no I/O.

- The *boundary* B: every commit from B on stays readable with its delta. B is the
  first commit younger than ``compaction.cutoff`` (never past the head, never moving back).
- The *snapshots*: below B, a tier ``every E keep K`` keeps the last commit of each
  E-long era (aligned to the epoch) younger than K. A commit compacted away never comes
  back, so a snapshot is only ever chosen from those already kept or newly below B.
- ``compaction.horizon`` H: no era older than H is kept, so versions only it read go.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence

from retain.logd.settings import Tier

__all__ = ["boundary", "choose_snapshots", "nearest", "tier_windows"]


def boundary(old: int, head: int, first_young: int | None) -> int:
    """The new boundary given the first commit younger than the cutoff (None: none is)."""
    return max(old, min(head, first_young if first_young is not None else head))


def tier_windows(tiers: Sequence[Tier], now: float, horizon: float | None) -> list[tuple[float, float | None]]:
    """``(every, since)`` in seconds for each tier: eras of ``every`` timed at or after ``since``."""
    windows = []
    for tier in tiers:
        since = None if tier.keep is None else now - tier.keep.total_seconds()
        if horizon is not None:
            since = now - horizon if since is None else max(since, now - horizon)
        windows.append((tier.every.total_seconds(), since))
    return windows


def choose_snapshots(picks: Iterable[int], kept: Sequence[int], old_boundary: int, new_boundary: int) -> list[int]:
    """Tier picks that may still be served: already kept, or newly crossing below the boundary."""
    already = set(kept)
    return sorted({pick for pick in picks if pick in already or old_boundary <= pick < new_boundary})


def nearest(snapshots: Sequence[int], commit: int, first_readable: int) -> tuple[int | None, int | None]:
    """The kept commits either side of ``commit`` (the later may be the boundary itself)."""
    index = bisect.bisect_left(snapshots, commit)
    before = snapshots[index - 1] if index > 0 else None
    after = snapshots[index] if index < len(snapshots) else first_readable
    return before, after
