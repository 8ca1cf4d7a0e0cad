"""Retain on the wire: braced documents (docs/logd.md), sockets, HTTP, racing writers, the CLI and the schedule."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import threading
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from click.testing import CliRunner

from retain.cli import main
from retain.errors import InvalidDocument, InvalidPolicy
from retain.logd import Store
from retain.logd.client import Client
from retain.logd.schedule import describe_answer, parse_schedule, reasked, run_schedule
from retain.logd.server import ServerThread
from retain.logd.settings import Settings
from retain.wire import Or, dump_braced, load
from tests.helpers.seed004 import SEED_REQUEST, SEED_RESULT, seed_scene
from tests.helpers.waiting import wait_for

#: the answer of docs/logd-retain.md's example, as printed there
SEED_ANSWER = """\
{result: {retain: {
  now: "2026-09-12T08:00:00Z"
  commit: 4127
  deleted: 312
  rules:
  - {path: jobs.*, deleted: 300, unreadable: 2}
  - {path: events(*), deleted: 12}
}}}
"""


class TestBraced:
    def test_the_seed_documents_read_as_written(self):
        """The seed's request and answer, braces around block content, load as the documents they show."""
        request, fmt = load(SEED_REQUEST)
        assert fmt == "yaml" and request["retain"]["what"][0]["match"] == {"status": Or(("done", "canceled"))}
        answer, _ = load(SEED_ANSWER)
        assert answer == {"result": {"retain": {**SEED_RESULT, "commit": 4127}}}

    def test_dump_braced_prints_the_seed_shape(self):
        """An answer is printed in the braced shape, character for character."""
        assert dump_braced({"result": {"retain": {**SEED_RESULT, "commit": 4127}}}) == SEED_ANSWER

    def test_round_trip(self):
        """What dump_braced writes, load reads back the same; a document of no braced shape is plain YAML."""
        request = load(SEED_REQUEST)[0]
        assert load(dump_braced(request))[0] == request
        assert dump_braced({"a": 1, "b": 2}) == "a: 1\nb: 2\n"
        assert load(dump_braced({"error": {"code": "x", "message": "a: b"}}))[0] == {
            "error": {"code": "x", "message": "a: b"}}

    @pytest.mark.parametrize(("text", "message"), [
        ("{retain: {\n  now: x,\n  batch: 1\n  what: []\n}}\n", "not a YAML or JSON document"),  # flow, a slip
        ("{retain: {\n  what: [\n}}\n", "(line 3, column 1)"),  # an error names the sender's line
        ("{retain: {\n  what: []\n}}}\n", "not a YAML or JSON document"),  # braces that do not pair
        ("{retain: {\n  what: !nope []\n}}\n", "unknown tag !nope"),  # the braced reading is just as safe
        ("{retain: {\n  what: *a\n}}\n", "aliases are refused"),
    ])
    def test_refusals(self, text, message):
        """A braced document is read under the same rules as any YAML, and errors point at the sender's lines."""
        with pytest.raises(InvalidDocument, match=re.escape(message)):
            load(text)


