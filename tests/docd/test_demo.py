"""The docd act of ``retain demo``: one retain request routed across logd and two controllers."""

from __future__ import annotations

from rich.console import Console

from retain.demo import ACTS
from retain.demo.docd_routes import docd_routes


def test_docd_act():
    """The act runs without a Redis and prints the plan and the answer in the braced shape, rules in order."""
    console = Console(record=True, width=80)
    docd_routes(None, console)
    text = console.export_text()
    assert "  logd <- jobs.*, verse.*  (now 2026-09-12T08:00:00Z)\n  verse.ctl <- runs.*  (now" in text
    assert "  ci <- runs(*)  (now 2026-09-12T08:00:00Z)" in text
    assert """\
{result: {retain: {now: "2026-09-12T08:00:00Z", commit: 3, deleted: 80, rules: [
  {path: jobs.*, deleted: 64, owner: logd}
  {path: verse.ctl.runs.*, owner: verse.ctl, error: {code: unsupported, message: "unsupported operation: request type"}}
  {path: ci.runs(*), deleted: 16, commit: 3, owner: ci}
  {path: verse.*, deleted: 0, owner: logd, under: [verse.ctl]}
]}}}
""" in text
    assert "left: 56 jobs, 30 verse.ctl runs, 14 ci runs" in text


def test_registered():
    """The act is part of retain demo, last."""
    assert ACTS[-1] is docd_routes
