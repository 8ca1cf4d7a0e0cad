"""INV-PROGRESS: a retain pass under writes deletes every item that was eligible when it read and that nobody
wrote during the pass; an item written after the read goes only if it still qualified when its batch committed.

Writers patch the container's items throughout a pass: in this process before every delete the pass tries (a
seeded random writer, on both backends; a Hypothesis property over random writes and the three ways a rule is
judged), and in a process of their own against a served store (both backends).
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from retain.errors import NotFound
from retain.logd import Store, run_retain
from retain.logd.client import Client
from retain.logd.retain import tries
from retain.logd.settings import Settings
from tests.helpers.waiting import wait_for
from tests.helpers.writers import WRITES, check_progress, written

NOW = "2026-09-12T08:00:00Z"
OLD = "2026-09-01T00:00:00Z"
RULE = {"path": "jobs.*", "match": {"status": "done"}, "age": ".updatedAt", "after": "1d"}
AUTHOR = "retention"
ROOT = Path(__file__).resolve().parents[2]


def job(index: int) -> dict[str, Any]:
    """Two thirds expired (done and old), the rest running, or done and young."""
    if index % 3 == 0:
        return {"status": "running", "updatedAt": OLD} if index % 2 else {"status": "done", "updatedAt": NOW}
    return {"status": "done", "updatedAt": OLD, "n": index}


class Writer:
    """Patches random items of ``jobs`` through a session of its own, ``per_try`` writes each time it is asked,
    remembering each write's commit and the job after it (None: deleted); jobs are stored as ``shape`` makes them."""

    def __init__(self, store: Store, initial: dict[str, Any], seed: int, per_try: int = 2,
                 kinds: tuple[str, ...] = WRITES, shape: Any = lambda value: value,
                 names: list[str] | None = None) -> None:
        self.session = store.session(author="writer")
        self.current: dict[str, Any] = dict(initial)
        self.names, self.random, self.per_try, self.kinds, self.shape = names or sorted(initial), \
            random.Random(seed), per_try, kinds, shape
        self.log: list[tuple[int, str, Any]] = []

    def __call__(self, rule_index: int, paths: object) -> None:
        for _ in range(self.per_try):
            name = self.random.choice(self.names)
            job = written(self.random.choice(self.kinds), self.current[name], len(self.log))
            if self.current[name] is None and job is None:
                continue  # deleting what is gone writes nothing
            op = {"delete": f"jobs.{name}"} if job is None else {"set": f"jobs.{name}", "value": self.shape(job)}
            try:
                self.log.append((self.session.patch([op]).commit, name, job))
            except NotFound:
                continue  # the pass deleted it: deleting it again writes nothing
            self.current[name] = job


def progress(store: Store, rule: dict[str, Any], initial: dict[str, Any], writer: Writer, read_at: int) -> set[str]:
    return check_progress(store.backend.commits(read_at + 1, (0,)), rule, NOW, initial, writer.log, read_at,
                          store.head, AUTHOR, writer.shape)


def index_the_rule(store: Store, rule: dict[str, Any]) -> None:
    """A pass of ``rule`` that expires nothing: a SQLite store builds its heads index for the rule, which the next
    pass selects from (``retain.logd.sqlite_heads``)."""
    assert run_retain(store.session(), {"now": "2000-01-01T00:00:00Z", "what": [rule]}).deleted == 0


class TestWritersThroughoutThePass:
    @pytest.mark.parametrize("indexed", [False, True], ids=["from-versions", "from-the-index"])
    def test_unwritten_eligible_items_all_go(self, store, indexed):
        """A writer patches two random items before every delete the pass tries (a batch, or part of one tried
        again): every item eligible at the read and not written goes in that one request, every item deleted
        still qualified when its batch committed, and only written items can be skipped -- selected from the
        versions, or from the rule's heads index."""
        initial = {f"j{index:03d}": job(index) for index in range(240)}
        store.session().patch([{"set": "jobs", "value": initial}])
        if indexed:
            index_the_rule(store, RULE)
        writer = Writer(store, initial, seed=7)
        read_at = store.head  # the writer writes only once the pass has read
        result = run_retain(store.session(), {"now": NOW, "batch": 16, "author": AUTHOR, "what": [RULE]},
                            before_batch=writer).rules[0]
        assert result.read_at == read_at
        deleted = progress(store, RULE, initial, writer, read_at)
        assert result.deleted == len(deleted) and result.retried > 0
        assert result.skipped <= len({name for _, name, _ in writer.log})

    def test_one_batch_goes_in_parts(self, store):
        """A batch as large as the container, a write to an expired item before every try: the first try fails,
        and the unwritten items go only by reading them again and halving."""
        initial = {f"j{index:03d}": job(index) for index in range(64)}
        store.session().patch([{"set": "jobs", "value": initial}])
        writer = Writer(store, initial, seed=3, per_try=1, kinds=("refresh", "running", "restamp"),
                        names=[name for index, name in enumerate(sorted(initial)) if index % 3])
        read_at = store.head
        result = run_retain(store.session(), {"now": NOW, "batch": 64, "author": AUTHOR, "what": [RULE]},
                            before_batch=writer).rules[0]
        assert len(result.commits) > 1 and result.retried > 0
        progress(store, RULE, initial, writer, read_at)


