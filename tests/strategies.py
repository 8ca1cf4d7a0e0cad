"""Hypothesis strategies shared by the tests."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from hypothesis import strategies as st

from retain.durations import UNITS

__all__ = ["aware_instants", "duration_texts", "whole_second_durations"]


@st.composite
def duration_texts(draw: st.DrawFn) -> tuple[str, timedelta]:
    """A well-formed duration string and the timedelta it means."""
    units = draw(st.lists(st.sampled_from(list(UNITS)), min_size=1, max_size=len(UNITS), unique=True))
    units.sort(key=list(UNITS).index)
    text, seconds = "", 0
    for unit in units:
        count = draw(st.integers(min_value=1, max_value=999))
        text += f"{count}{unit}"
        seconds += count * UNITS[unit]
    return text, timedelta(seconds=seconds)


whole_second_durations = st.integers(min_value=1, max_value=10**11).map(lambda s: timedelta(seconds=s))


#: timezone-aware instants between 2000 and 2100, in assorted fixed offsets
aware_instants = st.builds(
    lambda naive, minutes: naive.replace(tzinfo=timezone(timedelta(minutes=minutes))),
    st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1)),
    st.integers(min_value=-14 * 60, max_value=14 * 60),
)
