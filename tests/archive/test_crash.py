"""INV-IDEMPOTENT: a fold-then-trim stopped at any step and run again loses nothing and counts nothing twice."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading

import pytest

from retain.archive import Archive, FoldProgress, fold_then_trim, read
from retain.windows import MaxLen
from tests.helpers.archive import SHARED_STORES, archived_ids, open_archive

WINDOW = MaxLen(100, approx=False)
SIZES = {"count": 64, "segment_entries": 200}


class Crash(Exception):
    """Stands for the process dying at a step."""


def crash_at(kind: str, occurrence: int):
    seen = []

    def progress(step: FoldProgress) -> None:
        if step.kind == kind:
            seen.append(step)
            if len(seen) == occurrence:
                raise Crash(f"crashed at {kind} #{occurrence}")

    return progress


def assert_whole(conn, stream, archive: Archive, appended: list[bytes]) -> None:
    """The merge-read yields each appended id once, in order; the archive holds no row twice."""
    assert [entry_id for entry_id, _ in read(conn, stream, archive, count=50)] == appended
    archived = archived_ids(archive, stream)
    assert len(archived) == len(set(archived)) == archive.state(stream).entries
    assert archived == sorted(archived)


class TestFaultBetweenSteps:
    @pytest.mark.parametrize(("kind", "occurrence"), [
        ("read", 2),        # mid-file: read, nothing stored
        ("file", 1),        # a data file stored, its commit not written
        ("file", 2),        # the same, after one full step
        ("commit", 1),      # W advanced for part of the range, the rest unread
        ("commit", 2),      # W advanced over everything, the trim not sent
        ("trim", 1),        # just before the XTRIM
    ])
    def test_rerun_is_whole(self, redis_conn, archive, stream, append, kind, occurrence):
        """A fault raised at each step, then a re-run: nothing lost, nothing twice, the window kept."""
        appended = append(stream, 500)
        with pytest.raises(Crash):
            fold_then_trim(redis_conn, stream, archive, WINDOW, progress=crash_at(kind, occurrence), **SIZES)
        assert redis_conn.xlen(stream.key) == 500  # the crash came before any trim
        assert_whole(redis_conn, stream, archive, appended)
        appended += append(stream, 50, start=500)
        fold_then_trim(redis_conn, stream, archive, WINDOW, **SIZES)
        assert redis_conn.xlen(stream.key) == 100
        assert_whole(redis_conn, stream, archive, appended)

    def test_rerun_after_trim(self, redis_conn, archive, stream, append):
        """Run twice over the same state (a crash after the trim): the second changes nothing."""
        appended = append(stream, 300)
        first = fold_then_trim(redis_conn, stream, archive, WINDOW, **SIZES)
        second = fold_then_trim(redis_conn, stream, archive, WINDOW, **SIZES)
        assert (first.removed, second.removed, second.fold.entries) == (200, 0, 0)
        assert_whole(redis_conn, stream, archive, appended)


CHILD = textwrap.dedent("""
    import json, sys, time
    import redis
    from retain.archive import Archive, fold_then_trim
    from retain.streams import RawKey
    from retain.windows import MaxLen
    plan = json.loads(sys.argv[1])
    seen = {}
    def progress(step):
        seen[step.kind] = seen.get(step.kind, 0) + 1
        print(step.kind, seen[step.kind], flush=True)
        if plan["block"] == [step.kind, seen[step.kind]]:
            print("BLOCKED", flush=True)
            time.sleep(120)
    conn = redis.Redis.from_url(plan["redis"])
    archive = Archive(plan["url"], **plan["options"])
    fold_then_trim(conn, RawKey(plan["key"]), archive, MaxLen(plan["keep"], approx=False),
                   count=plan["count"], segment_entries=plan["segment_entries"], progress=progress)
    print("DONE", flush=True)
""")


def run_and_kill(plan: dict, until_line: str) -> list[str]:
    """Run the child fold; SIGKILL it once it prints ``until_line``; return what it printed."""
    child = subprocess.Popen([sys.executable, "-c", CHILD, json.dumps(plan)], stdout=subprocess.PIPE, text=True)
    lines: list[str] = []
    timer = threading.Timer(60, child.kill)  # a child that never reaches the line fails the test, not the run
    timer.start()
    try:
        for line in child.stdout:  # type: ignore[union-attr]
            lines.append(line.strip())
            if line.strip() == until_line:
                os.kill(child.pid, signal.SIGKILL)
                break
        child.wait()
    finally:
        timer.cancel()
        child.stdout.close()  # type: ignore[union-attr]
    assert child.returncode == -signal.SIGKILL, lines
    return lines


class TestProcessKilled:
    @pytest.mark.parametrize("kind", SHARED_STORES)
    @pytest.mark.parametrize("block", [["file", 2], ["commit", 2], ["trim", 1]])
    def test_sigkill_at_a_step(self, redis_server, redis_conn, tmp_path, request, stream, append, kind, block):
        """A real fold process killed with SIGKILL at a step, then a re-run here: the log is whole."""
        seaweed = request.getfixturevalue("seaweed_server") if kind == "s3" else None
        archive, url, options = open_archive(kind, tmp_path, seaweed)
        appended = append(stream, 600)
        plan = {"redis": redis_server.url, "url": url, "options": options, "key": stream.key, "keep": 100,
                "block": block, **SIZES}
        run_and_kill(plan, "BLOCKED")
        assert redis_conn.xlen(stream.key) == 600
        fold_then_trim(redis_conn, stream, Archive(url, **options), WINDOW, **SIZES)
        assert redis_conn.xlen(stream.key) == 100
        assert_whole(redis_conn, stream, Archive(url, **options), appended)

    @pytest.mark.parametrize("reads", [3, 11, 24])
    def test_sigkill_mid_fold(self, redis_server, redis_conn, tmp_path, stream, append, reads):
        """Killed whenever it is after its n-th XRANGE chunk (mid-write included), a re-run makes it whole."""
        url = f"file://{tmp_path / 'archive'}"
        appended = append(stream, 3000)
        plan = {"redis": redis_server.url, "url": url, "options": {}, "key": stream.key, "keep": 100,
                "block": None, "count": 64, "segment_entries": 300}
        run_and_kill(plan, f"read {reads}")
        fold_then_trim(redis_conn, stream, Archive(url), WINDOW, **SIZES)
        assert redis_conn.xlen(stream.key) == 100
        assert_whole(redis_conn, stream, Archive(url), appended)
