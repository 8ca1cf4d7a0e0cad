"""retain.ids: stream ids as numbers, and the bounds of a read (pure)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given

from retain.errors import InvalidStreamId
from retain.ids import MAX_PART, StreamId, lower_bound, upper_bound
from tests.strategies import stream_ids


class TestStreamId:
    @given(stream_ids)
    def test_text_round_trip(self, entry_id):
        """An id written as text parses back to itself, from str or bytes."""
        assert StreamId.parse(str(entry_id)) == entry_id == StreamId.parse(str(entry_id).encode())

    @given(stream_ids, stream_ids)
    def test_orders_as_numbers(self, a, b):
        """Ids order by (ms, seq) as numbers, as the server orders them; text would not."""
        assert (a < b) == ((a.ms, a.seq) < (b.ms, b.seq))

    @given(stream_ids)
    def test_successor_and_predecessor_are_inverse(self, entry_id):
        """The successor is the next id (carrying into ms) and the predecessor undoes it."""
        if entry_id != StreamId(MAX_PART, MAX_PART):
            after = entry_id.successor()
            assert after > entry_id and after.predecessor() == entry_id
        before = entry_id.predecessor()
        assert before is None if entry_id == StreamId(0, 0) else before < entry_id and before.successor() == entry_id

    def test_carries(self):
        """seq 2^64-1 carries into the next millisecond."""
        assert StreamId(5, MAX_PART).successor() == StreamId(6, 0)
        assert StreamId(6, 0).predecessor() == StreamId(5, MAX_PART)
        with pytest.raises(InvalidStreamId, match="no successor"):
            StreamId(MAX_PART, MAX_PART).successor()

    @pytest.mark.parametrize("text", ["", "12", "12-", "-3", "1-2-3", "01-2", "1-02", "a-1", " 1-2",
                                      "18446744073709551616-0", "1-18446744073709551616"])
    def test_refuses_what_is_no_id(self, text):
        """Anything but '<ms>-<seq>' with parts in 0..2^64-1 is refused, naming the input."""
        with pytest.raises(InvalidStreamId, match="must be") as caught:
            StreamId.parse(text)
        assert isinstance(caught.value, ValueError)

    def test_refuses_bad_parts(self):
        """Parts must be ints in range (a bool is not an int)."""
        for ms, seq in ((-1, 0), (0, MAX_PART + 1), (True, 0), (1.0, 0)):
            with pytest.raises(InvalidStreamId):
                StreamId(ms, seq)  # type: ignore[arg-type]


class TestBounds:
    def test_open_ends(self):
        """None, '-' and '+' are the very first and very last ids."""
        assert lower_bound(None) == lower_bound("-") == StreamId(0, 0)
        assert upper_bound(None) == upper_bound("+") == StreamId(MAX_PART, MAX_PART)

    def test_millisecond_only(self):
        """'<ms>' covers its whole millisecond, as XRANGE reads it."""
        assert lower_bound("1789") == StreamId(1789, 0)
        assert upper_bound("1789") == StreamId(1789, MAX_PART)

    def test_datetimes_cover_their_millisecond(self):
        """A datetime bound includes every id minted in its millisecond."""
        instant = datetime(2026, 9, 12, 8, 0, 0, 123456, tzinfo=timezone(timedelta(hours=2)))
        ms = int(datetime(2026, 9, 12, 6, 0, 0, 123000, tzinfo=UTC).timestamp() * 1000)
        assert lower_bound(instant) == StreamId(ms, 0)
        assert upper_bound(instant) == StreamId(ms, MAX_PART)

    @pytest.mark.parametrize("bad", [datetime(2026, 9, 12), datetime(1969, 12, 31, tzinfo=UTC), 12, b"x"])
    def test_refusals(self, bad):
        """Naive or pre-epoch datetimes and other types are refused."""
        with pytest.raises(InvalidStreamId):
            lower_bound(bad)
        with pytest.raises(InvalidStreamId):
            upper_bound(bad)
