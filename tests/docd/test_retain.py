"""Retain through docd against logd's real retain: docs/docd.md's example, one now, rule order, owners down."""

from __future__ import annotations

import asyncio
import json
import threading
from datetime import UTC, datetime, timedelta

import pytest

from retain.docd import DocdServer, Owners, ThreadedServer, fan_out, route
from retain.docd.render import render_answer
from retain.errors import OwnerUnavailable
from retain.logd.client import Client
from retain.wire import AutoId, load
from tests.helpers.logd import FakeClock
from tests.helpers.wire import exchange

SEED_REQUEST = b"""{retain: {now: "2026-09-12T08:00:00Z", what: [
  {path: jobs.*, match: {status: !or [done, canceled]}, age: .updatedAt, after: 1d},
  {path: verse.ctl.runs.*, age: .at, after: 7d},
  {path: verse.*, age: .updatedAt, after: 30d}]}}
...
"""

#: docs/docd.md's retain example, character for character
SEED_ANSWER = """\
{result: {retain: {now: "2026-09-12T08:00:00Z", commit: 4127, deleted: 300, rules: [
  {path: jobs.*, deleted: 300, owner: logd}
  {path: verse.ctl.runs.*, owner: verse.ctl, error: {code: unsupported, message: "unsupported operation: request type"}}
  {path: verse.*, deleted: 0, owner: logd, under: [verse.ctl]}
]}}}
"""

NOW = datetime(2026, 9, 12, 8, 0, tzinfo=UTC)


def stamp(instant: datetime) -> str:
    return instant.isoformat().replace("+00:00", "Z")


def send_raw(address, data: bytes) -> dict:
    """One YAML document over a raw socket, its answer loaded: the wire as it is."""
    return load(exchange(address, data, 1)[0])[0]


def seed_logd(store, head: int) -> None:
    """300 expired done or canceled jobs, 20 expired running ones, 10 young done ones, a young verse.notes;
    then other traffic until the head is ``head``."""
    session = store.session(author="verse/ops")
    old, young = stamp(NOW - timedelta(days=2)), stamp(NOW - timedelta(hours=1))
    jobs = {f"j{index:03d}": {"status": ("done", "canceled")[index % 2], "updatedAt": old} for index in range(300)}
    jobs.update({f"r{index:02d}": {"status": "running", "updatedAt": old} for index in range(20)})
    jobs.update({f"y{index:02d}": {"status": "done", "updatedAt": young} for index in range(10)})
    session.patch([{"set": "jobs", "value": jobs}])
    session.patch([{"set": "verse.notes", "value": {"text": "hello", "updatedAt": young}}])
    while store.head < head:
        session.patch([{"set": "ticks", "value": store.head}])


class TestTheSeedsExample:
    def test_three_rules_three_answers(self, world):
        """jobs.* at logd, verse.ctl.runs.* at a controller without retain, verse.* at logd over verse.ctl:
        docs/docd.md's answer, exactly, over real sockets."""
        seed_logd(world.logd_store, head=4125)  # 300 deletes in batches of 256: commits 4126 and 4127
        with Client(world.ctl_socket) as ctl:
            ctl.patch([{"set": "runs.r1", "value": {"at": stamp(NOW - timedelta(days=30))}}])
        table = world.table(verse_ctl="unix:" + world.ctl_socket)
        with ThreadedServer(DocdServer(table, listen=("127.0.0.1", 0))) as docd:
            answer = send_raw(docd.address, SEED_REQUEST)
        assert render_answer(answer) == SEED_ANSWER
        assert json.dumps(answer) == json.dumps({"result": {"retain": {
            "now": "2026-09-12T08:00:00Z", "commit": 4127, "deleted": 300, "rules": [
                {"path": "jobs.*", "deleted": 300, "owner": "logd"},
                {"path": "verse.ctl.runs.*", "owner": "verse.ctl",
                 "error": {"code": "unsupported", "message": "unsupported operation: request type"}},
                {"path": "verse.*", "deleted": 0, "owner": "logd", "under": ["verse.ctl"]}]}}})
        # What the answer says happened, happened: logd lost the 300, the controller kept its run.
        with world.client(world.logd) as logd:
            assert sorted(logd.list("jobs.*").items) == [f"r{i:02d}" for i in range(20)] + [f"y{i:02d}" for i in
                                                                                              range(10)]
            assert logd.get("verse.notes").value["text"] == "hello"
        with Client(world.ctl_socket) as ctl:
            assert list(ctl.list("runs.*").items) == ["r1"]


def runs(store, ages: dict[str, timedelta], now: datetime = NOW) -> None:
    """Runs in a keyed array (the store makes their ids), each dated ``age`` before ``now``."""
    session = store.session()
    session.set_schema({"runs": AutoId("id")})
    session.patch([{"append": "runs", "value": {"id": name, "at": stamp(now - age)}} for name, age in ages.items()])


