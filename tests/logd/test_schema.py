"""The schema: keyed arrays, dense arrays, delete-breakable constraints, !raw; parsed and checked."""

from __future__ import annotations

import pytest

from retain.errors import InvalidPath, InvalidRequest, SchemaViolation
from retain.logd.paths import parse
from retain.logd.schema import Rule, Schema
from retain.wire import AutoId, LogdKey, Raw

SCHEMA = Schema.parse({
    "events": LogdKey("id"),
    "runs": AutoId(),
    "jobs.*": {"required": ["status", "updatedAt"]},
    "jobs": {"minItems": 1},
    "blobs.*.doc": Raw(),
    "pinned": {"array": LogdKey("name"), "minItems": 2},
    "teams.*.members": {"array": AutoId("uid")},
})


class TestParse:
    def test_rules(self):
        """Tags are shorthands for the map form; every field lands in its Rule."""
        assert SCHEMA.rules[0] == Rule(parse("events"), array=LogdKey("id"))
        assert SCHEMA.rules[1].array == AutoId("id")
        assert SCHEMA.rules[2].required == ("status", "updatedAt")
        assert SCHEMA.rules[4].raw is True
        assert SCHEMA.rules[5].array == LogdKey("name") and SCHEMA.rules[5].min_items == 2

    def test_round_trip(self):
        """to_document gives a document that parses to the same schema."""
        assert Schema.parse(SCHEMA.to_document()) == SCHEMA

    def test_none_is_empty(self):
        """No document means no rules: every array dense."""
        assert Schema.parse(None) == Schema() and Schema().keying(parse("events")) is None

    @pytest.mark.parametrize(("document", "error", "message"), [
        ([], InvalidRequest, "a schema is a map"),
        ({"jobs": 3}, InvalidRequest, "a rule is"),
        ({"jobs": {"minimum": 1}}, InvalidRequest, "unknown field 'minimum'"),
        ({"jobs": {"minItems": -1}}, InvalidRequest, "field 'minItems': must be a whole number >= 0"),
        ({"jobs": {"minItems": True}}, InvalidRequest, "field 'minItems': must be a whole number >= 0"),
        ({"jobs": {"required": "status"}}, InvalidRequest, "required must be a list"),
        ({"jobs": {"required": ["a b"]}}, InvalidPath, "contains ' '"),
        ({"jobs": {"array": "id"}}, InvalidRequest, "array must be !logd-key"),
        ({"jobs": {"raw": "yes"}}, InvalidRequest, "raw must be"),
        ({"jobs": {"raw": True, "minItems": 1}}, InvalidRequest, "no schema inside"),
        ({"list[*].events": LogdKey("id")}, InvalidRequest, "cannot sit inside a dense array"),
        ({"jobs..x": Raw()}, InvalidPath, "'..' is refused"),
        ({"jobs": LogdKey("a.b")}, InvalidPath, "contains '.'"),
    ])
    def test_bad(self, document, error, message):
        """A schema that cannot mean what it says is refused naming the pattern."""
        with pytest.raises(error, match=message):
            Schema.parse(document)


class TestQueries:
    @pytest.mark.parametrize(("path", "keying"), [
        ("events", LogdKey("id")), ("runs", AutoId("id")), ("teams.t1.members", AutoId("uid")),
        ("jobs", None), ("teams.t1", None),
    ])
    def test_keying(self, path, keying):
        """An array is keyed where a rule says so, dense elsewhere."""
        assert SCHEMA.keying(parse(path)) == keying

    @pytest.mark.parametrize(("path", "root"), [
        ("blobs.b1.doc", "blobs.b1.doc"), ("blobs.b1.doc.x.y", "blobs.b1.doc"), ("blobs.b1", None),
    ])
    def test_raw_root(self, path, root):
        """raw_root finds the !raw subtree a path is at or inside."""
        found = SCHEMA.raw_root(parse(path))
        assert (str(found) if found else None) == root

    def test_reaches(self):
        """reaches tells whether any rule could apply at or under a path."""
        assert SCHEMA.reaches(parse("jobs")) and SCHEMA.reaches(parse("jobs.j1"))
        assert not SCHEMA.reaches(parse("jobs.j1.status")) and not SCHEMA.reaches(parse("other"))


class TestCheck:
    @pytest.mark.parametrize(("path", "value"), [
        ("jobs", {"j1": {"status": "done", "updatedAt": "t"}}),
        ("jobs.j1", {"status": "done", "updatedAt": "t", "extra": 1}),
        ("pinned", [{"name": "a"}, {"name": "b"}]),
        ("events", []),
        ("blobs.b1.doc", {"anything": {"goes": [1, {"here": None}]}}),
    ])
    def test_good(self, path, value):
        """Values that keep every rule pass."""
        SCHEMA.check_value(parse(path), value)

    @pytest.mark.parametrize(("path", "value", "message"), [
        ("jobs.j1", {"status": "done"}, r"jobs.j1: required child 'updatedAt' is missing \(schema rule jobs.\*"),
        ("jobs.j1", "done", "required child 'status' is missing"),
        ("jobs", {}, r"jobs: 0 items, fewer than 1 \(schema rule jobs: minItems 1\)"),
        ("jobs", {"j1": {"status": "x"}}, "jobs.j1: required child 'updatedAt'"),
        ("pinned", [{"name": "a"}], "fewer than 2"),
        ("events", [{"at": 1}], "lacks its key field 'id'"),
        ("events", ["x"], "elements of a keyed array are maps"),
        ("events", [{"id": 7}], "must be a string"),
        ("events", [{"id": "a b"}], "contains ' '"),
    ])
    def test_violations(self, path, value, message):
        """A value that breaks a rule is a schema_violation naming the path and the rule."""
        with pytest.raises((SchemaViolation, InvalidPath), match=message):
            SCHEMA.check_value(parse(path), value)

    def test_violation_code(self):
        """SchemaViolation carries the wire code schema_violation."""
        assert SchemaViolation.code == "schema_violation"
