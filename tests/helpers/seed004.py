"""Seed 004's example: its request as written, its scene (a store the tests fill), and its answer."""

from __future__ import annotations

from datetime import timedelta

from retain.clock import format_rfc3339
from retain.wire import LogdKey, Or
from tests.helpers.logd import START

NOW = START  # 2026-09-12T08:00:00Z, the example's now

#: the retain request of docs/logd-retain.md's example, as written there
SEED_REQUEST = """\
{retain: {
  now: "2026-09-12T08:00:00Z"        # optional; the server's clock when absent
  batch: 256                         # optional; the most items one delete commit removes
  author: verse/retention            # optional; the session's when absent
  what:
  - path: jobs.*
    match: {status: !or [done, canceled]}
    age: .updatedAt
    after: 1d
  - path: events(*)
    age: .at
    after: 1y
}}
"""


#: the answer to that request, over the scene :func:`seed_scene` writes (commits 1-3)
SEED_RESULT = {"now": "2026-09-12T08:00:00Z", "commit": 6, "deleted": 312, "rules": [
    {"path": "jobs.*", "deleted": 300, "unreadable": 2},
    {"path": "events(*)", "deleted": 12}]}


def ago(**delta) -> str:
    return format_rfc3339(NOW - timedelta(**delta))


def seed_scene(store) -> None:
    """Seed 004's scene in three commits: 300 expired jobs, 2 with unreadable stamps, running and young
    ones; 12 events older than a year among newer ones."""
    ops = store.session(author="verse/ops")
    ops.set_schema({"events": LogdKey("id")})
    jobs = {f"j{i:03d}": {"status": ("done", "canceled")[i % 2], "updatedAt": ago(days=2 + i % 30)} for i in range(300)}
    jobs["epoch"] = {"status": "done", "updatedAt": 1789200000}  # a numeric epoch: kept, unreadable
    jobs["dateonly"] = {"status": "canceled", "updatedAt": "2026-09-01"}  # not RFC 3339: kept, unreadable
    jobs |= {f"r{i:02d}": {"status": "running", "updatedAt": ago(days=40)} for i in range(20)}
    jobs |= {f"y{i:02d}": {"status": "done", "updatedAt": ago(hours=3)} for i in range(20)}
    jobs["future"] = {"status": "done", "updatedAt": "2027-01-01T00:00:00Z"}
    ops.patch([{"set": "jobs", "value": jobs}])
    events = [{"id": f"e{i:03d}", "at": ago(days=366 + i)} for i in range(12)]
    events += [{"id": f"n{i:03d}", "at": ago(days=i * 10)} for i in range(30)]
    ops.patch([{"set": "events", "value": events}])


def request(*rules, **fields):
    return {"now": format_rfc3339(NOW), **fields, "what": list(rules)}


JOBS_RULE = {"path": "jobs.*", "match": {"status": Or(("done", "canceled"))}, "age": ".updatedAt", "after": "1d"}