class TestOneNow:
    def test_docds_clock_read_once_reaches_every_owner(self, world):
        """Without a now, docd's clock -- not the owners' -- ages every rule, at every owner, to the same second."""
        later = NOW + timedelta(days=3)  # docd's clock; the owners' own clocks say NOW
        edge = {"expired": timedelta(days=1), "kept": timedelta(days=1) - timedelta(seconds=1)}
        with world.client(world.logd) as logd:
            logd.patch([{"set": f"jobs.{name}", "value": {"updatedAt": stamp(later - age)}}
                        for name, age in edge.items()])
        runs(world.ci_store, edge, now=later)
        with ThreadedServer(DocdServer(world.table(), listen=("127.0.0.1", 0), clock=FakeClock(later))) as docd, \
                world.client(docd) as client:
            result = client.call("retain", what=[{"path": "jobs.*", "age": ".updatedAt", "after": "1d"},
                                                 {"path": "ci.runs(*)", "age": ".at", "after": "1d"}])
        assert result["now"] == "2026-09-15T08:00:00Z"
        assert [(rule["owner"], rule["deleted"]) for rule in result["rules"]] == [("logd", 1), ("ci", 1)]
        with world.client(world.logd) as logd, Client(world.ci.address) as ci:
            assert list(logd.list("jobs.*").items) == ["kept"]
            assert [run["id"] for run in ci.list("runs(*)").items] == ["kept"]

    def test_the_callers_now_wins(self, world):
        """A caller's now goes to every owner as written, and the answer carries it."""
        runs(world.ci_store, {"a": timedelta(days=2)})
        with ThreadedServer(DocdServer(world.table(), listen=("127.0.0.1", 0), clock=FakeClock(NOW))) as docd, \
                world.client(docd) as client:
            result = client.call("retain", now="2026-09-10T08:00:00+00:00",
                                 what=[{"path": "ci.runs(*)", "age": ".at", "after": "1d"}])
        assert result["now"] == "2026-09-10T08:00:00+00:00"
        assert result["rules"] == [{"path": "ci.runs(*)", "deleted": 0, "commit": 2, "owner": "ci"}]


class TestRuleOrder:
    @pytest.mark.parametrize("slow", ["logd", "ci"])
    def test_rules_keep_their_order_whoever_answers_last(self, world, slow):
        """One owner is held until the other has answered docd: the rules still come back in the order sent."""
        runs(world.ci_store, {"r1": timedelta(days=3), "r2": timedelta(hours=1)})
        with world.client(world.logd) as logd:
            logd.patch([{"set": "jobs.j1", "value": {"updatedAt": stamp(NOW - timedelta(days=3))}}])
        gate = threading.Event()
        # The slow owner's own writer thread waits on the gate, so its pass cannot start, let alone answer.
        (world.logd.server.writer if slow == "logd" else world.ci.server.worker).submit(gate.wait, 20)
        what = [{"path": "ci.runs(*)", "age": ".at", "after": "1d"}, {"path": "jobs.*", "age": ".updatedAt",
                                                                       "after": "1d"},
                {"path": "ci.runs(*)", "age": ".at", "after": "1h"}]
        plan = route({"retain": {"now": stamp(NOW), "what": what}}, world.table(), now=NOW)
        arrived: list[str] = []

        async def main():
            owners = Owners(timeout=60)

            async def call(owner, request):
                answer = await owners.call(owner, request)
                arrived.append(owner.name)
                if owner.name != slow:
                    gate.set()  # the fast owner has answered: let the slow one go
                return answer

            try:
                return await fan_out(plan, call)
            finally:
                await owners.aclose()

        result = asyncio.run(main())["result"]["retain"]
        assert arrived == [name for name in ("logd", "ci") if name != slow] + [slow]
        assert [(rule["path"], rule["owner"], rule["deleted"]) for rule in result["rules"]] == [
            ("ci.runs(*)", "ci", 1), ("jobs.*", "logd", 1), ("ci.runs(*)", "ci", 1)]
        assert result["deleted"] == 3


