"""The retain request and its rules, pure: parsing, refusals, timestamps, the selection, the precondition."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retain.clock import format_rfc3339, parse_rfc3339
from retain.errors import InvalidRequest, InvalidRetain
from retain.logd.paths import parse
from retain.logd.retain_rules import DEFAULT_BATCH, RetainRequest, item_pattern, parse_retain, select
from retain.wire import Or, load
from tests.helpers.seed004 import SEED_REQUEST
from tests.strategies import retain_items

NOW = datetime(2026, 9, 12, 8, 0, tzinfo=UTC)

def rule(**fields):
    """One rule over jobs.* by .updatedAt after 1d, with ``fields`` replacing those."""
    return parse_retain({"what": [{"path": "jobs.*", "age": ".updatedAt", "after": "1d", **fields}]}).rules[0]


def stamp(delta: timedelta) -> str:
    return format_rfc3339(NOW - delta)


class TestParseRetain:
    def test_the_seed_request(self):
        """The seed's request, read as written, is two rules in order with its now, batch and author."""
        request = parse_retain(load(SEED_REQUEST)[0]["retain"])
        assert request.now == NOW and request.batch == 256 and request.author == "verse/retention"
        jobs, events = request.rules
        assert (str(jobs.path), jobs.age, jobs.after, jobs.match) == (
            "jobs.*", ("updatedAt",), timedelta(days=1), {"status": Or(("done", "canceled"))})
        assert (str(events.path), events.age, events.after, events.match) == (
            "events(*)", ("at",), timedelta(days=365), None)
        assert not jobs.keyed and events.keyed

    def test_defaults(self):
        """Without now, batch and author: the server's clock, 256, the session's author."""
        request = parse_retain({"what": [{"path": "jobs.*", "age": ".updatedAt", "after": "1d"}]})
        assert (request.now, request.batch, request.author) == (None, DEFAULT_BATCH, None) and DEFAULT_BATCH == 256

    @pytest.mark.parametrize(("after", "expected"), [
        ("1h", timedelta(hours=1)), ("90m", timedelta(minutes=90)), ("30s", timedelta(seconds=30)),
        ("1d", timedelta(days=1)), ("2w", timedelta(days=14)), ("1y", timedelta(days=365)),
        ("1y6w", timedelta(days=365 + 42)), ("1d12h", timedelta(hours=36)),
    ])
    def test_durations(self, after, expected):
        """after is written as a duration: 1d is 24h, 2w 14d, 1y 365d, and they mix."""
        assert rule(after=after).after == expected

    def test_nested_age(self):
        """age may go into a nested map; match may name the age field's siblings there."""
        nested = rule(age=".timing.updatedAt", match={"timing": {"kind": "batch"}, "status": "done"})
        assert nested.age == ("timing", "updatedAt")

    def test_round_trip(self):
        """A request written back to its wire form parses to the same request."""
        request = parse_retain(load(SEED_REQUEST)[0]["retain"])
        assert parse_retain(request.to_document()) == request
        assert parse_retain(request) is request

    @pytest.mark.parametrize(("body", "message"), [
        ({"now": "yesterday"}, "now must be an RFC 3339 time such as 2026-09-12T08:00:00Z (got 'yesterday')"),
        ({"now": 1789200000}, "now must be an RFC 3339 time"),
        ({"now": "2026-09-12"}, "now must be an RFC 3339 time"),
        ({"now": "2026-09-12T08:00:00"}, "now must be an RFC 3339 time"),
        ({"now": datetime(2026, 9, 12)}, "now needs a timezone"),
        ({"what": []}, "what is a non-empty list of rules"),
        ({"what": None}, "what is a non-empty list of rules"),
        ({"what": "jobs.*"}, "what is a non-empty list of rules"),
        ({"batch": -1}, "batch is the most items one delete commit removes, an integer >= 1 (got -1)"),
        ({"batch": 0}, "an integer >= 1 (got 0)"),
        ({"batch": "256"}, "an integer >= 1 (got '256')"),
        ({"batch": True}, "an integer >= 1 (got True)"),
        ({"author": ""}, "author is a string of 1-256 characters"),
        ({"when": 1}, "retain: unknown field 'when': expected one of now, batch, author, what"),
    ])
    def test_request_refusals(self, body, message):
        """A request that cannot mean what it says is invalid_retain, naming the field and what was expected."""
        body = {"what": [{"path": "jobs.*", "age": ".updatedAt", "after": "1d"}], **body}
        with pytest.raises(InvalidRetain, match=_literal(message)) as refused:
            parse_retain(body)
        assert refused.value.code == "invalid_retain" and isinstance(refused.value, InvalidRequest)

    @pytest.mark.parametrize(("fields", "message"), [
        ({"path": "jobs.j1"}, "path jobs.j1 names one node; a rule names the children of a container: jobs.j1.* "
                              "for a map, jobs.j1(*) for a keyed array"),
        ({"path": "jobs"}, "path jobs names one node"),
        ({"path": "events(e1)"}, "path events(e1) names one node"),
        ({"path": "list[*]"}, "path list[*] is a dense array: a position names a place, not an element"),
        ({"path": "list[*]"}, "and write list(*)"),
        ({"path": "jobs..x.*"}, "'..' is refused"),
        ({"path": "jobs.*.status"}, "a wildcard may only be the last segment"),
        ({"path": "jobs.*(*)"}, "a wildcard may only be the last segment"),
        ({"path": ""}, "a path must not be empty"),
        ({"path": 5}, "a path must be a string"),
        ({"age": "updatedAt"}, "age must be a field path into each item such as .updatedAt"),
        ({"age": "."}, "age must be a field path"),
        ({"age": ".a(k)"}, "names only"),
        ({"age": ".a[0]"}, "names only"),
        ({"age": ".*"}, "names only"),
        ({"age": "..a"}, "'..' is refused"),
        ({"age": 5}, "age must be a field path"),
        ({"after": "0s"}, "after must be a positive duration such as 1d, 90m or 1y6w"),
        ({"after": "-1d"}, "no sign"),
        ({"after": "1.5h"}, "no fractions"),
        ({"after": "1x"}, "unknown unit 'x'"),
        ({"after": 86400}, "after must be a positive duration"),
        ({"match": Or(("done", "canceled"))}, "match must be an object such as {status: !or [done, canceled]}"),
        ({"match": ["done"]}, "match must be an object"),
        ({"match": "done"}, "match must be an object"),
        ({"match": {"updatedAt": "2026-09-12T08:00:00Z"}}, "match names the age field .updatedAt"),
        ({"match": {"status": Or(())}}, "!or needs at least one alternative"),
        ({"match": {"status": {1, 2}}}, "is not a pattern"),
        ({"when": "now"}, "unknown field 'when': expected one of path, match, age, after"),
    ])
    def test_rule_refusals(self, fields, message):
        """A rule that cannot mean what it says is invalid_retain, naming the rule and the field."""
        with pytest.raises(InvalidRetain, match=_literal(message)) as refused:
            rule(**fields)
        assert "retain what[0]" in str(refused.value)

    @pytest.mark.parametrize(("age", "match", "message"), [
        (".timing.updatedAt", {"timing": {"updatedAt": "x"}}, "match names the age field .timing.updatedAt"),
        (".timing.updatedAt", {"timing": Or(({"kind": "a"},))}, "match tests .timing whole, which holds the age "
                                                                  "field .timing.updatedAt"),
    ])
    def test_nested_match_refusals(self, age, match, message):
        """match may not name a nested age field, nor test the map holding it whole."""
        with pytest.raises(InvalidRetain, match=_literal(message)):
            rule(age=age, match=match)

    @pytest.mark.parametrize(("what", "message"), [
        (["jobs.*"], "a rule is a map {path: jobs.*"),
        ([{"age": ".a", "after": "1d"}], "path is required"),
        ([{"path": "jobs.*", "after": "1d"}], "age is required"),
        ([{"path": "jobs.*", "age": ".a"}], "after is required"),
    ])
    def test_rule_shape(self, what, message):
        """Each rule is a map with path, age and after."""
        with pytest.raises(InvalidRetain, match=_literal(message)):
            parse_retain({"what": what})

    def test_second_rule_named(self):
        """A refusal names which rule was wrong, by position and path."""
        with pytest.raises(InvalidRetain, match=_literal("retain what[1] (events(*)): after must be")):
            parse_retain({"what": [{"path": "jobs.*", "age": ".a", "after": "1d"},
                                   {"path": "events(*)", "age": ".at", "after": "soon"}]})


