"""Hypothesis strategies shared by the tests."""

from __future__ import annotations

from datetime import timedelta

from hypothesis import strategies as st

from retain.archive.ids import MAX_PART, StreamId
from retain.durations import UNITS

__all__ = ["duration_texts", "stream_ids", "whole_second_durations"]


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

#: stream ids across the whole 0-0..2^64-1-2^64-1 space, weighted toward the edges where carries happen
_ID_PARTS = st.one_of(st.integers(0, 3), st.integers(MAX_PART - 3, MAX_PART), st.integers(0, MAX_PART))
stream_ids = st.builds(StreamId, _ID_PARTS, _ID_PARTS)
