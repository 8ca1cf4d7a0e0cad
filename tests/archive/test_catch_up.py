"""retain.archive.catch_up: a group that fell behind an archived stream's trim gets back what it missed.

INV-MERGE at the hand-over: under a running driver that folds and trims, with a
live producer, a consumer stopped for many beats then caught up sees every
entry the producer appended exactly once, in order, across archive and live.
"""

from __future__ import annotations

import itertools
import json
import threading

import pytest
from click.testing import CliRunner

from retain.archive import Archive, catch_up, fold_then_trim, read
from retain.cli import main
from retain.errors import InvalidInput, InvalidStreamName
from retain.retention import RetentionDriver, StreamPolicy
from retain.streams import StreamRef
from retain.windows import MaxLen
from tests.helpers.retention import Reports
from tests.helpers.waiting import wait_for

_names = itertools.count()


def _stream() -> StreamRef:
    return StreamRef("catch", f"up-{next(_names)}")


def _ids(entries) -> list[bytes]:
    return [entry_id for entry_id, _ in entries]


def _append(conn, key: str, count: int) -> list[bytes]:
    pipe = conn.pipeline(transaction=False)
    for index in range(count):
        pipe.xadd(key, {"i": str(index)})
    return list(pipe.execute())


def _read_group(conn, key: str, group: str, count: int = 1000) -> list[bytes]:
    answer = conn.xreadgroup(group, "c", {key: ">"}, count=count)
    return _ids(answer[0][1]) if answer else []


class TestCatchUp:
    def test_refuses_before_io(self, redis_conn, tmp_path):
        """A bad stream, group or count is refused at the call, before anything is read."""
        archive = Archive(str(tmp_path / "a"))
        with pytest.raises(InvalidStreamName):
            catch_up(redis_conn, "emq:{q}:stream:s", "g", archive)  # type: ignore[arg-type]
        with pytest.raises(InvalidInput, match="group must be"):
            catch_up(redis_conn, _stream(), "", archive)
        with pytest.raises(InvalidInput, match="count must be"):
            catch_up(redis_conn, _stream(), "g", archive, count=0)

    def test_unknown_group(self, redis_conn, tmp_path):
        """A stream without the group is refused, naming it."""
        stream = _stream()
        _append(redis_conn, stream.key, 3)
        with pytest.raises(InvalidInput, match="has no consumer group 'nobody'"):
            list(catch_up(redis_conn, stream, "nobody", Archive(str(tmp_path / "a"))))

    def test_yields_the_missed_then_moves_the_group(self, redis_conn, tmp_path):
        """Entries after the group's position up to W come from the archive; XREADGROUP > then gives the rest."""
        stream, archive = _stream(), Archive(str(tmp_path / "a"))
        ids = _append(redis_conn, stream.key, 100)
        redis_conn.xgroup_create(stream.key, "g", id="0")
        assert _read_group(redis_conn, stream.key, "g", count=10) == ids[:10]
        fold_then_trim(redis_conn, stream, archive, MaxLen(30, approx=False))
        assert redis_conn.xlen(stream.key) == 30
        assert _ids(catch_up(redis_conn, stream, "g", archive)) == ids[10:70]
        assert _read_group(redis_conn, stream.key, "g") == ids[70:]
        assert _ids(catch_up(redis_conn, stream, "g", archive)) == []  # at W already: nothing, not moved back

    def test_a_pending_entry_by_id(self, redis_conn, tmp_path):
        """A pending entry whose stream entry was trimmed is read from the archive by its id."""
        stream, archive = _stream(), Archive(str(tmp_path / "a"))
        ids = _append(redis_conn, stream.key, 20)
        redis_conn.xgroup_create(stream.key, "g", id="0")
        _read_group(redis_conn, stream.key, "g", count=5)
        fold_then_trim(redis_conn, stream, archive, MaxLen(10, approx=False))
        claimed = redis_conn.xclaim(stream.key, "g", "other", 0, [ids[2]])
        assert all(fields is None for _, fields in claimed) or claimed == []
        assert _ids(read(redis_conn, stream, archive, ids[2].decode(), ids[2].decode())) == [ids[2]]

    def test_under_a_running_driver_and_producer(self, redis_conn, tmp_path):
        """A consumer stopped for many beats, then caught up while the driver folds and trims and the producer
        appends, sees every appended entry exactly once, in order, across the archive-live hand-over."""
        stream, archive = _stream(), Archive(str(tmp_path / "a"))
        redis_conn.xgroup_create(stream.key, "g", id="0", mkstream=True)
        produced: list[bytes] = []
        seen: list[bytes] = []
        reports = Reports()
        driver = RetentionDriver(redis_conn, [StreamPolicy(stream, MaxLen(100), archive=True)], archive=archive,
                                 tick=0.02, on_report=reports)
        done = threading.Event()

        def produce() -> None:
            for _ in range(60):  # a batch a beat, for 60 beats
                produced.extend(_append(redis_conn, stream.key, 40))
                reports.wait_more(1)
            done.set()

        with driver:
            produced.extend(_append(redis_conn, stream.key, 50))
            seen.extend(_read_group(redis_conn, stream.key, "g"))  # then the consumer stops
            producer = threading.Thread(target=produce)
            producer.start()
            try:
                wait_for(lambda: len(produced) > 1000 and (archive.watermark(stream) or _zero()) >= _parse(produced[1000]),
                         "the archive past 1000 entries", 60)
                assert redis_conn.xlen(stream.key) < 1000  # what the consumer missed is gone from the stream
                seen.extend(_ids(catch_up(redis_conn, stream, "g", archive)))
                while True:  # the live tail, while the producer goes on and the driver trims behind the consumer
                    finished = done.is_set()
                    batch = _read_group(redis_conn, stream.key, "g")
                    seen.extend(batch)
                    if finished and not batch:
                        break
            finally:
                producer.join()
        assert len(seen) == len(set(seen)) and seen == produced


def _parse(entry_id: bytes):
    from retain.ids import StreamId

    return StreamId.parse(entry_id)


def _zero():
    from retain.ids import StreamId

    return StreamId(0, 0)


class TestCommand:
    def test_catch_up_command(self, redis_server, redis_conn, tmp_path):
        """retain archive catch-up prints the missed entries as JSON lines and moves the group to W."""
        stream, url = StreamRef("game", "jobs"), str(tmp_path / "a")
        ids = _append(redis_conn, stream.key, 50)
        redis_conn.xgroup_create(stream.key, "workers", id="0")
        fold_then_trim(redis_conn, stream, Archive(url), MaxLen(10, approx=False))
        result = CliRunner().invoke(main, ["archive", "catch-up", "game", "jobs", "--group", "workers",
                                           "--archive", url, "--url", redis_server.url])
        assert result.exit_code == 0, result.output
        assert [json.loads(line)["id"].encode() for line in result.output.splitlines()] == ids[:40]
        assert _read_group(redis_conn, stream.key, "workers") == ids[40:]
        missing = CliRunner().invoke(main, ["archive", "catch-up", "game", "jobs", "--group", "nobody",
                                            "--archive", url, "--url", redis_server.url])
        assert missing.exit_code == 1 and "has no consumer group 'nobody'" in missing.output