class TestParseTimestamp:
    @pytest.mark.parametrize(("text", "expected"), [
        ("2026-09-12T08:00:00Z", NOW),
        ("2026-09-12t08:00:00z", NOW),
        ("2026-09-12T10:00:00+02:00", NOW),
        ("2026-09-12T08:00:00-00:00", NOW),
        ("2026-09-12T08:00:00.5Z", NOW + timedelta(milliseconds=500)),
        ("2026-09-12T08:00:00.123456789Z", NOW + timedelta(microseconds=123456)),
    ])
    def test_rfc3339(self, text, expected):
        """RFC 3339 date-times, with any zone and fraction, are instants."""
        assert parse_rfc3339(text) == expected

    @pytest.mark.parametrize("value", [
        1789200000, 1789200000.5, "1789200000", "2026-09-12", "2026-09-12T08:00:00", "2026-09-12 08:00:00Z",
        "2026-09-12T08:00Z", "2026-09-12T08:00:60Z", "2026-02-30T08:00:00Z", "2026-09-12T08:00:00+24:00",
        "2026-09-12T08:00:00+0200", "20260912T080000Z", "２０２６-09-12T08:00:00Z", " 2026-09-12T08:00:00Z",
        "2026-09-12T08:00:00Z\n", None, True, {"at": "2026-09-12T08:00:00Z"}, ["2026-09-12T08:00:00Z"],
    ])
    def test_not_rfc3339(self, value):
        """Epochs, dates alone, zone-less times, leap seconds, impossible dates and non-strings are not timestamps."""
        assert parse_rfc3339(value) is None


