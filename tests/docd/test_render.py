"""Answers rendered in docd's braced spelling (docs/docd.md)."""

from __future__ import annotations

import pytest

from retain.docd.render import render_answer
from retain.wire import Or

SEED = """\
{result: {retain: {now: "2026-09-12T08:00:00Z", commit: 4127, deleted: 300, rules: [
  {path: jobs.*, deleted: 300, owner: logd}
  {path: verse.ctl.runs.*, owner: verse.ctl, error: {code: unsupported, message: "unsupported operation: request type"}}
  {path: verse.*, deleted: 0, owner: logd, under: [verse.ctl]}
]}}}
"""


class TestRenderAnswer:
    def test_the_seeds_answer(self):
        """The seed's docd answer, character for character."""
        answer = {"result": {"retain": {"now": "2026-09-12T08:00:00Z", "commit": 4127, "deleted": 300, "rules": [
            {"path": "jobs.*", "deleted": 300, "owner": "logd"},
            {"path": "verse.ctl.runs.*", "owner": "verse.ctl",
             "error": {"code": "unsupported", "message": "unsupported operation: request type"}},
            {"path": "verse.*", "deleted": 0, "owner": "logd", "under": ["verse.ctl"]}]}}}
        assert render_answer(answer) == SEED

    @pytest.mark.parametrize(("value", "written"), [
        ("jobs.*", "jobs.*"), ("events(*)", "events(*)"), ("verse/ops", "verse/ops"),
        ("yes", '"yes"'), ("12", '"12"'), ("", '""'), ("a: b", '"a: b"'), ("a, b", '"a, b"'), ("*x", '"*x"'),
        ("2026-09-12T08:00:00Z", '"2026-09-12T08:00:00Z"'), (None, "null"), (True, "true"), (1.5, "1.5"),
        (Or(("done", "canceled")), "!or [done, canceled]"),
    ])
    def test_scalars_read_back_as_themselves(self, value, written):
        """A string is plain only where a reader takes it back as the same string; else double-quoted."""
        assert render_answer({"result": {"get": {"value": value}}}) == f"{{result: {{get: {{value: {written}}}}}}}\n"

    def test_other_answers_are_one_line(self):
        """An error, or a retain error for the request, is one flow line."""
        assert render_answer({"error": {"code": "unavailable", "message": "nothing ran: logd: down"}}) == \
            '{error: {code: unavailable, message: "nothing ran: logd: down"}}\n'
