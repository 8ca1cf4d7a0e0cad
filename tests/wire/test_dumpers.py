"""The one string representer, in block and flow context."""

from __future__ import annotations

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from retain.wire import Or, dump, dump_braced, load
from retain.wire.dumpers import FlowDumper


@pytest.mark.parametrize(("text", "written"), [
    ("jobs.*", "jobs.*"), ("events(*)", "events(*)"), ("verse/ops", "verse/ops"),
    ("yes", '"yes"'), ("12", '"12"'), ("", '""'), ("a: b", '"a: b"'), ("a, b", '"a, b"'), ("*x", '"*x"'),
    ("2026-09-12T08:00:00Z", '"2026-09-12T08:00:00Z"'),
])
class TestRepresentStr:
    def test_block(self, text, written):
        """In a braced answer's block content, a string is plain only where it reads back as itself."""
        answer = dump_braced({"result": {"get": {"value": text, "n": [1]}}})
        assert answer == f"{{result: {{get: {{\n  value: {written}\n  n: [1]\n}}}}}}\n"

    def test_flow(self, text, written):
        """The same in flow style, for people."""
        assert yaml.dump({"value": text}, Dumper=FlowDumper, default_flow_style=True).strip() == f"{{value: {written}}}"


def test_tags_in_flow():
    """The flow dumper writes the registered tags."""
    written = yaml.dump(Or(("done", "canceled")), Dumper=FlowDumper, default_flow_style=True)
    assert written.startswith("!or [done, canceled]")


class TestCoreSchemaRoundTrip:
    @given(st.one_of(st.text(max_size=12),
                     st.from_regex(r"[-+]?(0o[0-7]{1,4}|[0-9]{0,3}\.?[0-9]{0,3}([eE][-+]?[0-9]{1,3})?)", fullmatch=True)))
    def test_every_string_reads_back_as_written(self, text):
        """A string dumped by any dumper reads back as the same string under the YAML 1.2 core-schema loader,
        including those 1.1 left plain but 1.2 reads as numbers (1e5, 0o17)."""
        assert load(dump({"a": text}, "yaml"))[0] == {"a": text}
        assert load(dump_braced({"result": {"x": {"a": text}}}))[0] == {"result": {"x": {"a": text}}}