class TestSelect:
    def test_age_and_match(self):
        """An item goes when now - timestamp >= after and match holds; otherwise it stays."""
        done = rule(match={"status": Or(("done", "canceled"))})
        items = [("old-done", {"status": "done", "updatedAt": stamp(timedelta(days=2))}),
                 ("old-canceled", {"status": "canceled", "updatedAt": stamp(timedelta(days=1))}),
                 ("old-running", {"status": "running", "updatedAt": stamp(timedelta(days=30))}),
                 ("young-done", {"status": "done", "updatedAt": stamp(timedelta(hours=23, minutes=59))})]
        selection = select(items, done, NOW)
        assert selection.expired == (("old-done", stamp(timedelta(days=2))),
                                     ("old-canceled", stamp(timedelta(days=1))))
        assert selection.unreadable == 0

    def test_boundary(self):
        """now - timestamp < after keeps: exactly after old goes, a microsecond younger stays."""
        exact, younger = NOW - timedelta(days=1), NOW - timedelta(days=1) + timedelta(microseconds=1)
        items = [("exact", {"updatedAt": exact.isoformat()}), ("younger", {"updatedAt": younger.isoformat()})]
        assert [name for name, _ in select(items, rule(), NOW).expired] == ["exact"]

    def test_future_dated_never_expires(self):
        """A record dated in the future is kept, however short the rule."""
        items = [("future", {"updatedAt": "2126-09-12T08:00:00Z"}), ("skewed", {"updatedAt": stamp(-timedelta(1))})]
        assert select(items, rule(after="1s"), NOW).expired == ()

    def test_offsets(self):
        """Timestamps in other zones compare as instants: 09:00+02:00 is 07:00Z."""
        items = [("east", {"updatedAt": "2026-09-12T09:00:00+02:00"}), ("west", {"updatedAt": "2026-09-12T07:30:00Z"})]
        assert [name for name, _ in select(items, rule(after="1h"), NOW).expired] == ["east"]

    def test_unreadable(self):
        """A missing, non-RFC 3339 or epoch timestamp keeps the item and counts it, whether or not match holds."""
        done = rule(match={"status": "done"})
        items = [("epoch", {"status": "done", "updatedAt": 1789200000}),
                 ("epoch-text", {"status": "done", "updatedAt": "1789200000"}),
                 ("missing", {"status": "done"}),
                 ("date", {"status": "running", "updatedAt": "2020-01-01"}),
                 ("scalar", 5), ("list", ["2020-01-01T00:00:00Z"]),
                 ("ok", {"status": "done", "updatedAt": "2020-01-01T00:00:00Z"})]
        selection = select(items, done, NOW)
        assert selection.expired == (("ok", "2020-01-01T00:00:00Z"),) and selection.unreadable == 6

    def test_nested_age(self):
        """A nested age reads the timestamp inside the item's map."""
        nested = rule(age=".timing.updatedAt")
        items = [("a", {"timing": {"updatedAt": "2020-01-01T00:00:00Z"}}), ("b", {"timing": "2020-01-01T00:00:00Z"}),
                 ("c", {"updatedAt": "2020-01-01T00:00:00Z"})]
        selection = select(items, nested, NOW)
        assert [name for name, _ in selection.expired] == ["a"] and selection.unreadable == 2

    def test_after_beyond_the_calendar(self):
        """A rule reaching before year 1 expires nothing instead of failing."""
        items = [("a", {"updatedAt": "0001-01-01T00:00:00Z"})]
        assert select(items, rule(after="9000y"), NOW).expired == ()

    @settings(max_examples=100, deadline=None)
    @given(items=retain_items(NOW), after=st.sampled_from(["1s", "1h", "1d", "1y"]),
           match=st.sampled_from([None, {"status": "done"}, {"status": Or(("done", "canceled"))}]))
    def test_partition(self, items, after, match):
        """Every item is expired, kept young, kept unmatched or unreadable, exactly once, by the rule's own test;
        the same input gives the same selection."""
        chosen = rule(after=after, **({"match": match} if match is not None else {}))
        selection = select(items, chosen, NOW)
        assert selection == select(items, chosen, NOW)
        expected, unreadable = [], 0
        for name, value in items:
            stamped = parse_rfc3339(value.get("updatedAt") if isinstance(value, dict) else None)
            if stamped is None:
                unreadable += 1
            elif NOW - stamped >= chosen.after and (match is None or value.get("status") in
                                                      (match["status"].alternatives if isinstance(match["status"], Or)
                                                       else (match["status"],))):
                expected.append((name, value["updatedAt"]))
        assert selection.expired == tuple(expected) and selection.unreadable == unreadable


