"""The logd act of ``retain demo``: a store of its own, a few hundred jobs and events, history and a watch,
and a retain request at the end."""

from __future__ import annotations

from rich.console import Console

from retain.demo import ACTS
from retain.demo.logd_jobs import logd_jobs


def test_logd_act():
    """The act runs without a Redis, and its table shows commits, history, a watch and two refusals."""
    console = Console(record=True, width=200)
    logd_jobs(None, console)
    text = console.export_text()
    assert "22 (schema, 12 job patches, 8 event patches, one guarded update)" in text
    assert "300: 121 done, 60 canceled, 59 running, 60 failed" in text
    assert "200, keys generated: 0000000014-0001" in text
    assert "jobs at commit 7 (history)  │ 150 " in text
    assert "13 deltas; the last by verse/ops at commit 22" in text
    assert "precondition on jobs.j003 failed at commit 22: it does not match" in text
    assert "jobs.j004: required child 'updatedAt' is missing" in text


RETAINED = """\
{result: {retain: {
  now: "2026-09-12T08:00:00Z"
  commit: 25
  deleted: 223
  rules:
  - {path: jobs.*, deleted: 129, unreadable: 2}
  - {path: events(*), deleted: 94}
}}}
a read at commit 23, before it, still shows the 129 jobs it deleted
watch jobs: commit 24 by verse/retention, 129 deletes
"""


def test_logd_act_ends_with_retain():
    """The act ends with a retain request as docs/logd-retain.md writes one, and its result in the braced shape."""
    console = Console(record=True, width=200)
    logd_jobs(None, console)
    text = console.export_text()
    assert text.endswith(RETAINED)
    assert "  - path: jobs.*\n    match: {status: !or [done, canceled]}\n" in text


def test_registered():
    """The act is part of retain demo."""
    assert logd_jobs in ACTS
