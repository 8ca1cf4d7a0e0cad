"""retain.archive.plan: the plan of a fold-then-trim, from the boundary, W and what waits between them (pure)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from retain.archive import FoldTrimPlan, StreamId, plan_fold_trim, trim_past
from retain.errors import InvalidInput
from retain.ids import MAX_PART
from retain.windows import MinStreamId
from tests.strategies import fold_trim_facts


def sid(text: str) -> StreamId:
    return StreamId.parse(text)


class TestPlanFoldTrim:
    @pytest.mark.parametrize(("boundary", "watermark", "waiting", "min_entries", "fold", "folds", "floor"), [
        # the window drops nothing: nothing folds, nothing goes, archived or not
        (None, None, 0, 1, None, 0, None),
        (None, "5-0", 0, 1, None, 0, None),
        # nothing archived, nothing waiting: no trim
        ("9-0", None, 0, 1, None, 0, None),
        # nothing archived, enough waiting: fold from the first id, trim just past the boundary
        ("9-0", None, 5, 1, ("0-0", "9-0"), 5, "9-1"),
        ("9-0", None, 5, 5, ("0-0", "9-0"), 5, "9-1"),
        # nothing archived, too few waiting: no fold and so no trim
        ("9-0", None, 4, 5, None, 0, None),
        # archived up to W: fold after W; too few: trim only what is archived
        ("9-0", "4-0", 5, 1, ("4-1", "9-0"), 5, "9-1"),
        ("9-0", "4-0", 5, 5, ("4-1", "9-0"), 5, "9-1"),
        ("9-0", "4-0", 4, 5, None, 0, "4-1"),
        ("9-0", "4-0", 0, 1, None, 0, "4-1"),
        # W at or ahead of the boundary: nothing folds, the trim never passes the boundary
        ("9-0", "9-0", 0, 1, None, 0, "9-1"),
        ("9-0", "12-0", 0, 1, None, 0, "9-1"),
        ("9-0", "12-0", 0, 100, None, 0, "9-1"),
        # ids within one millisecond, and a carry into the next
        ("9-3", "9-2", 1, 1, ("9-3", "9-3"), 1, "9-4"),
        (f"9-{MAX_PART}", None, 1, 1, ("0-0", f"9-{MAX_PART}"), 1, "10-0"),
        ("10-0", f"9-{MAX_PART}", 1, 1, ("10-0", "10-0"), 1, "10-1"),
        (f"9-{MAX_PART}", "3-0", 2, 3, None, 0, "3-1"),
    ])
    def test_table(self, boundary, watermark, waiting, min_entries, fold, folds, floor):
        """What folds, how many, and where the trim goes, for each shape of the facts."""
        plan = plan_fold_trim(sid(boundary) if boundary else None, sid(watermark) if watermark else None, waiting,
                              min_entries=min_entries)
        assert plan.fold == (tuple(sid(part) for part in fold) if fold else None)
        assert plan.folds == folds
        assert plan.trim == (MinStreamId(floor, approx=True) if floor else None)

    def test_the_plan_names_its_facts(self):
        """The plan carries the facts it was made from and the W the fold leaves."""
        assert plan_fold_trim(sid("9-0"), sid("4-0"), 6, min_entries=2, approx=False) == FoldTrimPlan(
            boundary=sid("9-0"), watermark=sid("4-0"), fold=(sid("4-1"), sid("9-0")), folds=6,
            watermark_after=sid("9-0"), trim=MinStreamId("9-1", approx=False))
        assert plan_fold_trim(sid("9-0"), sid("4-0"), 1, min_entries=2).watermark_after == sid("4-0")

    @pytest.mark.parametrize(("args", "options", "message"), [
        ((None, None, 1), {}, "no entry can wait after W None up to the boundary None"),
        ((sid("9-0"), sid("9-0"), 1), {}, "no entry can wait after W 9-0 up to the boundary 9-0"),
        ((sid("9-0"), sid("12-0"), 3), {}, r"\(got waiting=3\)"),
        ((sid("9-0"), None, -1), {}, "waiting: must be a whole number >= 0"),
        ((sid("9-0"), None, True), {}, "waiting: must be a whole number"),
        ((sid("9-0"), None, 1.5), {}, "waiting: must be a whole number"),
        ((sid("9-0"), None, 1), {"min_entries": 0}, r"min_entries: must be a whole number >= 1 \(got 0\)"),
        ((sid("9-0"), None, 1), {"approx": "yes"}, "approx: must be True or False"),
        (("9-0", None, 1), {}, "boundary: must be a StreamId or None"),
        ((sid("9-0"), "4-0", 1), {}, "watermark: must be a StreamId or None"),
    ])
    def test_refusals(self, args, options, message):
        """Facts that cannot be, or options of the wrong kind, are refused, saying what arrived."""
        with pytest.raises(InvalidInput, match=message):
            plan_fold_trim(*args, **options)

    @given(fold_trim_facts(), st.integers(1, 2_000), st.booleans())
    def test_properties(self, facts, min_entries, approx):
        """INV-FOLD and INV-WINDOW by construction: the trim never passes W after the fold nor the boundary;
        nothing folds when fewer than min_entries wait; nothing archived and nothing folded, no trim."""
        boundary, watermark, waiting = facts
        plan = plan_fold_trim(boundary, watermark, waiting, min_entries=min_entries, approx=approx)
        assert (plan.boundary, plan.watermark) == (boundary, watermark)
        if waiting < min_entries:
            assert plan.fold is None and plan.folds == 0
        if plan.fold is not None:
            assert plan.fold == (watermark.successor() if watermark is not None else StreamId(0, 0), boundary)
            assert plan.folds == waiting and plan.watermark_after == boundary
        else:
            assert plan.folds == 0 and plan.watermark_after == watermark
        if boundary is None or (watermark is None and plan.fold is None):
            assert plan.trim is None
        if plan.trim is not None:
            floor = sid(plan.trim.floor)
            assert floor <= plan.watermark_after.successor() and floor <= boundary.successor()
            assert plan.trim == trim_past(min(plan.watermark_after, boundary), approx)
        else:
            assert boundary is None or plan.watermark_after is None