class TestItemPattern:
    def test_match_and_timestamp_in_one_object(self):
        """The precondition per item is the match with the timestamp read, combined into one object pattern."""
        done = rule(match={"status": Or(("done", "canceled"))})
        assert item_pattern(done, "2026-09-10T08:00:00Z") == {"status": Or(("done", "canceled")),
                                                               "updatedAt": "2026-09-10T08:00:00Z"}
        assert done.match == {"status": Or(("done", "canceled"))}
        assert item_pattern(rule(), "t") == {"updatedAt": "t"}

    def test_nested(self):
        """A nested age merges into the match's map without changing the rule."""
        nested = rule(age=".timing.updatedAt", match={"timing": {"kind": "batch"}})
        assert item_pattern(nested, "t") == {"timing": {"kind": "batch", "updatedAt": "t"}}
        assert nested.match == {"timing": {"kind": "batch"}}

    def test_item_paths(self):
        """Items are named as children of a map or elements of a keyed array."""
        assert rule().item("j1") == parse("jobs.j1")
        assert rule(path="events(*)").item("e1") == parse("events(e1)")
        assert rule(path="a.b(*)").item("k") == parse("a.b(k)")


def test_request_is_frozen():
    """A checked request cannot be changed after the fact."""
    request = parse_retain({"what": [{"path": "jobs.*", "age": ".a", "after": "1d"}]})
    assert isinstance(request, RetainRequest)
    with pytest.raises(AttributeError):
        request.batch = 1  # type: ignore[misc]


def _literal(text: str) -> str:
    import re
    return re.escape(text)
