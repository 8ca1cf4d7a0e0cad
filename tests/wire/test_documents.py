"""Documents, pure: loading and dumping both formats with the tags, the limits, splitting a file."""

from __future__ import annotations

import pytest
from hypothesis import given

from retain.errors import InvalidDocument
from retain.wire import AutoId, LogdKey, Or, Raw, WireLimits, dump, load, split_documents
from tests.strategies import logd_values

TAGGED = {"if": {"jobs.j1": {"status": Or(("done", "canceled"))}},
          "schema": {"events": LogdKey("id"), "runs": AutoId("uid"), "blobs.*.doc": Raw()}}


class TestLoadDump:
    @pytest.mark.parametrize("fmt", ["yaml", "json"])
    def test_tags_round_trip(self, fmt):
        """Every registered tag survives a dump and a load, in either format."""
        assert load(dump(TAGGED, fmt)) == (TAGGED, fmt)

    @pytest.mark.parametrize("fmt", ["yaml", "json"])
    @given(value=logd_values)
    def test_values_round_trip(self, fmt, value):
        """Any tree value comes back equal from its own dump."""
        assert load(dump({"v": value}, fmt))[0] == {"v": value}

    def test_json_spelling(self):
        """JSON spells a tag as a one-key map; YAML may use that spelling too."""
        text = '{"if": {"a": {"!or": [1, 2]}}, "s": {"!logd-key": "id", "x": 1}, "r": {"!raw": null}}'
        assert load(text)[0] == {"if": {"a": Or((1, 2))}, "s": {"!logd-key": "id", "x": 1}, "r": Raw()}
        assert load("{a: {'!or': [1, 2]}}")[0] == {"a": Or((1, 2))}

    def test_json_spelling_escaped(self):
        """A tag's key written with its ``!`` escaped (``\\u0021or``) is the tag still: JSON reads it as ``!or``."""
        assert load('{"a": {"\\u0021or": [1, 2]}}')[0] == {"a": Or((1, 2))}

    def test_json_dump_nested_tags(self):
        """Tags inside a tag and inside lists are spelled the JSON way at every depth."""
        value = {"a": [Or((LogdKey("id"), Or((Raw(), 1))))]}
        assert dump(value, "json") == b'{"a":[{"!or":[{"!logd-key":"id"},{"!or":[{"!raw":null},1]}]}]}\n'

    def test_json_dump_refuses_non_data(self):
        """What is neither data nor a tag is refused as json.dumps refuses it, not written as something else."""
        with pytest.raises(TypeError, match="not JSON serializable"):
            dump({"a": object()}, "json")

    @pytest.mark.parametrize(("text", "value"), [
        ("{t: 2026-09-11T07:00:00Z}", {"t": "2026-09-11T07:00:00Z"}),
        ("{d: 2026-09-11}", {"d": "2026-09-11"}),
        ("{a: true, b: ~, c: 0x10, d: '7', e: 1.5e+3, 1: x, f: 0o17, g: null, h: FALSE}",
         {"a": True, "b": None, "c": 16, "d": "7", "e": 1500.0, "1": "x", "f": 15, "g": None, "h": False}),
        ("{a: yes, b: on, c: 1:20, d: 0b101, e: 1_000, f: 010, g: .5, h: +1}",
         {"a": "yes", "b": "on", "c": "1:20", "d": "0b101", "e": "1_000", "f": 10, "g": 0.5, "h": 1}),
        ("{a: !logd-auto-id }", {"a": AutoId("id")}),
        ("{a: !!str 12}", {"a": "12"}),
        ('{"a": 1}', {"a": 1}),
    ])
    def test_scalars(self, text, value):
        """YAML 1.2 core-schema scalars: yes/on, sexagesimal, binary and underscored numbers are strings;
        timestamps stay strings."""
        assert load(text)[0] == value

    @pytest.mark.parametrize(("text", "message"), [
        ("{a: !or x}", "!or takes a list"),
        ("{a: !or {b: 1}}", "!or does not take a map"),
        ("{a: !raw x}", "!raw takes no value"),
        ("{a: !logd-key }", "!logd-key takes a field name"),
        ("{a: !!int x}", "'x' is not a !!int"),
        ("{[1]: x}", "map keys are strings"),
        ("{? !or [1] : x}", "map keys are strings"),
        ("{a: 1, a: 2}", "duplicate key 'a'"),
        ('{"a": Infinity}', "Infinity is not JSON"),
    ])
    def test_refused(self, text, message):
        """What cannot be read is an InvalidDocument naming the fault."""
        with pytest.raises(InvalidDocument, match=message.replace("[", r"\[").replace("!", "!")):
            load(text)

    def test_limits(self):
        """Size and depth are bounded by the limits given."""
        with pytest.raises(InvalidDocument, match="at most 10"):
            load("{a: 123456789}", WireLimits(max_bytes=10))
        with pytest.raises(InvalidDocument, match="deeper than 3"):
            load("[[[[1]]]]", WireLimits(max_depth=3))
        assert load("[[[1]]]", WireLimits(max_depth=3))[0] == [[[1]]]



class TestSplitDocuments:
    def test_markers(self):
        """A file's documents, split on --- and ... lines; blank ones dropped."""
        text = "a: 1\n---\nb: 2\n...\n\n--- c: 3\n---\n"
        assert split_documents(text) == ["a: 1\n", "b: 2\n", "c: 3\n"]
