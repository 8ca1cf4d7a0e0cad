"""A process killed mid-commit (SIGKILL) leaves the last whole commit and nothing of the partial one."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

from retain.logd import Store
from tests.helpers.waiting import wait_for

# A child's store stops inside the transaction at commit STALL, after the rows and the commit record are
# inserted but before COMMIT, says so through a file, and waits to be killed.
STALLING = r"""
import sys, threading, time
from pathlib import Path
from retain.logd.sqlite import SqliteBackend
from retain.logd.store import Store

db, flag, stall = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])

class Stalling(SqliteBackend):
    def write(self, record, rows, meta=None):
        super().write(record, rows, meta)
        if record.number == stall:
            flag.write_text("inside")
            time.sleep(120)

store = Store(Stalling(db))
session = store.session(author="child")
"""

# The child writes patches of 50 jobs until it stalls.
CHILD = STALLING + r"""
number = 0
while True:
    number += 1
    session.patch([{"set": f"jobs.c{number}j{i}", "value": {"status": "done", "n": number}} for i in range(50)])
    if stall == 0:
        flag.write_text(str(number))
"""


# The child commits 2 patches alone, then queues 5 behind a busy writer (Writer, as the server has it) so that
# they commit as one group; it stops inside the group at commit STALL, after the patches before it in the group
# were applied, and records every patch whose answer (its future) was resolved.
GROUP_CHILD = STALLING + r"""
from retain.logd.writer import Writer

answered = Path(sys.argv[2] + ".answered")
writer = Writer(store)
for number in (1, 2):
    writer.submit_write(session.patch, [{"set": f"jobs.c{number}j{i}", "value": {"status": "done", "n": number}}
                                        for i in range(50)]).result()
release = threading.Event()
writer.submit(release.wait)
for number in range(3, 8):
    future = writer.submit_write(session.patch, [{"set": f"jobs.c{number}j{i}", "value": {"status": "done",
                                                                                         "n": number}}
                                                 for i in range(50)])
    future.add_done_callback(lambda done: answered.open("a").write(f"{done.result().commit}\n"))
release.set()
time.sleep(120)
"""


def run_child(tmp_path: Path, stall: int, code: str = CHILD) -> tuple[subprocess.Popen, Path, Path]:
    db, flag = tmp_path / "crash.sqlite3", tmp_path / "flag"
    child = subprocess.Popen([sys.executable, "-c", code, str(db), str(flag), str(stall)])
    return child, db, flag


def kill(child: subprocess.Popen) -> None:
    os.kill(child.pid, signal.SIGKILL)
    child.wait(timeout=30)


def assert_whole(db: Path, head: int) -> None:
    """Commits 1..head exist, no row version belongs to any other commit, and the state replays."""
    with Store.open(str(db)) as store:
        assert store.head == head
        numbers = [c.number for c in store.backend.commits(1, (0,))]
        assert numbers == list(range(1, head + 1))
        jobs = store.session().list("jobs.*").items if head else {}
        assert len(jobs) == 50 * head
        assert all(job["n"] <= head for job in jobs.values())
    with sqlite3.connect(db) as raw:
        assert raw.execute("SELECT count(*) FROM nodes WHERE rev > ?", (head,)).fetchone()[0] == 0


class TestKilledMidCommit:
    def test_stalled_inside_the_transaction(self, tmp_path):
        """Killed after its rows were inserted but before COMMIT: the previous commit stands, whole."""
        child, db, flag = run_child(tmp_path, stall=7)
        try:
            wait_for(lambda: flag.exists() and flag.read_text() == "inside", "commit 7 began", 60.0, child=child,
                     interval=0.01)
        finally:
            kill(child)
        assert_whole(db, head=6)
        with Store.open(str(db)) as store:  # and the store carries on from there
            assert store.session().patch([{"set": "after", "value": 1}]).commit == 7

    def test_killed_at_an_arbitrary_moment(self, tmp_path):
        """Killed while writing as fast as it can: whatever the head is, it is whole and gapless."""
        child, db, flag = run_child(tmp_path, stall=0)
        try:
            wait_for(lambda: flag.exists() and flag.read_text() not in ("", "1", "2"), "a few commits", 60.0,
                     child=child, interval=0.01)
        finally:
            kill(child)
        with sqlite3.connect(db) as raw:
            head = raw.execute("SELECT coalesce(max(number), 0) FROM commits").fetchone()[0]
        assert head >= 3
        assert_whole(db, head=head)


class TestKilledMidGroup:
    def test_stalled_inside_a_group_commit(self, tmp_path):
        """Killed inside a group of five patches, after two of them were applied: none of the group is stored,
        none of them was answered, and the commits before it stand whole."""
        child, db, flag = run_child(tmp_path, stall=5, code=GROUP_CHILD)
        try:
            wait_for(lambda: flag.exists() and flag.read_text() == "inside", "commit 5 began", 60.0, child=child,
                     interval=0.01)
        finally:
            kill(child)
        answered = Path(str(flag) + ".answered")
        assert not answered.exists() or answered.read_text() == ""
        assert_whole(db, head=2)
        with Store.open(str(db)) as store:
            assert store.session().patch([{"set": "after", "value": 1}]).commit == 3