#: Rules judged three ways, with how a job is stored for each: in SQL, the guard's mark the version read; in SQL,
#: the mark the stamp read (an age of two names); in Python (a list pattern in match, which the SQL does not say).
WAYS: dict[str, tuple[dict[str, Any], Any]] = {
    "sql-version": (RULE, lambda value: value),
    "sql-stamp": ({"path": "jobs.*", "match": {"status": "done"}, "age": ".timing.at", "after": "1d"},
                  lambda value: {**{k: v for k, v in value.items() if k != "updatedAt"},
                                 "timing": {"at": value["updatedAt"]}}),
    "python": ({"path": "jobs.*", "match": {"status": "done", "tags": ["a"]}, "age": ".updatedAt", "after": "1d"},
               lambda value: {**value, "tags": ["a"]}),
}


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(WAYS)), st.integers(min_value=1, max_value=12), st.integers(min_value=0, max_value=3),
       st.integers(min_value=0, max_value=2**16), st.booleans())
def test_progress_under_random_writes(way, batch, per_try, seed, indexed):
    """Any batch, any number of random writes before each try, each way a rule is judged (and the store's heads
    index of the rule built first, or not): the items nobody wrote all go, whatever went still qualified when its
    batch committed, and only written items are skipped."""
    rule, shape = WAYS[way]
    store = Store.open(":memory:", settings=Settings(synchronous="off"))
    try:
        initial = {f"j{index:02d}": job(index) for index in range(30)}
        store.session().patch([{"set": "jobs", "value": {name: shape(value) for name, value in initial.items()}}])
        if indexed:
            index_the_rule(store, rule)
        writer = Writer(store, initial, seed=seed, per_try=per_try, shape=shape)
        read_at = store.head
        result = run_retain(store.session(), {"now": NOW, "batch": batch, "author": AUTHOR, "what": [rule]},
                            before_batch=writer).rules[0]
        assert result.deleted == len(progress(store, rule, initial, writer, read_at))
        assert result.skipped <= len({name for _, name, _ in writer.log})
        assert len(result.commits) <= 2 * len(initial)  # bounded: each item in at most tries(batch) deletes
        assert tries(batch) >= (batch - 1).bit_length() + 1
    finally:
        store.close()


#: A writer in a process of its own: patches random jobs over a socket until the stop file appears, appending
#: each acknowledged write to its log as {commit, job, value}.
WRITER = f"""
import json, os, random, sys
sys.path.insert(0, {str(ROOT)!r})
from retain.logd.client import Client
from tests.helpers.writers import WRITES, written
host, port, names, log_path, stop_path, seed = sys.argv[1:]
rng, names = random.Random(int(seed)), json.loads(names)
current = {{name: {{"status": "done", "updatedAt": "{OLD}"}} for name in names}}
with Client((host, int(port)), author="writer") as logd, open(log_path, "a") as log:
    count = 0
    while not os.path.exists(stop_path):
        name = rng.choice(names)
        value = written(rng.choice(WRITES), current[name] or {{"status": "done", "updatedAt": "{OLD}"}}, count)
        op = {{"delete": f"jobs.{{name}}"}} if value is None else {{"set": f"jobs.{{name}}", "value": value}}
        answer = logd.request({{"patch": {{"ops": [op]}}}})
        if "result" in answer:  # a delete of what is gone answers not_found, and writes nothing
            commit = answer["result"]["patch"]["commit"]
            log.write(json.dumps({{"commit": commit, "job": name, "value": value}}) + "\\n")
            log.flush()
            current[name] = value
        count += 1
"""


class TestServedUnderAWriterProcess:
    def test_unwritten_eligible_items_all_go(self, served, store, tmp_path):
        """A writer process patches random jobs throughout passes served over a socket: in each pass every job
        eligible when the pass began and written by nobody until it ended was deleted by it, and each job it
        deleted was, as last acknowledged before its delete, one the rule takes."""
        initial = {f"j{index:03d}": {"status": "done", "updatedAt": OLD} for index in range(200)}
        log, stop = tmp_path / "writes.jsonl", tmp_path / "stop"
        log.touch()
        host, port = served.server.address

        def writes() -> list[tuple[int, str, Any]]:
            lines = [json.loads(line) for line in log.read_text().splitlines() if line.endswith("}")]
            return [(line["commit"], line["job"], line["value"]) for line in lines]

        process = subprocess.Popen([sys.executable, "-c", WRITER, host, str(port), json.dumps(sorted(initial)),
                                    str(log), str(stop), "11"])
        retried = 0
        try:
            wait_for(lambda: len(writes()) >= 5, what="the writer's first writes", timeout=60.0, child=process)
            for _ in range(6):
                with Client(served.server.address, author="reset") as logd:
                    begun = logd.patch([{"set": "jobs", "value": initial}]).commit
                    answer = logd.request({"retain": {"now": NOW, "batch": 8, "author": AUTHOR,
                                                      "what": [RULE]}})["result"]["retain"]
                # The writer logs in commit order: once it logged past the pass, it logged all it wrote during it.
                wait_for(lambda answer=answer: any(commit > answer["commit"] for commit, _, _ in writes()),
                         what="the writer's writes past the pass", timeout=60.0, child=process)
                check_progress(store.backend.commits(begun + 1, (0,)), RULE, NOW, initial, writes(), begun,
                               answer["commit"], AUTHOR)
                retried += answer["rules"][0].get("retried", 0)
                if retried:
                    break
        finally:
            stop.touch()
            assert process.wait(timeout=60) == 0
        assert retried > 0  # some batch failed its guard under the writer and was tried again
