"""INV-IDEMPOTENT for the retain pass: killed between two batches, then asked again, it ends where one pass ends."""

from __future__ import annotations

import signal
import subprocess
import sys

from retain.logd import Store, run_retain
from retain.logd.settings import Settings
from tests.helpers.logd import FakeClock
from tests.helpers.seed004 import JOBS_RULE, request, seed_scene

EVENTS_RULE = {"path": "events(*)", "age": ".at", "after": "1y"}

#: A child that runs the pass on the store at argv[1] and kills itself with SIGKILL as the
#: second batch is about to be deleted: the first batch is committed, the rest never is.
CHILD = """
import os, signal, sys
from retain.logd import Store, run_retain
from retain.wire import Or
batches = []
def die_before_the_second_batch(rule_index, paths):
    batches.append(paths)
    if len(batches) == 2:
        os.kill(os.getpid(), signal.SIGKILL)
store = Store.open(sys.argv[1])
rules = [{"path": "jobs.*", "match": {"status": Or(("done", "canceled"))}, "age": ".updatedAt", "after": "1d"},
         {"path": "events(*)", "age": ".at", "after": "1y"}]
run_retain(store.session(author="verse/retention"),
           {"now": "2026-09-12T08:00:00Z", "batch": 50, "what": rules},
           before_batch=die_before_the_second_batch)
"""


def open_store(path) -> Store:
    return Store.open(str(path), settings=Settings(synchronous="normal"), clock=FakeClock())


def state(store: Store) -> tuple:
    session = store.session()
    return session.get("jobs").value, session.get("events").value


class TestCrashMidPass:
    def test_rerun_after_sigkill_matches_one_whole_pass(self, tmp_path):
        """A pass killed after its first batch, asked again with the same now, deletes exactly the rest."""
        crashed, whole = tmp_path / "crashed.sqlite3", tmp_path / "whole.sqlite3"
        for path in (crashed, whole):
            store = open_store(path)
            seed_scene(store)
            store.close()

        child = subprocess.run([sys.executable, "-c", CHILD, str(crashed)], capture_output=True, timeout=120)
        assert child.returncode == -signal.SIGKILL, child.stderr.decode()

        store = open_store(crashed)
        jobs_after_crash, _ = state(store)
        assert 0 < 343 - len(jobs_after_crash) == 50, "exactly the first batch was committed"
        again = run_retain(store.session(author="verse/retention"),
                           request(JOBS_RULE, EVENTS_RULE, batch=50))

        reference = open_store(whole)
        once = run_retain(reference.session(author="verse/retention"), request(JOBS_RULE, EVENTS_RULE, batch=50))

        assert state(store) == state(reference), "the re-run lost or over-deleted something"
        assert again.deleted + 50 == once.deleted == 312
        store.close()
        reference.close()
