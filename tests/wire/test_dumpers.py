"""The one string representer, in block and flow context."""

from __future__ import annotations

import pytest
import yaml

from retain.wire import FlowDumper, Or, dump_braced


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
