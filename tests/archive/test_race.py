"""INV-FENCE: folders racing on one stream never both advance W over the same range."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading

import pytest

from retain.archive import Archive, FoldProgress, StreamId, fold, read
from tests.helpers.archive import SHARED_STORES, commits_of, open_archive


def assert_one_chain(conn, archive: Archive, stream, appended: list[bytes]) -> None:
    """Every commit adds one file after the W before it and moves W to its end; together they hold each id once."""
    previous: StreamId | None = None
    for version, ranges, watermark in commits_of(archive, stream):
        assert len(ranges) == 1, f"commit {version} added {len(ranges)} files"
        first, last = (StreamId.parse(part) for part in ranges[0])
        assert previous is None or first > previous, f"commit {version} archived a range again"
        assert watermark == (last.ms, last.seq), f"commit {version} set W {watermark}, not its file's end"
        previous = last
    assert archive.state(stream).entries == len(appended)
    assert [entry_id for entry_id, _ in read(conn, stream, archive)] == appended


class TestFence:
    def test_loser_rereads_and_continues(self, redis_conn, archive, stream, append):
        """A folder that loses the commit of W takes the winner's W and folds only what is after it."""
        appended = append(stream, 1000)
        paused, resume = threading.Event(), threading.Event()
        results = {}

        def slow_progress(step: FoldProgress) -> None:
            if step.kind == "file" and not paused.is_set():
                paused.set()  # file 1 stored, its commit not yet written
                resume.wait(30)

        def slow_folder() -> None:
            results["slow"] = fold(redis_conn, stream, archive, count=100,
                                   segment_entries=300, progress=slow_progress)

        thread = threading.Thread(target=slow_folder)
        thread.start()
        assert paused.wait(30)
        results["fast"] = fold(redis_conn, stream, archive, appended[599], count=100, segment_entries=300)
        resume.set()
        thread.join(30)
        fast, slow = results["fast"], results["slow"]
        assert (fast.entries, fast.races_lost) == (600, 0)
        assert slow.races_lost == 1 and slow.entries == 400
        assert_one_chain(redis_conn, archive, stream, appended)

    def test_two_threads_racing(self, redis_conn, archive, stream, append):
        """Two folders on threads fold one stream at once: each range is archived by one of them."""
        appended = append(stream, 1500)
        barrier = threading.Barrier(2)
        results = []

        def folder() -> None:
            barrier.wait()
            results.append(fold(redis_conn, stream, archive, count=50, segment_entries=150))

        threads = [threading.Thread(target=folder) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert sum(result.entries for result in results) == 1500
        assert sum(result.files for result in results) == len(commits_of(archive, stream))
        assert_one_chain(redis_conn, archive, stream, appended)


CHILD = textwrap.dedent("""
    import json, sys
    import redis
    from retain.archive import Archive, fold
    from retain.streams import RawKey
    plan = json.loads(sys.argv[1])
    sys.stdin.readline()  # start together
    result = fold(redis.Redis.from_url(plan["redis"]), RawKey(plan["key"]), Archive(plan["url"], **plan["options"]),
                  count=50, segment_entries=plan["segment_entries"])
    print(json.dumps({"entries": result.entries, "files": result.files, "races": result.races_lost}))
""")


class TestProcessesRacing:
    @pytest.mark.parametrize("kind", SHARED_STORES)
    def test_two_processes(self, redis_server, redis_conn, tmp_path, request, stream, append, kind):
        """Two fold processes on one stream and one archive: W advanced once per range, no row twice."""
        seaweed = request.getfixturevalue("seaweed_server") if kind == "s3" else None
        archive, url, options = open_archive(kind, tmp_path, seaweed)
        appended = append(stream, 2000)
        plan = json.dumps({"redis": redis_server.url, "url": url, "options": options, "key": stream.key,
                           "segment_entries": 200})
        children = [subprocess.Popen([sys.executable, "-c", CHILD, plan], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True) for _ in range(2)]
        for child in children:
            child.stdin.write("go\n")  # type: ignore[union-attr]
            child.stdin.flush()  # type: ignore[union-attr]
        outputs = [json.loads(child.communicate(timeout=120)[0]) for child in children]
        assert all(child.returncode == 0 for child in children)
        assert sum(output["entries"] for output in outputs) == 2000
        assert_one_chain(redis_conn, archive, stream, appended)
