"""Several logd servers on one PostgreSQL database, each a process of its own, with writers and watchers in
processes of their own: commits gapless and in one order, every watcher on either server sees every commit once
and in order, replaying the log gives the final state, nothing acknowledged is lost -- through a server
SIGKILLed and restarted, a retain pass on one server racing writers on the other, and PostgreSQL restarting
under a running server."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from retain.clock import parse_rfc3339
from retain.errors import LogdError
from retain.logd import Store
from retain.logd.client import Client
from retain.logd.retain_rules import parse_retain, select
from retain.logd.server import ServerThread
from retain.logd.settings import Settings
from retain.servers import PostgresServer
from retain.servers._process import free_port
from tests.helpers.waiting import accepts, wait_for
from tests.logd.test_retain_race import EXPIRED, JOBS, NOW, RULE, WRITER, acknowledged

#: A writer process: ``count`` patches of its own job names to the server at ``port``, each acknowledged write
#: appended to its log as {job, commit, value}; a write that fails (the server went away) is retried on a new
#: connection and logged only once acknowledged.
STEADY_WRITER = """
import json, sys, time
from retain.logd.client import Client
port, name, count, log_path = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
client = None
with open(log_path, "a") as log:
    n = 0
    while n < count:
        value = {"by": name, "n": n}
        try:
            if client is None:
                client = Client(("127.0.0.1", int(port)), author=name, timeout=30)
            commit = client.patch([{"set": f"jobs.{name}-{n % 7}", "value": value}]).commit
        except Exception:  # the server went away, or its database: not acknowledged, so tried again
            if client is not None:
                client.close()
                client = None
            time.sleep(0.05)  # a pause before reconnecting, not a wait for anything
            continue
        log.write(json.dumps({"job": f"{name}-{n % 7}", "commit": commit, "value": value}) + "\\n")
        log.flush()
        n += 1
"""

#: A watcher process: watches the whole tree from commit 1 on the server at ``port`` and appends each delta's
#: commit number to its log, until the connection ends.
WATCHER = """
import sys
from retain.logd.client import Client
port, log_path = sys.argv[1], sys.argv[2]
with Client(("127.0.0.1", int(port)), timeout=600) as client, open(log_path, "a") as log:
    client.watch(None, first=1)
    while True:
        try:
            delta = client.next_delta()
        except Exception:
            break
        log.write(f"{delta['commit']}\\n")
        log.flush()
"""


def spawn(*argv: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, *argv], env=dict(os.environ, PYTHONUNBUFFERED="1"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


class Servers:
    """``retain logd serve --db URL`` processes on free loopback ports; killed at the end."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.processes: dict[int, subprocess.Popen[bytes]] = {}

    def start(self, port: int | None = None) -> int:
        port = port or free_port()
        process = spawn("-c", "from retain.cli import main; main()", "logd", "serve", "--db", self.url,
                        "--listen", f"127.0.0.1:{port}")
        self.processes[port] = process
        wait_for(lambda: accepts(port), what=f"logd on {port}", timeout=60.0, child=process)
        return port

    def kill(self, port: int) -> None:
        process = self.processes.pop(port)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)

    def close(self) -> None:
        for port in list(self.processes):
            self.kill(port)


def watched(log: Path) -> list[int]:
    return [int(line) for line in log.read_text().splitlines() if line.strip()]


@pytest.fixture
def database(pg_databases) -> Iterator[str]:
    url = pg_databases.create("servers")
    yield url
    pg_databases.drop(url)


@pytest.fixture
def servers(database) -> Iterator[Servers]:
    running = Servers(database)
    yield running
    running.close()


def check_log(url: str, writes: list[dict]) -> Store:
    """Gapless commits, the replayed log equal to the final state, every acknowledged write in its commit and,
    as the last write to its job, in the final state. Returns the store (the caller closes it)."""
    store = Store.open(url)
    log = list(store.backend.commits(1, (0,)))
    assert [record.number for record in log] == list(range(1, store.head + 1))
    by_commit = {record.number: record for record in log}
    for write in writes:
        assert {"set": f"jobs.{write['job']}", "value": write["value"]} in by_commit[write["commit"]].ops
    replayed = Store.open(":memory:", settings=Settings(synchronous="off"))
    for record in log:
        replayed.session(author=record.author).patch(list(record.ops))
    final = store.session().get().value
    assert replayed.session().get().value == final
    replayed.close()
    return store