class TestOnTheWire:
    def test_seed_request_over_a_socket(self, served, store):
        """The seed's request, sent as written on a stream socket, answers the example's answer."""
        seed_scene(store)
        with Client(served.address, fmt="yaml") as logd:
            logd.sock.sendall(SEED_REQUEST.encode() + b"...\n")
            assert logd.receive() == {"result": {"retain": SEED_RESULT}}

    def test_a_read_pipelined_behind_sees_the_deletes(self, served, store):
        """retain runs on the loop as a patch does: a list sent right behind it sees what it deleted."""
        seed_scene(store)
        with Client(served.address) as logd:
            answers = logd.pipeline([load(SEED_REQUEST)[0], {"list": {"path": "events(*)"}},
                                     {"list": {"path": "events(*)", "at": 3}}])
        assert answers[0]["result"]["retain"]["deleted"] == 312
        assert answers[1]["result"]["list"]["commit"] == 6 and len(answers[1]["result"]["list"]["items"]) == 30
        assert len(answers[2]["result"]["list"]["items"]) == 42

    def test_watchers_see_the_deletes(self, served, store):
        """A watcher on another connection sees each delete commit as a delta with the request's author."""
        seed_scene(store)
        with Client(served.address) as watcher, Client(served.address, author="ops") as logd:
            watcher.watch("events")
            logd.request(load(SEED_REQUEST)[0])
            delta = watcher.next_delta()
        assert (delta["commit"], delta["author"], len(delta["ops"])) == (6, "verse/retention", 12)

    def test_http(self, served, store):
        """Over HTTP: the example's request is answered 200 in its shape; a refusal is 400 invalid_retain."""
        seed_scene(store)
        answer = httpx.post(served.http_url, content=SEED_REQUEST, headers={"Logd-Author": "web"})
        assert answer.status_code == 200 and load(answer.text)[0] == {"result": {"retain": SEED_RESULT}}
        refused = httpx.post(served.http_url, json={"retain": {"what": [{"path": "list[*]", "age": ".at",
                                                                          "after": "1d"}]}})
        assert refused.status_code == 400 and refused.json()["error"]["code"] == "invalid_retain"

    def test_scoped_session(self, served, store):
        """A connection in a scope ages the scope's view; the baseline keeps its records."""
        seed_scene(store)
        with Client(served.address, scope="trial-1") as trial:
            assert trial.call("retain", **load(SEED_REQUEST)[0]["retain"])["deleted"] == 312
            assert len(trial.list("jobs.*").items) == 43
        with Client(served.address) as baseline:
            assert len(baseline.list("jobs.*").items) == 343


class TestRacingWriters:
    def test_every_racing_write_survives(self, tmp_path, clock):
        """INV-PRECONDITION under load: writers on a second server over the same file keep refreshing every
        third expired job while a retain runs on the first in batches of one. No job is deleted over a write:
        each write came after its job's delete (and recreated it) or kept the job from being deleted."""
        path = str(tmp_path / "shared.sqlite3")
        jobs = 120
        settings = Settings(synchronous="normal")
        with Store.open(path, settings=settings, clock=clock) as first, \
                Store.open(path, settings=settings, clock=clock) as second, \
                ServerThread(first, listen=("127.0.0.1", 0)) as retaining, \
                ServerThread(second, listen=("127.0.0.1", 0)) as writing:
            first.session().patch([{"set": "jobs", "value": {
                f"j{i:03d}": {"status": "done", "updatedAt": "2026-09-01T00:00:00Z"} for i in range(jobs)}}])
            writes: list[tuple[str, int]] = []  # (job, commit of the write)
            done = threading.Event()
            errors: list[BaseException] = []

            def write(number: int) -> None:
                try:
                    with Client(writing.address, author=f"writer-{number}") as logd:
                        sequence = 0
                        while not done.is_set():
                            name = f"j{(sequence * 21 + number * 30) % jobs:03d}"  # every third job
                            commit = logd.patch([{"set": f"jobs.{name}", "value": {
                                "status": "running", "updatedAt": "2026-09-12T07:59:00Z", "writer": number}}]).commit
                            writes.append((name, commit))
                            sequence += 1
                except BaseException as exc:  # surfaced below
                    errors.append(exc)

            writers = [threading.Thread(target=write, args=(n,)) for n in range(2)]
            for thread in writers:
                thread.start()
            wait_for(lambda: len(writes) >= 4, what="the writers to start", timeout=30.0)
            with Client(retaining.address, author="retention") as logd:
                result = logd.call("retain", now="2026-09-12T08:00:00Z", batch=1,
                                   what=[{"path": "jobs.*", "match": {"status": "done"}, "age": ".updatedAt",
                                          "after": "1d"}])
            done.set()
            for thread in writers:
                thread.join(timeout=60)
            assert not errors, errors
            final = first.session().list("jobs.*").items
            deleted_at = {op["delete"][len("jobs."):]: record.number
                          for record in first.backend.commits(1, (0,)) if record.author == "retention"
                          for op in record.ops}
        untouched = {f"j{i:03d}" for i in range(jobs) if i % 3}
        assert len(deleted_at) == result["rules"][0]["deleted"] and set(deleted_at) >= untouched
        for name, commit in writes:
            assert name not in deleted_at or commit > deleted_at[name], f"{name} was deleted over a write"
            assert final[name]["status"] == "running"  # every racing write survives
        assert set(final) == (set(f"j{i:03d}" for i in range(jobs)) - set(deleted_at)) | {name for name, _ in writes}


