"""retain.windows: frozen windows that cannot hold a bad value."""

import dataclasses
from datetime import UTC, datetime, timedelta, timezone

import pytest

from retain.errors import InvalidWindow
from retain.windows import MaxAge, MaxLen, MinId, minid_floor

UTC = UTC
NOW = datetime(2026, 9, 12, 8, 0, tzinfo=UTC)


class TestMaxLen:
    @pytest.mark.parametrize("count", [0, 1, 10_000, 2**40])
    def test_good(self, count):
        """Any int >= 0 is a length window, approximate by default."""
        window = MaxLen(count)
        assert (window.count, window.approx) == (count, True)

    @pytest.mark.parametrize(("count", "message"), [
        (-1, r"must be a whole number >= 0 \(got -1\)"),
        (True, r"must be a whole number >= 0 \(got True\)"),
        (1.0, r"must be a whole number >= 0 \(got 1.0\)"),
        ("10", r"must be a whole number >= 0 \(got '10'\)"),
        (None, r"got None"),
    ])
    def test_bad(self, count, message):
        """Negative counts, bools, floats and strings are refused, saying what arrived."""
        with pytest.raises(InvalidWindow, match=message):
            MaxLen(count)

    @pytest.mark.parametrize("approx", [1, "yes", None])
    def test_approx_must_be_bool(self, approx):
        """approx is True or False, nothing truthy."""
        with pytest.raises(InvalidWindow, match="approx must be True"):
            MaxLen(5, approx)

    def test_frozen(self):
        """A window cannot be changed after construction."""
        with pytest.raises(dataclasses.FrozenInstanceError):
            MaxLen(5).count = -1  # type: ignore[misc]


class TestMinId:
    def test_floor(self):
        """The floor is '<unix ms>-0' of the instant."""
        assert MinId(NOW).floor == f"{int(NOW.timestamp()) * 1000}-0"

    def test_offset_instant(self):
        """An instant with an offset means the same moment as its UTC twin."""
        plus_two = NOW.astimezone(timezone(timedelta(hours=2)))
        assert MinId(plus_two).floor == MinId(NOW).floor

    def test_milliseconds_kept(self):
        """Milliseconds are kept exactly (no float rounding); microseconds are floored."""
        instant = datetime(2026, 1, 1, 0, 0, 0, 999_999, tzinfo=UTC)
        assert minid_floor(instant).endswith("999-0")
        assert minid_floor(datetime(1970, 1, 1, 0, 0, 0, 1000, tzinfo=UTC)) == "1-0"

    @pytest.mark.parametrize(("instant", "message"), [
        (datetime(2026, 9, 12), "timezone-aware"),
        (1789171200000, "timezone-aware datetime"),
        ("2026-09-12T08:00:00Z", "timezone-aware datetime"),
        (datetime(1969, 12, 31, tzinfo=UTC), "must not precede 1970"),
    ])
    def test_bad(self, instant, message):
        """Naive datetimes, raw integers, strings and pre-epoch instants are refused."""
        with pytest.raises(InvalidWindow, match=message):
            MinId(instant)


class TestMaxAge:
    def test_resolve(self):
        """An age window resolves to the MinId of now minus the duration, same mode."""
        assert MaxAge("7d", approx=False).resolve(NOW) == MinId(NOW - timedelta(days=7), approx=False)

    def test_string_or_timedelta(self):
        """A duration string and its timedelta make equal windows."""
        assert MaxAge("1d12h") == MaxAge(timedelta(hours=36))

    @pytest.mark.parametrize(("duration", "error"), [
        ("0s", "no zero"),
        ("soon", "expected a number"),
        (timedelta(0), "must be positive"),
        (timedelta(seconds=-5), "must be positive"),
        (3600, "timedelta or a string"),
    ])
    def test_bad(self, duration, error):
        """Zero, negative, unparsable and untyped durations are refused."""
        with pytest.raises(ValueError, match=error):
            MaxAge(duration)

    def test_resolve_needs_aware_now(self):
        """Resolving against a naive clock is refused."""
        with pytest.raises(InvalidWindow, match="now must be timezone-aware"):
            MaxAge("1h").resolve(datetime(2026, 9, 12))

    def test_resolve_before_epoch(self):
        """An age reaching before 1970 is refused, not sent as a negative id."""
        with pytest.raises(InvalidWindow, match="1970"):
            MaxAge("100y").resolve(NOW)

    def test_describe(self):
        """describe() shows the canonical duration and the mode."""
        assert MaxAge("90m").describe() == "MAX-AGE ~ 1h30m"
        assert MaxAge(timedelta(milliseconds=1500), approx=False).describe() == "MAX-AGE = 0:00:01.500000"
