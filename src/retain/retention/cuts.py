"""Several limits on one stream, and byte budgets: what they come to at one beat, pure.

A :class:`~retain.windows.Limits` keeps an entry only while it is inside every
limit. Length-like limits (``MaxLen``, and ``MaxBytes`` once converted to a
length with the stream's measured size) cut from the head by count: the
smallest count is the strictest. Time-like limits (``MaxAge`` resolved at
``now``, ``MinId``) cut by id: the latest floor is the strictest. A beat
therefore sends at most two XTRIMs, ``MAXLEN`` then ``MINID``; each only
removes what lies outside its own limit, so together they keep exactly what
is inside every limit (INV-WINDOW holds for each).

A byte budget needs the stream's size, read each beat (``MEMORY USAGE key
SAMPLES n`` and ``XLEN``; :class:`Size`). A limit that could not be measured
(the read failed, or the stream is missing or empty) cuts nothing this beat:
guessing would risk trimming inside the budget.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from retain.windows import Limits, MaxAge, MaxBytes, MaxLen, MinId, limit_name

__all__ = ["Cut", "Size", "byte_limit", "cuts", "limits_of"]


@dataclass(frozen=True)
class Size:
    """A stream's measured size: ``MEMORY USAGE`` (None: no such key) and ``XLEN``."""

    usage: int | None
    length: int


@dataclass(frozen=True)
class Cut:
    """One trim a limit (the strictest of its kind) comes to at a beat."""

    #: the policy file's name of the limit that cut: maxlen, max_bytes, max_age, min_id
    limit: str
    window: MaxLen | MinId


def limits_of(window: object) -> tuple[MaxLen | MinId | MaxAge | MaxBytes, ...]:
    """The limits a declared window holds: those of a :class:`Limits`, else the window alone."""
    if isinstance(window, Limits):
        return window.limits
    assert isinstance(window, (MaxLen, MinId, MaxAge, MaxBytes))
    return (window,)


def byte_limit(window: object) -> MaxBytes | None:
    """The byte budget among a declared window's limits, if any: what a beat must measure first."""
    return next((limit for limit in limits_of(window) if isinstance(limit, MaxBytes)), None)


def candidates(window: object, now: datetime, size: Size | None) -> list[Cut]:
    """Every limit of ``window`` as a sendable window at ``now``; a budget without a usable ``size`` is left out."""
    found: list[Cut] = []
    for limit in limits_of(window):
        if isinstance(limit, MaxAge):
            found.append(Cut("max_age", limit.resolve(now)))
        elif isinstance(limit, MaxBytes):
            if size is not None and size.usage and size.length > 0:
                found.append(Cut("max_bytes", limit.to_maxlen(size.usage, size.length)))
        else:
            found.append(Cut(limit_name(limit), limit))
    return found


def cuts(window: object, now: datetime, sizes: Mapping[str, Size] | None = None, key: str = "") -> tuple[Cut, ...]:
    """The trims ``window`` comes to at ``now``: the strictest length limit, then the strictest time limit.

    ``sizes`` holds the measured size of ``key`` for a byte budget. Ties go to
    the limit declared first.
    """
    size = sizes.get(key) if sizes is not None else None
    found = candidates(window, now, size)
    lengths = [cut for cut in found if isinstance(cut.window, MaxLen)]
    times = [cut for cut in found if isinstance(cut.window, MinId)]
    chosen: list[Cut] = []
    if lengths:
        chosen.append(min(lengths, key=lambda cut: cut.window.count))  # type: ignore[union-attr]
    if times:
        chosen.append(max(times, key=lambda cut: cut.window.instant))  # type: ignore[union-attr]
    return tuple(chosen)
