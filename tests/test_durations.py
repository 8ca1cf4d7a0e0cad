"""retain.durations: the duration grammar, good and bad."""

from datetime import timedelta

import pytest
from hypothesis import given

from retain import durations
from retain.errors import InvalidDuration
from tests.strategies import duration_texts, whole_second_durations


class TestParse:
    @pytest.mark.parametrize(("text", "expected"), [
        ("30s", timedelta(seconds=30)),
        ("90m", timedelta(minutes=90)),
        ("1h", timedelta(hours=1)),
        ("1d", timedelta(hours=24)),
        ("2w", timedelta(days=14)),
        ("1y", timedelta(days=365)),
        ("1y6w", timedelta(days=365 + 42)),
        ("1d12h", timedelta(days=1, hours=12)),
        ("1y2w3d4h5m6s", timedelta(days=365 + 14 + 3, hours=4, minutes=5, seconds=6)),
        ("100000d", timedelta(days=100000)),
    ])
    def test_good(self, text, expected):
        """Each documented form parses to its calendar-blind length."""
        assert durations.parse(text) == expected

    @pytest.mark.parametrize(("text", "why"), [
        ("", "1 to 64"),
        ("0s", "no zero"),
        ("1d0h", "no zero"),
        ("01h", "no zero"),
        ("-1h", "no sign"),
        ("+1h", "no sign"),
        ("1", "followed by a unit"),
        ("h", "expected a number"),
        ("1.5h", "no fractions"),
        ("1 h", "whitespace"),
        (" 1h", "whitespace"),
        ("1h ", "whitespace"),
        ("1x", "unknown unit 'x'"),
        ("1H", "unknown unit 'H'"),
        ("1ms", "no millisecond unit"),
        ("12h1d", "out of place"),
        ("1h1h", "out of place"),
        ("9999999999999s", "at most 12 digits"),
        ("999999999999y", "too long"),
        ("1d" * 40, "1 to 64"),
    ])
    def test_bad(self, text, why):
        """Everything outside the grammar is refused, naming the input and the reason."""
        with pytest.raises(InvalidDuration, match=why) as info:
            durations.parse(text)
        assert repr(text)[:20].strip("'") in str(info.value) or text == ""

    @pytest.mark.parametrize("value", [None, 3600, timedelta(hours=1), b"1h"])
    def test_not_a_string(self, value):
        """A non-string is refused with a TypeError-free InvalidDuration."""
        with pytest.raises(InvalidDuration, match="must be a string"):
            durations.parse(value)

    def test_error_is_a_value_error(self):
        """InvalidDuration reads naturally to code that catches ValueError."""
        with pytest.raises(ValueError):
            durations.parse("soon")

    @given(duration_texts())
    def test_any_wellformed_text_parses(self, case):
        """Every string the grammar describes parses to the sum of its components."""
        text, expected = case
        assert durations.parse(text) == expected


class TestFormat:
    @pytest.mark.parametrize(("duration", "text"), [
        (timedelta(minutes=90), "1h30m"),
        (timedelta(days=407), "1y6w"),
        (timedelta(days=1, hours=12), "1d12h"),
        (timedelta(seconds=1), "1s"),
    ])
    def test_canonical(self, duration, text):
        """The canonical form uses the largest units first."""
        assert durations.format(duration) == text

    @pytest.mark.parametrize("duration", [timedelta(0), timedelta(seconds=-1), timedelta(milliseconds=1500), 60])
    def test_refuses(self, duration):
        """Zero, negative, fractional and non-timedelta values cannot be written."""
        with pytest.raises(InvalidDuration):
            durations.format(duration)

    @given(whole_second_durations)
    def test_round_trip(self, duration):
        """parse(format(d)) == d for every positive whole-second duration."""
        assert durations.parse(durations.format(duration)) == duration


class TestFractionHints:
    @pytest.mark.parametrize(("text", "hint"), [
        ("1.5h", "write 90m rather than 1.5h"),
        ("1.25m", "write 75s rather than 1.25m"),
        ("2.5d", "write 60h rather than 2.5d"),
        ("1.5s", "1.5s is no whole number of seconds, the smallest unit"),
    ])
    def test_a_fraction_is_refused_with_the_same_span_in_a_smaller_unit(self, text, hint):
        """The hint names the same span in whole units of a smaller one, never an unrelated example."""
        with pytest.raises(InvalidDuration) as refused:
            durations.parse(text)
        assert hint in str(refused.value)

    def test_tick_of_a_fraction_of_a_second_suggests_the_number(self, tmp_path):
        """`tick = "1.5s"` through `retain streams run`: the hint says tick = 1.5, not minutes."""
        from click.testing import CliRunner

        from retain.cli import main

        policy = tmp_path / "retain.toml"
        policy.write_text('tick = "1.5s"\n[[stream]]\nkey = "k"\nmaxlen = 10\n')
        result = CliRunner().invoke(main, ["streams", "run", str(policy), "--once"])
        assert result.exit_code == 1
        assert "or write the number of seconds: tick = 1.5" in result.output and "90m" not in result.output
