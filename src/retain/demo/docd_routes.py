"""docd in front of a logd and two controllers: one retain request routed across all three owners."""

from __future__ import annotations

import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from retain.docd import Controller, DocdServer, Fanout, MountTable, ThreadedServer, route
from retain.docd.render import render_answer
from retain.logd import Store
from retain.logd.client import Client
from retain.logd.server import ServerThread
from retain.logd.settings import Settings
from retain.servers import RedisServer
from retain.wire import AutoId, Or

__all__ = ["docd_routes"]

NOW = datetime(2026, 9, 12, 8, 0, tzinfo=UTC)  # the caller's clock: one now for every owner
JOBS, RUNS = 120, 30
REQUEST = {"retain": {"now": "2026-09-12T08:00:00Z", "author": "verse/retention", "what": [
    {"path": "jobs.*", "match": {"status": Or(("done", "canceled"))}, "age": ".updatedAt", "after": "1d"},
    {"path": "verse.ctl.runs.*", "age": ".at", "after": "7d"},
    {"path": "ci.runs(*)", "age": ".at", "after": "7d"},
    {"path": "verse.*", "age": ".updatedAt", "after": "30d"}]}}


def _stamp(hours_ago: int) -> str:
    return (NOW - timedelta(hours=hours_ago)).isoformat().replace("+00:00", "Z")


def docd_routes(server: RedisServer | None, console: Console) -> None:
    """Mount two controllers beside logd, write through docd, send one retain request, print its answer."""
    settings = Settings(synchronous="normal")
    with tempfile.TemporaryDirectory() as directory:
        where = Path(directory)
        with Store.open(str(where / "logd.sqlite3"), settings=settings) as logd_store, \
                Store.open(str(where / "verse-ctl.sqlite3"), settings=settings) as ctl_store, \
                Store.open(str(where / "ci.sqlite3"), settings=settings) as ci_store, \
                ServerThread(logd_store, socket_path=str(where / "logd.sock")), \
                ThreadedServer(Controller(ctl_store, without=("retain",), socket_path=str(where / "verse-ctl.sock"))), \
                ThreadedServer(Controller(ci_store, socket_path=str(where / "ci.sock"))):
            # Schemas are each owner's own business: set at the controller, not through docd.
            ci_store.session().set_schema({"runs": AutoId("id")})
            table = MountTable.of({"verse.ctl": f"unix:{where / 'verse-ctl.sock'}", "ci": f"unix:{where / 'ci.sock'}"},
                                  logd=f"unix:{where / 'logd.sock'}")
            console.print("\ndocd: logd owns every base path; mounts: verse.ctl (a controller without retain), "
                          "ci (a runs controller with retain)")
            with ThreadedServer(DocdServer(table, socket_path=str(where / "docd.sock"))), \
                    Client(str(where / "docd.sock"), author="demo/docd") as docd:
                _write(docd)
                answer = docd.request(REQUEST)
                left = {name: len(docd.call("list", path=path)["items"]) for name, path in
                        (("jobs", "jobs.*"), ("verse.ctl runs", "verse.ctl.runs.*"), ("ci runs", "ci.runs(*)"))}
    plan = route(REQUEST, table, now=NOW)  # pure: what docd sent, shown without sending anything
    assert isinstance(plan, Fanout)
    console.print("one retain request, four rules; docd sent one request per owner, all at once, one now:")
    for sent in plan.requests:
        rules = ", ".join(rule["path"] for rule in sent.request["retain"]["what"])
        console.print(f"  {sent.owner.name} <- {escape(rules)}  (now {sent.request['retain']['now']})")
    console.print(escape(render_answer(answer)), end="", soft_wrap=True)
    console.print("left: " + ", ".join(f"{count} {name}" for name, count in left.items()))


def _write(docd: Client) -> None:
    """Jobs at logd, runs at both controllers: every write through docd, each to its owner."""
    statuses = ("done", "canceled", "running")
    docd.patch([{"set": f"jobs.j{index:03d}", "value": {"status": statuses[index % 3], "updatedAt": _stamp(index)}}
                for index in range(JOBS)])
    docd.patch([{"set": "verse.notes", "value": {"text": "weekly", "updatedAt": _stamp(2)}}])
    docd.patch([{"set": f"verse.ctl.runs.r{index:02d}", "value": {"at": _stamp(index * 12)}} for index in range(RUNS)])
    docd.patch([{"append": "ci.runs", "value": {"at": _stamp(index * 12)}} for index in range(RUNS)])