class TestCli:
    def invoke(self, served, *args, input=None):
        return CliRunner().invoke(main, ["logd", "retain", *args, "--connect", "{}:{}".format(*served.address)],
                                  input=input)

    def test_retain_file(self, served, store, tmp_path):
        """retain logd retain FILE sends the example's request and prints the answer in the braced shape."""
        seed_scene(store)
        request = tmp_path / "expire.yaml"
        request.write_text(SEED_REQUEST)
        result = self.invoke(served, str(request))
        assert result.exit_code == 0, result.output
        assert result.output == SEED_ANSWER.replace("4127", "6")

    def test_body_now_and_json(self, served, store):
        """The file may hold just the body; --now overrides its now; --json prints one line."""
        seed_scene(store)
        result = self.invoke(served, "-", "--now", "2027-09-12T08:00:00Z", "--json",
                             input="what: [{path: 'events(*)', age: .at, after: 1y}]\n")
        assert result.exit_code == 0, result.output
        assert result.output == ('{"result":{"retain":{"now":"2027-09-12T08:00:00Z","commit":4,"deleted":42,'
                                 '"rules":[{"path":"events(*)","deleted":42}]}}}\n')

    def test_refused_before_sending(self, served, store):
        """A request that cannot mean what it says is refused with one line, and nothing is sent."""
        seed_scene(store)
        result = self.invoke(served, "-", input="{retain: {what: [{path: 'list[*]', age: .at, after: 1d}]}}")
        assert result.exit_code == 1 and "Error: retain what[0]: path list[*] is a dense array" in result.output
        assert store.head == 3

    def test_error_answer(self, served, store):
        """An error answer is printed and exits 1."""
        seed_scene(store)
        result = self.invoke(served, "-", input="{retain: {what: [{path: 'events.*', age: .at, after: 1d}]}}")
        assert result.exit_code == 1
        assert load(result.output)[0]["error"]["code"] == "invalid_retain" and "events(*)" in result.output


SCHEDULE = """\
every = "1s"
author = "verse/retention"
batch = 2

[[rule]]
path = "jobs.*"
match = { status = { "!or" = ["done", "canceled"] } }
age = ".updatedAt"
after = "1d"
"""


