"""The match language: equality, map patterns, !or; no ordering, no clock."""

from __future__ import annotations

import pytest
from hypothesis import given

from retain.errors import InvalidRequest
from retain.logd.match import ABSENT, check_pattern, matches
from retain.wire import LogdKey, Or
from tests.strategies import logd_values

JOB = {"status": "done", "updatedAt": "2026-09-11T07:00:00Z", "attempts": 3, "ok": True, "tags": ["a", "b"],
       "owner": {"team": "ops", "name": "ada"}, "note": None}


class TestMatches:
    @pytest.mark.parametrize(("pattern", "value", "expected"), [
        ("done", "done", True),
        ("done", "Done", False),
        (3, 3, True),
        (3, 3.0, True),
        (3, "3", False),
        (True, True, True),
        (True, 1, False),
        (1, True, False),
        (0, False, False),
        (None, None, True),
        (None, "", False),
        ("done", {"status": "done"}, False),
        ({"status": "done"}, JOB, True),
        ({"status": "running"}, JOB, False),
        ({"status": Or(("done", "canceled"))}, JOB, True),
        ({"status": Or(("running", "canceled"))}, JOB, False),
        ({"missing": None}, JOB, False),
        ({"note": None}, JOB, True),
        ({}, JOB, True),
        ({}, "done", False),
        ({"owner": {"team": "ops"}}, JOB, True),
        ({"owner": {"team": "dev"}}, JOB, False),
        ({"tags": ["a", "b"]}, JOB, True),
        ({"tags": ["a"]}, JOB, False),
        ({"tags": [Or(("a", "z")), "b"]}, JOB, True),
        (Or(({"status": "x"}, {"attempts": 3})), JOB, True),
        (Or(()), JOB, False),
        (["a"], "a", False),
    ])
    def test_table(self, pattern, value, expected):
        """Scalars by equality (bools never equal numbers), maps by named fields, lists by position, !or any."""
        assert matches(pattern, value) is expected

    def test_absent_matches_nothing(self):
        """A path that does not exist matches no pattern, not even null or {}."""
        for pattern in (None, {}, Or((None,)), "x"):
            assert matches(pattern, ABSENT) is False

    @given(logd_values)
    def test_value_matches_itself(self, value):
        """Any value, used as its own pattern, matches itself."""
        assert matches(value, value)

    @given(logd_values, logd_values)
    def test_repeatable(self, pattern, value):
        """The same pattern over the same value always gives the same answer."""
        assert matches(pattern, value) == matches(pattern, value)


class TestCheckPattern:
    def test_good(self):
        """Scalars, maps, lists and !or are patterns."""
        pattern = {"status": Or(("done", {"a": [1, None]}))}
        assert check_pattern(pattern, "if") is pattern

    @pytest.mark.parametrize(("pattern", "message"), [
        ({"key": LogdKey("id")}, "is not a pattern"),
        ({"s": Or(())}, "at least one alternative"),
        (object(), "is not a pattern"),
    ])
    def test_bad(self, pattern, message):
        """Anything else is an invalid_request naming where it was."""
        with pytest.raises(InvalidRequest, match=message):
            check_pattern(pattern, "if jobs.j1")
