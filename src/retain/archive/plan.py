"""The plan of one fold-then-trim, decided from what was read of the stream and the archive (pure).

Three facts decide it: the boundary (the highest id the window drops, see
:func:`~retain.archive.fold.fold_boundary`), the archive's watermark W, and
how many entries wait after W up to the boundary. :func:`plan_fold_trim` says:

- what to fold: the entries after W up to the boundary; nothing when fewer
  than ``min_entries`` wait (they stay live for a later, larger file), when
  none wait, or when the window drops nothing;
- where the trim goes: ``MINID`` just past min(W after the fold, boundary).
  Never past W, so only archived entries leave the stream (INV-FOLD); never
  past the boundary, so nothing inside the window goes even when W is ahead
  of it (INV-WINDOW). With nothing archived and nothing folded, no trim.

:func:`~retain.archive.fold.fold_then_trim`,
:func:`~retain.archive.beat.fold_then_trim_all` (a retention driver's beat) and
the dry run (:func:`retain.retention.preview`) decide by it, and
:func:`~retain.archive.fold.fold` makes its min-entries cut by it: the rules
above are written here once.

Example:
    >>> plan = plan_fold_trim(StreamId(900, 0), StreamId(500, 0), waiting=380, min_entries=100)
    >>> plan.fold, plan.folds, plan.trim
    ((StreamId(ms=500, seq=1), StreamId(ms=900, seq=0)), 380, MinStreamId(floor='900-1', approx=True))
"""

from __future__ import annotations

from dataclasses import dataclass

from retain import _fields
from retain._fields import Where
from retain.errors import InvalidInput
from retain.ids import StreamId
from retain.windows import MinStreamId

__all__ = ["FoldTrimPlan", "plan_fold_trim", "trim_past"]


@dataclass(frozen=True)
class FoldTrimPlan:
    """What one fold-then-trim does, given the boundary, W and the entries waiting between them."""

    #: the highest id the window drops (None: it drops nothing)
    boundary: StreamId | None
    #: the archive's watermark W before the fold (None: nothing archived yet)
    watermark: StreamId | None
    #: the ids to fold, both included: after W up to the boundary; None: fold nothing
    fold: tuple[StreamId, StreamId] | None
    #: entries the fold archives: every one waiting, or none
    folds: int
    #: W once the fold is done, at most: the boundary when it folds (W reaches the last entry at or
    #: below it), else W as it is
    watermark_after: StreamId | None
    #: the trim after the fold, MINID just past min(``watermark_after``, boundary); None: trim nothing
    trim: MinStreamId | None


def plan_fold_trim(boundary: StreamId | None, watermark: StreamId | None, waiting: int, *,
                   min_entries: int = 1, approx: bool = True) -> FoldTrimPlan:
    """The plan of one fold-then-trim: pure, no I/O, no clock.

    ``waiting`` is how many entries lie after ``watermark`` up to ``boundary``
    (0 when the window drops nothing or W is at or past the boundary).
    ``approx`` picks ``~`` or ``=`` for the trim, as the window does.

    Raises:
        InvalidInput: an id that is not a StreamId or None, ``waiting`` not a
            whole number >= 0 (or above 0 where nothing can wait),
            ``min_entries`` not a whole number >= 1, ``approx`` not a bool.
    """
    where = Where("", InvalidInput)
    for name, value in (("boundary", boundary), ("watermark", watermark)):
        if value is not None and not isinstance(value, StreamId):
            where.refuse(name, "a StreamId or None", value)
    _fields.whole_number(waiting, "waiting", where)
    _fields.whole_number(min_entries, "min_entries", where, minimum=1)
    if not isinstance(approx, bool):
        where.refuse("approx", "True or False", approx)
    can_wait = boundary is not None and (watermark is None or watermark < boundary)
    if waiting and not can_wait:
        raise InvalidInput(f"no entry can wait after W {watermark} up to the boundary {boundary} "
                           f"(got waiting={waiting})")
    if boundary is None:
        return FoldTrimPlan(None, watermark, None, 0, watermark, None)
    fold = None
    if waiting >= min_entries:
        fold = (watermark.successor() if watermark is not None else StreamId(0, 0), boundary)
    after = boundary if fold is not None else watermark
    trim = trim_past(min(after, boundary), approx) if after is not None else None
    return FoldTrimPlan(boundary, watermark, fold, waiting if fold is not None else 0, after, trim)


def trim_past(watermark: StreamId | str, approx: bool = True) -> MinStreamId:
    """The window that trims every id up to ``watermark`` and nothing after: MINID just past it.

    Example:
        >>> trim_past("1789171200999-3")
        MinStreamId(floor='1789171200999-4', approx=True)
    """
    if not isinstance(watermark, StreamId):
        watermark = StreamId.parse(watermark)
    return MinStreamId(str(watermark.successor()), approx)
