"""A codemojex-style activity feed: a game's guess events, for the demo and the benchmarks."""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import datetime, timedelta

__all__ = ["guess_events"]

PLAYERS = ["ada", "grace", "linus", "margaret", "ken", "barbara", "edsger", "frances"]
GUESSES = ["🍎", "🍌", "🍒", "🥝", "🍋", "🍇", "🥥", "🍑"]
OUTCOMES = ["miss", "miss", "miss", "close", "close", "hit"]


def guess_events(count: int, *, end: datetime, spacing: timedelta,
                 seed: int = 7) -> Iterator[tuple[str, dict[str, str]]]:
    """``count`` events as ``(id, fields)``, the last minted at ``end``, ``spacing`` apart.

    Ids are explicit (``"<ms>-0"``) so an age window has something real to cut.
    """
    rng = random.Random(seed)
    end_ms = int(end.timestamp() * 1000)
    step_ms = max(1, int(spacing.total_seconds() * 1000))
    for index in range(count):
        ms = end_ms - (count - 1 - index) * step_ms
        yield f"{ms}-0", {"player": rng.choice(PLAYERS), "guess": rng.choice(GUESSES),
                          "outcome": rng.choice(OUTCOMES), "round": str(index // 40)}
