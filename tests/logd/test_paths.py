"""The path grammar of LOGD.md: good paths round-trip, bad ones are refused naming the fault."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from retain.errors import InvalidPath, InvalidRequest
from retain.logd.paths import KEY_CHARS, NAMES, ROOT, Field, Index, Key, Wild, check_key, parse, parse_pattern
from tests.strategies import logd_keys, logd_paths


class TestParse:
    @pytest.mark.parametrize(("text", "segments"), [
        ("jobs", (Field("jobs"),)),
        ("jobs.j1.status", (Field("jobs"), Field("j1"), Field("status"))),
        ("events(e42)", (Field("events"), Key("e42"))),
        ("events(e42).payload", (Field("events"), Key("e42"), Field("payload"))),
        ("list[3]", (Field("list"), Index(3))),
        ("list[0][12].a", (Field("list"), Index(0), Index(12), Field("a"))),
        ("jobs.*", (Field("jobs"), Wild("field"))),
        ("events(*)", (Field("events"), Wild("key"))),
        ("list[*]", (Field("list"), Wild("index"))),
        ("*", (Wild("field"),)),
        ("a-b_c:d@e+f~g", (Field("a-b_c:d@e+f~g"),)),
        ("runs(2026-09-11T07:00:00Z)", (Field("runs"), Key("2026-09-11T07:00:00Z"))),
    ])
    def test_good(self, text, segments):
        """Each form parses to its segments and prints back as written."""
        path = parse(text)
        assert path.segments == segments
        assert str(path) == text

    @pytest.mark.parametrize(("text", "message"), [
        ("", "must not be empty"),
        ("jobs..j1", "'..' is refused"),
        ("..", "'..' is refused"),
        (".jobs", "empty name"),
        ("jobs.", "empty name"),
        ("jobs()", "empty key"),
        ("jobs.*.status", "wildcard may only be the last segment"),
        ("events(*).at", "wildcard may only be the last segment"),
        ("list[*][0]", "wildcard may only be the last segment"),
        ("jobs.j*", "a wildcard is '*' alone"),
        ("jobs.j 1", "' ' is not allowed"),
        ("jobs.j/1", "'/' is not allowed"),
        ("jobs.é", "'é' is not allowed"),
        ("jobs.j1!", "'!' is not allowed"),
        ("events(e1", "never closed"),
        ("list[1", "never closed"),
        ("list[01]", "not a position"),
        ("list[-1]", "not a position"),
        ("list[x]", "not a position"),
        ("(e1)", "first segment must be a name"),
        ("[0]", "first segment must be a name"),
        ("jobs)x", "')' is not allowed"),
        ("a" * 129, "at most 128"),
        (".".join(["a"] * 65), "more than 64 segments"),
        ("a" * 1025, "at most 1024"),
        (42, "must be a string"),
    ])
    def test_bad(self, text, message):
        """A path outside the grammar is an InvalidPath (an invalid_request) naming what is wrong."""
        with pytest.raises(InvalidPath, match=message.replace("(", r"\(").replace(")", r"\)")
                           .replace("[", r"\[").replace("*", r"\*").replace("+", r"\+")):
            parse(text)

    def test_invalid_path_is_an_invalid_request(self):
        """The error carries the wire code invalid_request and is a ValueError."""
        with pytest.raises(InvalidRequest) as caught:
            parse("a..b")
        assert caught.value.code == "invalid_request" and isinstance(caught.value, ValueError)

    @given(logd_paths())
    def test_round_trip(self, path):
        """Any path the grammar allows prints to text that parses back to it."""
        assert parse(str(path)) == path


class TestPattern:
    def test_wildcards_anywhere(self):
        """Schema patterns may put wildcards in the middle."""
        assert parse_pattern("jobs.*.steps(*).at").segments == (
            Field("jobs"), Wild("field"), Field("steps"), Wild("key"), Field("at"))


class TestPath:
    def test_relations(self):
        """parent, last, startswith and / behave as a tree path should."""
        path = parse("jobs.j1.status")
        assert path.parent == parse("jobs.j1") and path.last == Field("status")
        assert path.startswith(parse("jobs")) and path.startswith(ROOT) and not parse("jobs").startswith(path)
        assert parse("jobs") / Key("x") == parse("jobs(x)")
        assert str(ROOT) == "" and ROOT.last is None


class TestCheckKey:
    def test_documented_set(self):
        """Every documented character is accepted; the grammar's own are not."""
        assert check_key("".join(sorted(KEY_CHARS))[:128])
        for char in ".()[]* /!\n":
            with pytest.raises(InvalidPath, match="contains"):
                check_key(f"a{char}b")


@given(text=st.one_of(st.lists(logd_keys, min_size=1, max_size=5).map(".".join), st.text(max_size=12)))
def test_names_read_at_once_read_the_same(text):
    """A path of names, read in one match and one split, is the path the grammar reads; nothing else is."""
    if NAMES.fullmatch(text):
        assert parse(text) == parse_pattern(text)
        assert str(parse(text)) == text
