"""A retain pass served over the wire while writers in processes of their own race it (socket and HTTP).

The pass reads, then queues one batch at a time on logd's writer, so other clients' writes land between
its batches: a write to an item the pass selected makes that item's batch fail its guard, and its items are
read again and tried again (``retried``). Whatever the interleaving, no acknowledged write is lost -- every
item the pass deleted was, as last acknowledged before its delete, one the rule expires at the pass's
``now`` -- commits stay gapless, and replaying the log gives the final state.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx

from retain.clock import parse_rfc3339
from retain.logd import Store
from retain.logd.client import Client
from retain.logd.retain_rules import parse_retain, select
from retain.logd.server import ServerThread
from retain.logd.settings import Settings
from tests.helpers.waiting import wait_for

JOBS = 300
NOW = "2026-09-12T08:00:00Z"
RULE = {"path": "jobs.*", "match": {"status": "done"}, "age": ".updatedAt", "after": "1d"}
EXPIRED = {"status": "done", "updatedAt": "2026-09-01T00:00:00Z"}

#: A writer in a process of its own: refreshes random jobs over a socket or HTTP until the stop file
#: appears, and appends every acknowledged write to its log as a JSON line {job, commit, value}.
WRITER = """
import json, os, random, sys
import httpx
from retain.logd.client import Client
transport, host, port, jobs, log_path, stop_path, seed = sys.argv[1:]
rng = random.Random(int(seed))
client = Client((host, int(port)), author=f"{transport}-writer") if transport == "socket" else None
url = f"http://{host}:{port}/"
with open(log_path, "a") as log:
    n = 0
    while not os.path.exists(stop_path):
        job = f"j{rng.randrange(int(jobs)):03d}"
        value = {"status": rng.choice(["running", "done"]), "updatedAt": "2026-09-12T07:59:00Z", "n": n}
        body = {"patch": {"ops": [{"set": f"jobs.{job}", "value": value}]}}
        if client is not None:
            commit = client.request(body)["result"]["patch"]["commit"]
        else:
            commit = httpx.post(url, json=body, headers={"Logd-Author": "http-writer"}).json()["result"]["patch"]["commit"]
        log.write(json.dumps({"job": job, "commit": commit, "value": value}) + "\\n")
        log.flush()
        n += 1
"""


def start_writers(served: ServerThread, tmp: Path) -> list[tuple[subprocess.Popen[bytes], Path]]:
    (host, port), (http_host, http_port) = served.server.address, served.server.http_address
    writers = []
    for index, (transport, h, p) in enumerate([("socket", host, port), ("http", http_host, http_port)]):
        log = tmp / f"{transport}.jsonl"
        log.touch()
        process = subprocess.Popen([sys.executable, "-c", WRITER, transport, h, str(p), str(JOBS), str(log),
                                    str(tmp / "stop"), str(index)])
        writers.append((process, log))
    return writers


def acknowledged(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines() if line.endswith("}")]


def retain_over(served: ServerThread, transport: str) -> dict:
    body = {"retain": {"now": NOW, "batch": 8, "author": "retention", "what": [RULE]}}
    if transport == "socket":
        with Client(served.server.address) as logd:
            answer = logd.request(body)
    else:
        answer = httpx.post(served.http_url, json=body, timeout=120).json()
    assert "result" in answer, answer
    return answer["result"]["retain"]


class TestRacingWritersOverTheWire:
    def test_retries_lose_nothing_and_replay(self, tmp_path, clock):
        """Writers over a socket and over HTTP, each a process, rewrite random jobs while passes run (asked
        over a socket, then HTTP, ...): some batch fails its guard and is tried again in some pass, no
        acknowledged write is lost, commits are gapless, and replaying the log gives the final state."""
        store = Store.open(str(tmp_path / "raced.sqlite3"), settings=Settings(synchronous="normal"), clock=clock)
        rule = parse_retain({"what": [RULE]}).rules[0]
        passes: list[tuple[int, dict]] = []  # (the commit that reset the jobs, the pass's answer)
        with ServerThread(store, listen=("127.0.0.1", 0), http=("127.0.0.1", 0)) as served:
            writers = start_writers(served, tmp_path)
            try:
                wait_for(lambda: all(len(acknowledged(log)) >= 5 for _, log in writers), what="both writers",
                         timeout=60.0, child=writers[0][0])
                for attempt in range(8):
                    with Client(served.server.address, author="reset") as logd:
                        reset = logd.patch([{"set": "jobs", "value": {f"j{i:03d}": EXPIRED for i in range(JOBS)}}])
                    answer = retain_over(served, "socket" if attempt % 2 == 0 else "http")
                    passes.append((reset.commit, answer))
                    if answer["rules"][0].get("retried", 0) > 0 and attempt >= 1:
                        break
            finally:
                (tmp_path / "stop").touch()
                for process, _ in writers:
                    assert process.wait(timeout=60) == 0
        writes = [write for _, log in writers for write in acknowledged(log)]
        assert any(answer["rules"][0].get("retried", 0) > 0 for _, answer in passes), passes

        log = list(store.backend.commits(1, (0,)))
        assert [record.number for record in log] == list(range(1, store.head + 1))  # gapless
        deletes = {}  # commit -> jobs the pass deleted there
        for record in log:
            if record.author == "retention":
                deletes[record.number] = [op["delete"].removeprefix("jobs.") for op in record.ops]
        assert sum(answer["deleted"] for _, answer in passes) == sum(map(len, deletes.values()))
        resets = [reset for reset, _ in passes] + [store.head + 1]
        for reset, following in zip(resets, resets[1:], strict=False):
            for commit in (commit for commit in deletes if reset < commit < following):
                for job in deletes[commit]:
                    # the job as last acknowledged before its delete: the reset's, or a writer's after it
                    before = sorted((write for write in writes if write["job"] == job and
                                     reset < write["commit"] < commit), key=lambda write: write["commit"])
                    last = before[-1]["value"] if before else EXPIRED
                    assert select([(job, last)], rule, parse_rfc3339(NOW)).expired, \
                        f"{job} deleted at commit {commit} over the acknowledged write {before[-1]}"

        replayed = Store.open(str(tmp_path / "replayed.sqlite3"), settings=Settings(synchronous="off"))
        for record in log:
            replayed.session(author=record.author).patch(list(record.ops))
        assert replayed.session().get().value == store.session().get().value
        replayed.close()
        store.close()

    def test_writes_come_between_batches(self, tmp_path, clock):
        """A patch sent on another connection while a pass runs is committed before the pass's last batch:
        the pass does not hold the writer for its whole length."""
        store = Store.open(str(tmp_path / "between.sqlite3"), settings=Settings(synchronous="normal"), clock=clock)
        with ServerThread(store, listen=("127.0.0.1", 0)) as served:
            for _ in range(3):  # the patch must reach the writer before the pass's last batch: it always has
                with Client(served.server.address) as logd:
                    logd.patch([{"set": "jobs", "value": {f"j{i:04d}": EXPIRED for i in range(1000)}}])
                with Client(served.server.address) as watcher, Client(served.server.address) as retention, \
                        Client(served.server.address, author="other") as other:
                    watcher.watch("jobs")
                    retention.send({"retain": {"now": NOW, "batch": 1, "author": "retention", "what": [RULE]}})
                    first = watcher.next_delta()
                    assert first["author"] == "retention"
                    patched = other.patch([{"set": "other", "value": first["commit"]}]).commit
                    answer = retention.receive()["result"]["retain"]
                if patched < answer["commit"]:
                    break
        store.close()
        assert first["commit"] < patched < answer["commit"]