class TestTwoServersOneDatabase:
    def test_writers_watchers_and_a_server_killed(self, servers, tmp_path):
        """Two servers, two writer processes on each; one server SIGKILLed mid-stream and restarted on its port:
        commits stay gapless, the log replays to the final state, no acknowledged write is lost, the other server
        kept serving, and a watcher on either server saw every commit once and in order."""
        with Client(("127.0.0.1", servers.start()), author="setup") as setup:
            setup.patch([{"set": "jobs", "value": {}}])
        first = next(iter(servers.processes))
        second = servers.start()
        watchers = []
        for port in (first, second):
            log = tmp_path / f"watch-{port}.log"
            log.touch()
            watchers.append((spawn("-c", WATCHER, str(port), str(log)), log))
        writers = []
        for index, port in enumerate((first, first, second, second)):
            log = tmp_path / f"writer-{index}.jsonl"
            log.touch()
            writers.append((spawn("-c", STEADY_WRITER, str(port), f"w{index}", "80", str(log)), log))
        try:
            wait_for(lambda: len(acknowledged(writers[2][1])) >= 20, what="the second server's writers",
                     timeout=120.0, child=writers[2][0])
            servers.kill(second)  # mid-stream: its writers' requests in flight fail, then retry
            servers.start(second)
            for process, _ in writers:
                assert process.wait(timeout=300) == 0
        finally:
            for process, _ in writers:
                if process.poll() is None:
                    process.kill()
        writes = [write for _, log in writers for write in acknowledged(log)]
        assert len(writes) == 4 * 80
        store = check_log(servers.url, writes)
        head = store.head
        # The first server's watcher lived through it all; the second's ended with its server: a fresh one
        # there, from commit 1, sees the whole log too.
        late = tmp_path / "watch-late.log"
        late.touch()
        watchers.append((spawn("-c", WATCHER, str(second), str(late)), late))
        try:
            wait_for(lambda: len(watched(watchers[0][1])) >= head and len(watched(late)) >= head,
                     what="the watchers to reach the head", timeout=120.0)
        finally:
            for process, _ in watchers:
                process.kill()
                process.wait(timeout=30)
        assert watched(watchers[0][1]) == list(range(1, head + 1))
        assert watched(late) == list(range(1, head + 1))
        seen = watched(watchers[1][1])  # up to the kill: a prefix of the log, in order, each once
        assert seen == list(range(1, len(seen) + 1))
        store.close()

    def test_retain_on_one_server_while_writers_patch_through_the_other(self, servers, tmp_path):
        """A retain pass asked of one server while writer processes patch the same jobs through the other:
        some batch fails its guard and is tried again, every item deleted was expired as last acknowledged,
        nothing acknowledged is lost, the log is gapless and replays to the final state."""
        retaining = servers.start()
        writing = servers.start()
        with Client(("127.0.0.1", retaining), author="reset") as logd:
            logd.patch([{"set": "jobs", "value": {f"j{i:03d}": EXPIRED for i in range(JOBS)}}])
        writers = []
        for index in range(2):
            log = tmp_path / f"writer-{index}.jsonl"
            log.touch()
            writers.append((spawn("-c", WRITER, "socket", "127.0.0.1", str(writing), str(JOBS), str(log),
                                  str(tmp_path / "stop"), str(index)), log))
        passes: list[tuple[int, dict]] = []
        try:
            wait_for(lambda: all(len(acknowledged(log)) >= 5 for _, log in writers), what="both writers",
                     timeout=60.0, child=writers[0][0])
            for _ in range(8):
                with Client(("127.0.0.1", retaining), author="reset") as logd:
                    reset = logd.patch([{"set": "jobs", "value": {f"j{i:03d}": EXPIRED for i in range(JOBS)}}])
                    answer = logd.request({"retain": {"now": NOW, "batch": 8, "author": "retention",
                                                      "what": [RULE]}})["result"]["retain"]
                passes.append((reset.commit, answer))
                if answer["rules"][0].get("retried", 0) > 0:
                    break
        finally:
            (tmp_path / "stop").touch()
            for process, _ in writers:
                assert process.wait(timeout=60) == 0
        assert any(answer["rules"][0].get("retried", 0) > 0 for _, answer in passes), passes
        writes = [write for _, log in writers for write in acknowledged(log)]
        store = Store.open(servers.url)
        log = list(store.backend.commits(1, (0,)))
        assert [record.number for record in log] == list(range(1, store.head + 1))
        rule = parse_retain({"what": [RULE]}).rules[0]
        resets = [reset for reset, _ in passes] + [store.head + 1]
        deleted = 0
        for record in log:
            if record.author != "retention":
                continue
            reset = max(r for r in resets if r < record.number)
            for op in record.ops:
                job = op["delete"].removeprefix("jobs.")
                deleted += 1
                before = sorted((w for w in writes if w["job"] == job and reset < w["commit"] < record.number),
                                key=lambda w: w["commit"])
                last = before[-1]["value"] if before else EXPIRED
                assert select([(job, last)], rule, parse_rfc3339(NOW)).expired, (job, record.number)
        assert deleted == sum(answer["deleted"] for _, answer in passes)
        replayed = Store.open(":memory:", settings=Settings(synchronous="off"))
        for record in log:
            replayed.session(author=record.author).patch(list(record.ops))
        assert replayed.session().get().value == store.session().get().value
        replayed.close()
        store.close()


class TestPostgresRestart:
    def test_requests_fail_unavailable_then_succeed(self):
        """PostgreSQL stops under a running logd: a request then fails with `unavailable` (nothing written);
        once PostgreSQL is back, requests succeed on a new connection and every acknowledged write is there."""
        with PostgresServer() as pg:
            url = pg.create_database("restart")
            store = Store.open(url)
            with ServerThread(store, listen=("127.0.0.1", 0)) as served, \
                    Client(served.server.address, author="writer") as client:
                acknowledged_commits = [client.patch([{"set": "jobs", "value": {"j0": {"n": 0}}}]).commit]
                pg._child.process.send_signal(signal.SIGINT)  # fast shutdown: connections are cut
                pg._child.process.wait(timeout=60)
                pg.stop()
                with pytest.raises(LogdError) as failed:
                    client.patch([{"set": "jobs.j1", "value": {"n": 1}}])
                assert failed.value.code == "unavailable"
                with pytest.raises(LogdError) as failed:
                    client.get("jobs")
                assert failed.value.code == "unavailable"
                pg.start()
                acknowledged_commits.append(client.patch([{"set": "jobs.j2", "value": {"n": 2}}]).commit)
                assert client.get("jobs").value == {"j0": {"n": 0}, "j2": {"n": 2}}
            store.close()
            assert acknowledged_commits == [1, 2]
            with Store.open(url) as again:
                assert [record.number for record in again.backend.commits(1, (0,))] == [1, 2]