class TestOwnersDown:
    def test_an_owner_down_fails_its_rules_only(self, world, tmp_path):
        """verse.ctl unreachable: its rule carries unavailable naming it; logd's and ci's rules run."""
        runs(world.ci_store, {"r1": timedelta(days=3)})
        with world.client(world.logd) as logd:
            logd.patch([{"set": "jobs.j1", "value": {"updatedAt": stamp(NOW - timedelta(days=3))}}])
        gone = str(tmp_path / "gone.sock")
        table = world.table(verse_ctl="unix:" + gone, ci=world.ci_address)
        with ThreadedServer(DocdServer(table, listen=("127.0.0.1", 0))) as docd, world.client(docd) as client:
            result = client.call("retain", now=stamp(NOW), what=[
                {"path": "jobs.*", "age": ".updatedAt", "after": "1d"},
                {"path": "verse.ctl.runs.*", "age": ".at", "after": "1d"},
                {"path": "ci.runs(*)", "age": ".at", "after": "1d"}])
        assert result["deleted"] == 2 and result["commit"] == 2
        down = result["rules"][1]
        assert down["owner"] == "verse.ctl" and down["error"]["code"] == "unavailable"
        assert down["error"]["message"].startswith(f"verse.ctl at unix:{gone} is unavailable: ")
        assert [rule.get("deleted") for rule in result["rules"]] == [1, None, 1]

    def test_every_owner_down_is_an_error_for_the_request(self, world, tmp_path):
        """Nothing ran anywhere: one error for the request, naming every owner."""
        from retain.servers import free_port

        table = world.table(verse_ctl="unix:" + str(tmp_path / "gone.sock")).with_logd(f"127.0.0.1:{free_port()}")
        with ThreadedServer(DocdServer(table, listen=("127.0.0.1", 0))) as docd, world.client(docd) as client:
            with pytest.raises(OwnerUnavailable) as refused:
                client.call("retain", what=[{"path": "jobs.*", "age": ".updatedAt", "after": "1d"},
                                            {"path": "verse.ctl.runs.*", "age": ".at", "after": "1d"}])
        message = str(refused.value)
        assert message.startswith("nothing ran: logd: logd at 127.0.0.1:")
        assert "; verse.ctl: verse.ctl at unix:" in message

    def test_a_refusal_at_one_owner_fails_its_rules_only(self, world):
        """An owner that refuses its rules (runs.* over a keyed array) fails them; the others run."""
        runs(world.ci_store, {"r1": timedelta(days=3)})
        runs(world.logd_store, {"e1": timedelta(days=3)})  # logd's runs: a keyed array
        with ThreadedServer(DocdServer(world.table(), listen=("127.0.0.1", 0))) as docd, world.client(docd) as client:
            result = client.call("retain", now=stamp(NOW), what=[
                {"path": "runs.*", "age": ".at", "after": "1d"}, {"path": "ci.runs(*)", "age": ".at", "after": "1d"}])
        assert result["rules"][0]["error"]["code"] == "invalid_retain"
        assert "write the rule over its elements as runs(*)" in result["rules"][0]["error"]["message"]
        assert result["rules"][1]["deleted"] == 1 and "commit" not in result


class TestRequestChecked:
    def test_a_bad_rule_runs_nothing_anywhere(self, world, docd):
        """A malformed rule for one owner is refused whole by docd: no owner runs its rules."""
        runs(world.ci_store, {"r1": timedelta(days=3)})
        with world.client(docd) as client:
            answer = client.request({"retain": {"now": stamp(NOW), "what": [
                {"path": "ci.runs(*)", "age": ".at", "after": "1d"},
                {"path": "jobs.*", "age": ".updatedAt", "after": "-1d"}]}})
        assert answer["error"]["code"] == "invalid_retain"
        assert answer["error"]["message"].startswith("retain what[1] (jobs.*): after must be a positive duration")
        assert world.ci_store.head == 2


class TestDrivers:
    def test_retain_logd_retain_through_docd(self, world, docd, tmp_path):
        """retain logd retain sends a request file to docd as it would to logd, and prints the routed answer."""
        from click.testing import CliRunner

        from retain.cli import main

        request = tmp_path / "expire.yaml"
        request.write_bytes(SEED_REQUEST.replace(b"...\n", b""))
        result = CliRunner().invoke(main, ["logd", "retain", str(request), "--connect", "{}:{}".format(*docd.address)])
        assert result.exit_code == 0, result.output
        assert "  - {path: jobs.*, deleted: 0, owner: logd}\n" in result.output
        assert "    owner: logd\n    under: [verse.ctl]\n" in result.output

    def test_a_schedules_log_line_reads_a_routed_answer(self, world, docd):
        """retain logd schedule, pointed at docd, logs each routed answer: owners, and why a rule did not run."""
        from retain.logd.schedule import describe_answer, send_retain

        answer = send_retain(docd.address, {"retain": {"now": stamp(NOW), "what": [
            {"path": "jobs.*", "age": ".updatedAt", "after": "1d"}, {"path": "verse.ctl.runs.*", "age": ".at",
                                                                     "after": "1d"}]}})
        assert describe_answer(answer) == (
            "retain at 2026-09-12T08:00:00Z: deleted 0 (jobs.* at logd: 0; verse.ctl.runs.* at verse.ctl: "
            "unsupported: unsupported operation: request type), logd commit 0")
