"""A logd of its own (a temp SQLite file, or a database on PostgreSQL when given one; a Unix socket), a few
hundred jobs and events written to it, then aged out by a retain request, printed as docs/logd-retain.md
prints it."""

from __future__ import annotations

import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

from rich.console import Console
from rich.table import Table

from retain.errors import PreconditionFailed, SchemaViolation
from retain.logd import Store
from retain.logd.client import Client
from retain.logd.server import ServerThread
from retain.logd.settings import Settings
from retain.servers import RedisServer
from retain.wire import AutoId, dump_braced, load
from retain.wire.requests import Answer

__all__ = ["logd_jobs"]

JOBS, EVENTS, BATCH = 300, 200, 25
STATUSES = ["done", "done", "canceled", "running", "failed"]
STAMPED = datetime(2026, 9, 12, 8, 0, tzinfo=UTC)  # records carry their own time; the demo fixes it
#: the retain request in its braced spelling (docs/logd-retain.md); logd reads it as written
RETAIN = """\
{retain: {
  now: "2026-09-12T08:00:00Z"
  author: verse/retention
  what:
  - path: jobs.*
    match: {status: !or [done, canceled]}
    age: .updatedAt
    after: 1d
  - path: events(*)
    age: .at
    after: 3d
}}"""


def _stamp(minutes_ago: int) -> str:
    return (STAMPED - timedelta(minutes=minutes_ago)).isoformat().replace("+00:00", "Z")


def logd_jobs(server: RedisServer | None, console: Console, *, store_url: str | None = None) -> None:
    """Serve a store on a Unix socket, write jobs and events through clients, show history and a watch.

    The store is a temp SQLite file, or the (empty) PostgreSQL database ``store_url``."""
    with tempfile.TemporaryDirectory() as directory:
        socket_path = str(Path(directory) / "logd.sock")
        target = store_url or str(Path(directory) / "logd.sqlite3")
        kind = "PostgreSQL" if store_url else "SQLite, WAL"
        with Store.open(target, settings=Settings(synchronous="normal")) as store, \
                ServerThread(store, socket_path=socket_path), \
                Client(socket_path, author="demo/ci") as writer, Client(socket_path) as watcher:
            console.print(f"\nlogd: a store of its own on {Path(socket_path).name} ({kind})")
            writer.call("schema", set={"events": AutoId("id"), "jobs.*": {"required": ["status", "updatedAt"]}})
            watcher.watch("jobs")
            for first in range(0, JOBS, BATCH):
                writer.patch([{"set": f"jobs.j{index:03d}",
                               "value": {"status": STATUSES[index % len(STATUSES)], "updatedAt": _stamp(index * 17)}}
                              for index in range(first, first + BATCH)])
            early = writer.call("get", path="jobs")["commit"]
            for first in range(0, EVENTS, BATCH):
                writer.patch([{"append": "events", "value": {"at": _stamp(index * 41), "kind": "guess"}}
                              for index in range(first, first + BATCH)])
            writer.patch([{"set": "jobs.j003.status", "value": "done"}],
                         precondition={"jobs.j003": {"status": "running"}}, author="verse/ops")
            try:
                writer.patch([{"set": "jobs.j003.status", "value": "done"}],
                             precondition={"jobs.j003": {"status": "running"}})
            except PreconditionFailed as refused:
                precondition = str(refused).split(";")[0]
            try:
                writer.patch([{"delete": "jobs.j004.updatedAt"}])
            except SchemaViolation as refused:
                violation = str(refused)
            jobs = writer.list("jobs.*")
            events = writer.list("events(*)")
            deltas = [watcher.next_delta() for _ in range(JOBS // BATCH + 1)]
            table = Table(title="logd: every write is a commit")
            table.add_column("what")
            table.add_column("answer")
            counts = {status: sum(job["status"] == status for job in jobs.items.values()) for status in STATUSES}
            table.add_row("commits", f"{jobs.commit} (schema, {JOBS // BATCH} job patches, {EVENTS // BATCH} event "
                                     "patches, one guarded update)")
            table.add_row("jobs now", f"{len(jobs.items)}: " + ", ".join(f"{n} {s}" for s, n in counts.items() if n))
            table.add_row("events", f"{len(events.items)}, keys generated: {events.items[0]['id']} ...")
            table.add_row(f"jobs at commit {early - 6} (history)",
                          str(len(writer.list("jobs.*", at=early - 6).items)))
            table.add_row("watch jobs", f"{len(deltas)} deltas; the last by {deltas[-1]['author']} "
                                        f"at commit {deltas[-1]['commit']}")
            table.add_row("a stale precondition", precondition)
            table.add_row("a delete the schema forbids", violation)
            console.print(table)
            answer, notes = _retain(writer, watcher)
    console.print("\nlogd: retain is a request, and the request is a write")
    console.out(RETAIN, highlight=False)
    console.out(dump_braced(answer).rstrip("\n"), highlight=False)
    for note in notes:
        console.out(note, highlight=False)


def _retain(writer: Client, watcher: Client) -> tuple[Answer, list[str]]:
    """Two jobs whose stamps no clock can read, then the request; its deletes are ordinary commits."""
    writer.patch([{"set": "jobs.legacy1", "value": {"status": "done", "updatedAt": 1789200000}},
                  {"set": "jobs.legacy2", "value": {"status": "canceled", "updatedAt": "2026-09-01"}}])
    before = writer.call("get", path="jobs")["commit"]
    answer = writer.request(load(RETAIN)[0])
    older = len(writer.list("jobs.*", at=before).items) - len(writer.list("jobs.*").items)
    delta = watcher.next_delta()
    while delta["author"] != "verse/retention":
        delta = watcher.next_delta()
    return answer, [f"a read at commit {before}, before it, still shows the {older} jobs it deleted",
                    f"watch jobs: commit {delta['commit']} by {delta['author']}, {len(delta['ops'])} deletes"]