class TestSchedule:
    def test_parse(self):
        """The TOML declares the beat and the rules; tags are written in their JSON spelling."""
        schedule = parse_schedule(SCHEDULE)
        assert schedule.every == timedelta(seconds=1) and schedule.connect is None
        now = datetime(2026, 9, 12, 8, tzinfo=UTC)
        assert schedule.request_at(now) == {"retain": {"now": "2026-09-12T08:00:00Z", "batch": 2,
                                                       "author": "verse/retention", "what": [
            {"path": "jobs.*", "match": {"status": Or(("done", "canceled"))}, "age": ".updatedAt",
             "after": "1d"}]}}

    @pytest.mark.parametrize(("text", "message"), [
        ("every = \"1h\"\n", "at least one [[rule]] table is required"),
        ("[[rule]]\npath = \"jobs.*\"\nage = \".a\"\nafter = \"1d\"\n", "field 'every': missing"),
        ("every = \"soon\"\n[[rule]]\n", "field 'every': invalid duration 'soon'"),
        ("every = \"1h\"\nevery_day = 1\n", "unknown field 'every_day'"),
        ("every = \"1h\"\n[[rule]]\npath = \"jobs.*\"\nage = \".a\"\nafter = \"1d\"\n[[rule]]\npath = \"l[*]\"\n"
         "age = \".a\"\nafter = \"1d\"\n", "<string>: rule 2: path l[*] is a dense array"),
        ("every = \"1h\"\nbatch = -1\n[[rule]]\npath = \"jobs.*\"\nage = \".a\"\nafter = \"1d\"\n",
         "batch is the most items"),
        ("every = \"1h\"\nconnect = \"nowhere\"\n[[rule]]\npath = \"jobs.*\"\nage = \".a\"\nafter = \"1d\"\n",
         "a logd address is HOST:PORT"),
        ("every = [\n", "not valid TOML"),
    ])
    def test_refusals(self, text, message):
        """A schedule that cannot mean what it says is refused before anything connects, naming the field."""
        with pytest.raises(InvalidPolicy, match=re.escape(message)):
            parse_schedule(text)

    def test_once(self, served, store, tmp_path):
        """--once sends one request with the caller's clock and prints the answer."""
        store.session().patch([{"set": "jobs", "value": {
            "old": {"status": "done", "updatedAt": "2000-01-01T00:00:00Z"},
            "future": {"status": "done", "updatedAt": "2999-01-01T00:00:00Z"}}}])
        policy = tmp_path / "retain-jobs.toml"
        policy.write_text(SCHEDULE)
        result = CliRunner().invoke(main, ["logd", "schedule", str(policy), "--once", "--connect",
                                           "{}:{}".format(*served.address)])
        assert result.exit_code == 0, result.output
        answer = load(result.output)[0]["result"]["retain"]
        assert answer["rules"] == [{"path": "jobs.*", "deleted": 1}]
        sent = datetime.fromisoformat(answer["now"])
        assert abs(sent - datetime.now(UTC)) < timedelta(minutes=5)  # this machine's clock, not logd's
        assert list(store.session().list("jobs.*").items) == ["future"]

    def test_once_json(self, served, store, tmp_path):
        """--once --log-format json prints the answer as one JSON line."""
        store.session().patch([{"set": "jobs", "value": {"old": {"status": "done", "updatedAt": "2000-01-01T00:00:00Z"}}}])
        policy = tmp_path / "retain-jobs.toml"
        policy.write_text(SCHEDULE)
        result = CliRunner().invoke(main, ["logd", "schedule", str(policy), "--once", "--log-format", "json",
                                           "--connect", "{}:{}".format(*served.address)])
        assert result.exit_code == 0, result.output
        assert len(result.output.splitlines()) == 1
        assert json.loads(result.output)["result"]["retain"]["rules"] == [{"path": "jobs.*", "deleted": 1}]

    def test_beats(self, served, store):
        """On its beat the schedule sends the same request with each beat's now from the caller's clock."""
        store.session().patch([{"set": "jobs", "value": {
            "a": {"status": "done", "updatedAt": "2026-09-12T08:00:00Z"},
            "b": {"status": "done", "updatedAt": "2026-09-13T08:00:00Z"}}}])
        instants = iter([datetime(2026, 9, 13, 8, 0, tzinfo=UTC) + timedelta(days=n) for n in range(100)])
        answers, stop = [], threading.Event()

        def on_answer(now, answer):
            answers.append((now, answer))
            if len(answers) == 2:
                stop.set()

        beats = run_schedule(parse_schedule(SCHEDULE), served.address, stop=stop, on_answer=on_answer,
                             on_error=lambda now, error: pytest.fail(str(error)), clock=lambda: next(instants))
        assert beats == 2
        assert [answer["result"]["retain"]["now"] for _, answer in answers] == ["2026-09-13T08:00:00Z",
                                                                                "2026-09-14T08:00:00Z"]
        assert [answer["result"]["retain"]["deleted"] for _, answer in answers] == [1, 1]
        assert describe_answer(answers[0][1]) == "retain at 2026-09-13T08:00:00Z: deleted 1 (jobs.*: 1), commit 2"
        assert store.session().get("jobs").value == {}

    def test_daemon_process(self, served, store, tmp_path):
        """retain logd schedule as a real process: it beats until SIGTERM, logs each answer, and exits 0."""
        store.session().patch([{"set": "jobs", "value": {
            "old": {"status": "done", "updatedAt": "2000-01-01T00:00:00Z"},
            "young": {"status": "done", "updatedAt": "2999-01-01T00:00:00Z"}}}])
        policy = tmp_path / "retain-jobs.toml"
        policy.write_text(f'connect = "{served.address[0]}:{served.address[1]}"\n' + SCHEDULE)
        process = subprocess.Popen([sys.executable, "-c", "from retain.cli import main; main()", "logd", "schedule",
                                    str(policy)], stderr=subprocess.PIPE, text=True)
        try:
            wait_for(lambda: store.head >= 2 and process.poll() is None, what="the first beat's delete", timeout=30.0)
        finally:
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=30) == 0
        log = process.stderr.read()
        assert "retain schedule from" in log and "deleted 1 (jobs.*: 1)" in log and "stopped after" in log
        assert list(store.session().list("jobs.*").items) == ["young"]

    def test_retry(self):
        """retry is how soon rules that skipped items are asked again: a duration, by default the lesser of a
        minute and the beat; a beat of a subset of the rules asks only those, in the file's order."""
        assert parse_schedule(SCHEDULE).retry_after == timedelta(seconds=1)
        assert parse_schedule(SCHEDULE.replace('every = "1s"', 'every = "1h"')).retry_after == timedelta(minutes=1)
        schedule = parse_schedule(SCHEDULE.replace('every = "1s"', 'every = "1h"\nretry = "5m"') +
                                  '[[rule]]\npath = "events(*)"\nage = ".at"\nafter = "1y"\n')
        assert schedule.retry_after == timedelta(minutes=5)
        now = datetime(2026, 9, 12, 8, tzinfo=UTC)
        assert [rule["path"] for rule in schedule.request_at(now, [1])["retain"]["what"]] == ["events(*)"]
        with pytest.raises(InvalidPolicy, match="field 'retry': invalid duration 'soon'"):
            parse_schedule('retry = "soon"\n' + SCHEDULE)

    def test_reasked(self):
        """The rules to ask again are those of the rules sent whose answer reported skipped items; none of an
        error answer."""
        answer = {"result": {"retain": {"rules": [{"path": "a.*", "deleted": 1, "skipped": 2},
                                                  {"path": "b.*", "deleted": 0, "retried": 3},
                                                  {"path": "c.*", "deleted": 0, "skipped": 1, "owner": "logd"}]}}}
        assert reasked(answer, [0, 1, 2]) == (0, 2)
        assert reasked(answer, [3, 5, 7]) == (3, 7)
        assert reasked({"error": {"code": "storage_error", "message": "down"}}, [0]) == ()

    @pytest.mark.parametrize("backend_name", ["postgres"])
    def test_rules_that_skipped_are_asked_again_on_the_next_beat(self, served, store):
        """A pass that must skip an item (written after the read with a value only the general path can judge on
        PostgreSQL, a \\u0000 escape jsonb refuses): the next beat comes retry after the first and asks only that
        rule, and that pass deletes the item; the beat after it is the regular one, an hour on."""
        store.session().patch([{"set": "jobs", "value": {
            "a": {"status": "done", "updatedAt": "2026-09-01T00:00:00Z"},
            "b": {"status": "done", "updatedAt": "2026-09-01T00:00:00Z"}}}, {"set": "runs", "value": {}}])

        def race(record):  # after the pass deleted jobs.a, and before it tries jobs.b
            if record.author == "verse/retention" and record.ops == ({"delete": "jobs.a"},):
                store.session(author="racer").patch([{"set": "jobs.b.note", "value": "\u0000"}])

        store.listen(race)
        policy = SCHEDULE.replace('every = "1s"', 'every = "1h"\nretry = "1s"').replace("batch = 2", "batch = 1")
        policy += '[[rule]]\npath = "runs.*"\nage = ".at"\nafter = "1y"\n'
        answers, stop = [], threading.Event()
        errors: list[Exception] = []
        beating = threading.Thread(target=run_schedule, args=(parse_schedule(policy), served.address), kwargs={
            "stop": stop, "on_answer": lambda now, answer: answers.append(answer),
            "on_error": lambda now, error: errors.append(error)})
        beating.start()
        try:
            wait_for(lambda: len(answers) >= 2 or errors, what="the beat that asks again", timeout=60.0)
        finally:
            stop.set()
            beating.join(timeout=60)
        assert errors == [] and len(answers) == 2, (errors, answers)
        assert answers[0]["result"]["retain"]["rules"] == [{"path": "jobs.*", "deleted": 1, "skipped": 1},
                                                           {"path": "runs.*", "deleted": 0}]
        assert answers[1]["result"]["retain"]["rules"] == [{"path": "jobs.*", "deleted": 1}]
        assert store.session().get("jobs").value == {}

    def test_unreachable(self):
        """A logd that cannot be reached is reported for that beat; the schedule goes on."""
        errors, stop = [], threading.Event()

        def on_error(now, error):
            errors.append(error)
            stop.set()

        run_schedule(parse_schedule(SCHEDULE), ("127.0.0.1", 1), stop=stop, on_answer=lambda *a: None,
                     on_error=on_error)
        assert "cannot reach logd" in str(errors[0])
