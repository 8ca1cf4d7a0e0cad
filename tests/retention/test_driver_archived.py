"""retain.retention.driver with an archive: archived entries fold before they trim, beat after beat, on real stores.

INV-FOLD through the driver (producers appending, every id gone from the live stream is at or below W
and in a data file), a beat's archived streams go in one commit, a failing fold leaves that stream
untrimmed while the others are trimmed,
INV-IDEMPOTENT (a beat re-run after a crash between its fold and its trim loses nothing, archives
nothing twice), INV-MERGE (a reader merge-reads while the thread runner folds and trims under producers),
INV-FENCE (two drivers on one stream race for W and archive no range twice),
INV-VALIDATE (an archived entry with no archive is refused at construction, before any I/O).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta

import pytest
import redis
import redis.asyncio

from retain.archive import Archive, MaintenanceSettings, StreamId, read
from retain.errors import ArchiveAccessDenied, ArchiveObjectExists, ArchiveUnavailable, InvalidPolicy, UnarchivableEntry
from retain.retention import AsyncRetentionDriver, DriverMetrics, RetentionDriver, StreamPolicy, SweepReport
from retain.servers import RedisServer
from retain.streams import RawKey, StreamRef
from retain.windows import MaxLen
from tests.helpers.archive import archived_ids, commits_of
from tests.helpers.retention import SOLO, Reports, samples
from tests.helpers.streams import append, ms_of
from tests.helpers.waiting import wait_for

_names = itertools.count()


def fresh(queue: str = "game") -> StreamRef:
    return StreamRef(queue, f"driven-{next(_names)}-{uuid.uuid4().hex[:6]}")


def ids_of(entries) -> list[bytes]:
    return [entry_id for entry_id, _ in entries]


def live_ids(conn, stream) -> list[bytes]:
    return ids_of(conn.xrange(stream.key))


class Producers:
    """Threads that append batches to streams until the block ends; what each appended, in append order."""

    def __init__(self, server: RedisServer, streams, *, threads: int = 1, batch: int = 20,
                 pause: float = 0.001) -> None:
        self.server, self.streams, self.batch, self.pause = server, list(streams), batch, pause
        self._appended: dict[str, list[bytes]] = {stream.key: [] for stream in self.streams}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, name=f"producer-{n}") for n in range(threads)]
        self.failures: list[BaseException] = []

    def _run(self) -> None:
        try:
            with self.server.client() as conn:
                while not self._stop.is_set():
                    for stream in self.streams:
                        ids = append(conn, stream.key, self.batch)
                        with self._lock:
                            self._appended[stream.key] += ids
                    self._stop.wait(self.pause)  # leave the shared cores to the driver and the readers
        except BaseException as exc:  # noqa: BLE001 - reported on the test's thread
            self.failures.append(exc)

    def appended(self, stream) -> list[bytes]:
        """The ids appended to ``stream`` so far (each one already in the stream)."""
        with self._lock:
            return list(self._appended[stream.key])

    def count(self, stream) -> int:
        with self._lock:
            return len(self._appended[stream.key])

    def __enter__(self) -> Producers:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(30)
        assert not self.failures, self.failures


def assert_whole(conn, stream, archive: Archive, appended: list[bytes]) -> None:
    """The merge-read yields each appended id exactly once, in id order; no row is archived twice."""
    merged = ids_of(read(conn, stream, archive, count=64))
    assert merged == sorted(appended, key=ms_of)
    archived = archived_ids(archive, stream)
    assert len(archived) == len(set(archived)) == archive.state(stream).entries


def local(tmp_path) -> Archive:
    return Archive(str(tmp_path / f"archive-{uuid.uuid4().hex[:8]}"))


class FaultyArchive(Archive):
    """A real local archive, with a fault raised for one stream at one step: before, or after, the write.

    The steps: ``put_file`` (a stream's data file) and ``commit`` (one for every stream of a beat: the
    fault is raised when the commit carries the stream).
    """

    def __init__(self, url: str, *, key: str, step: str, fault: BaseException, after: bool = False) -> None:
        super().__init__(url)
        self.key, self.step, self.fault, self.after = key, step, fault, after
        self.faults = 0

    def _maybe_fail(self, keys, step: str) -> None:
        if self.key in keys and step == self.step:
            self.faults += 1
            raise self.fault

    def put_file(self, stream, encoded):
        if not self.after:
            self._maybe_fail({stream.key}, "put_file")
        stored = super().put_file(stream, encoded)
        if self.after:
            self._maybe_fail({stream.key}, "put_file")
        return stored

    def commit(self, changes, **options):
        keys = {change.stream for change in changes}
        if not self.after:
            self._maybe_fail(keys, "commit")
        version = super().commit(changes, **options)
        if self.after:
            self._maybe_fail(keys, "commit")
        return version


class TestConstruction:
    def test_an_archived_entry_needs_an_archive(self, redis_conn):
        """INV-VALIDATE: archive=True with no archive is refused at construction, naming the entry; nothing is sent."""
        policy = [(RawKey("plain"), MaxLen(5)), StreamPolicy(StreamRef("game", "feed"), MaxLen(10), archive=True)]
        redis_conn.config_resetstat()
        for make in (lambda: RetentionDriver(redis_conn, policy),
                     lambda: AsyncRetentionDriver(None, policy, fold_conn=redis_conn)):
            with pytest.raises(InvalidPolicy, match=r"policy entry #2 \(emq:\{game\}:stream:feed\) has archive=True, "
                                                    r"but no archive was given to fold into: pass archive=Archive\("):
                make()
        assert {name.split("|")[0] for name in redis_conn.info("commandstats") if name != "cmdstat_info"} == {
            "cmdstat_config"}

    def test_refusals(self, redis_conn, tmp_path):
        """A non-archive, a bad fold_min_entries, an async driver without a sync fold client: each refused."""
        policy = [StreamPolicy(StreamRef("game", "feed"), MaxLen(10), archive=True)]
        with pytest.raises(InvalidPolicy, match="archive must be a retain.archive.Archive"):
            RetentionDriver(redis_conn, policy, archive=str(tmp_path))
        for value in (0, -1, True, 1.5):
            with pytest.raises(InvalidPolicy, match="fold_min_entries: must be a whole number >= 1"):
                RetentionDriver(redis_conn, policy, archive=local(tmp_path), fold_min_entries=value)
        with pytest.raises(InvalidPolicy, match="pass fold_conn=redis.Redis"):
            AsyncRetentionDriver(None, policy, archive=local(tmp_path))

    def test_an_archive_without_archived_entries_is_unused(self, redis_conn, tmp_path):
        """A plain policy with an archive trims as before and writes nothing to the archive."""
        archive = local(tmp_path)
        stream = fresh()
        append(redis_conn, stream.key, 50)
        report = RetentionDriver(redis_conn, [(stream, MaxLen(10, approx=False))], archive=archive).sweep()
        assert dict(report.removed_by) == {stream.key: 40} and report.folded_by == {}
        assert archive.streams() == [] and "folded" not in report.summary()


class TestFoldThroughTheDriver:
    @pytest.mark.parametrize("kind", ["local", "s3"])
    @pytest.mark.parametrize("approx", [True, False], ids=["~", "="])
    def test_nothing_leaves_before_it_is_archived(self, redis_server, redis_conn, tmp_path, request, kind, approx):
        """INV-FOLD: beat after beat, producers appending, every id gone from the live stream is <= W and
        in a data file; the plain stream beside it is trimmed by the pipeline and never archived."""
        archive = local(tmp_path) if kind == "local" else request.getfixturevalue("seaweed_server").archive(
            f"driver-{uuid.uuid4().hex}")
        stream, plain = fresh(), fresh()
        window = MaxLen(150, approx=approx)
        driver = RetentionDriver(redis_conn, [StreamPolicy(stream, window, archive=True),
                                              (plain, MaxLen(50, approx=False))], archive=archive)
        folded = 0
        with Producers(redis_server, [stream, plain]) as producers:
            for _ in range(10):
                target = producers.count(stream) + 120
                wait_for(lambda target=target: producers.count(stream) >= target, "the producer to append a batch")
                report = driver.sweep()
                assert report.ok, report.failures
                assert set(report.removed_by) == {stream.key, plain.key} and set(report.folded_by) == {stream.key}
                folded += report.folded_by[stream.key]
                appended = producers.appended(stream)  # taken before the live read: each of these was appended
                live = set(live_ids(redis_conn, stream))
                watermark = archive.watermark(stream)
                assert report.watermarks[stream.key] == watermark
                gone = [entry_id for entry_id in appended if entry_id not in live]
                assert all(StreamId.parse(entry_id) <= watermark for entry_id in gone), "trimmed past W"
                assert {ms_of(entry_id) for entry_id in gone} <= set(archived_ids(archive, stream)), \
                    "an entry left the live stream without being archived"
                assert set(sorted(appended, key=ms_of)[-window.count:]) <= live, "trimmed inside the window"
        assert folded > 1_000 and folded == archive.state(stream).entries
        assert_whole(redis_conn, stream, archive, producers.appended(stream))
        assert archive.streams() == [stream.key]

    def test_two_drivers_on_one_stream(self, redis_server, tmp_path):
        """INV-FENCE through the driver: two drivers beating on one stream and one archive under producers, with
        no lease between them (coordination off; or two holders at once after a Redis failover lost a lease),
        never archive a range twice, and the merge-read stays whole."""
        stream, url = fresh(), str(tmp_path / "shared")
        policy = [StreamPolicy(stream, MaxLen(50), archive=True)]
        reports = Reports()
        races: list[str] = []

        class Fenced(Archive):
            def commit(self, changes, **options):
                try:
                    return super().commit(changes, **options)
                except ArchiveObjectExists:
                    races.extend(change.stream for change in changes)  # the other driver committed this W first
                    raise

        with redis_server.client() as one, redis_server.client() as two:
            drivers = [RetentionDriver(conn, policy, archive=Fenced(url), tick=0.005, on_report=reports,
                                       replicas=SOLO) for conn in (one, two)]
            with Producers(redis_server, [stream], batch=10) as producers, drivers[0], drivers[1]:
                wait_for(lambda: sum(report.folded for report in reports.since(0)) >= 2_000 and len(races) >= 3,
                         "both drivers to fold under the producers, racing for W")
            assert all(report.ok for report in reports.since(0))
            drivers[0].sweep()
            assert_whole(one, stream, Archive(url), producers.appended(stream))

    def test_fold_min_entries(self, redis_conn, tmp_path):
        """With fewer than fold_min_entries waiting a beat folds none (and trims nothing unarchived); then all."""
        archive, stream = local(tmp_path), fresh()
        driver = RetentionDriver(redis_conn, [StreamPolicy(stream, MaxLen(10, approx=False), archive=True)],
                                 archive=archive, fold_min_entries=100)
        append(redis_conn, stream.key, 70)
        first = driver.sweep()
        assert (first.folded_by[stream.key], first.removed_by[stream.key], first.watermarks[stream.key]) == (0, 0, None)
        append(redis_conn, stream.key, 50)
        second = driver.sweep()
        assert (second.folded_by[stream.key], second.removed_by[stream.key]) == (110, 110)
        assert redis_conn.xlen(stream.key) == 10 and second.folded == 110


    def test_a_backlog_goes_in_one_beat(self, redis_conn, tmp_path, node_size):
        """Like the plain trims (LIMIT 0), an archived stream's ~ trim is not capped by the server: one beat
        folds and removes a backlog past 100 x node entries, so a fast producer cannot outrun the driver."""
        node_size(10)  # the server's default cap for one ~ trim is now 1,000 entries
        archive, stream = local(tmp_path), fresh()
        appended = append(redis_conn, stream.key, 5_000)
        report = RetentionDriver(redis_conn, [StreamPolicy(stream, MaxLen(100), archive=True)], archive=archive).sweep()
        assert (report.folded_by[stream.key], report.removed_by[stream.key]) == (4_900, 4_900)
        assert redis_conn.xlen(stream.key) == 100
        assert_whole(redis_conn, stream, archive, appended)


class TestFailingFold:
    def test_an_unarchivable_stream_is_left_untrimmed(self, redis_conn, tmp_path, caplog):
        """A stream whose fold fails is not trimmed that beat, and says why; the other streams are trimmed."""
        archive = local(tmp_path)
        bad, good, plain = fresh(), fresh(), fresh()
        append(redis_conn, bad.key, 30)
        redis_conn.xadd(bad.key, {b"\xff": b"not a field name the format holds"})
        append(redis_conn, bad.key, 30)
        for stream in (good, plain):
            append(redis_conn, stream.key, 61)
        metrics = DriverMetrics()
        driver = RetentionDriver(redis_conn, [StreamPolicy(bad, MaxLen(5, approx=False), archive=True),
                                              StreamPolicy(good, MaxLen(5, approx=False), archive=True),
                                              (plain, MaxLen(5, approx=False))],
                                 archive=archive, measure_lengths=True)
        with caplog.at_level(logging.WARNING, logger="retain.retention.driver"):
            reports = [driver.sweep() for _ in range(2)]
        for report in reports:
            metrics.observe(report)
            assert set(report.failures) == set(report.fold_failures) == {bad.key}
            assert isinstance(report.failures[bad.key], UnarchivableEntry)
            assert bad.key not in report.removed_by and bad.key not in report.folded_by
        assert dict(reports[0].removed_by) == {good.key: 56, plain.key: 56}
        assert dict(reports[0].folded_by) == {good.key: 56}
        assert dict(reports[0].lengths) == {good.key: 5, plain.key: 5}
        assert redis_conn.xlen(bad.key) == 61, "a stream whose fold failed was trimmed"
        assert archive.watermark(bad) is None  # the file holding it is refused whole: W stays before it
        assert "1 failed" in reports[0].summary() and "folded 56 entries" in reports[0].summary()
        assert any(f"fold of {bad.key} failed, so it is not trimmed this beat" in record.getMessage()
                   for record in caplog.records)
        found = samples(metrics.exposition())
        assert found[("retain_stream_fold_failures_total", (("error", "UnarchivableEntry"), ("stream", bad.key)))] == 2
        assert found[("retain_stream_folded_total", (("stream", good.key),))] == 56
        assert not any(name == "retain_stream_trim_failures_total" for name, _ in found)

    def test_a_store_refusing_writes(self, redis_conn, tmp_path):
        """A store that refuses one stream's data file (a fault injected) leaves that stream untrimmed, the other
        trimmed; once the store relents, the next beat folds on from W and trims."""
        bad, good = fresh(), fresh()
        archive = FaultyArchive(str(tmp_path / "faulty"), key=bad.key, step="put_file",
                                fault=ArchiveAccessDenied("the store refused the write"))
        appended = {stream.key: append(redis_conn, stream.key, 200) for stream in (bad, good)}
        policy = [StreamPolicy(stream, MaxLen(20, approx=False), archive=True) for stream in (bad, good)]
        driver = RetentionDriver(redis_conn, policy, archive=archive)
        failed = driver.sweep()
        assert set(failed.fold_failures) == {bad.key} and archive.faults == 1
        assert (redis_conn.xlen(bad.key), redis_conn.xlen(good.key)) == (200, 20)
        archive.key = None  # the store recovers
        healed = driver.sweep()
        assert healed.ok and dict(healed.removed_by) == {bad.key: 180, good.key: 0}
        for stream in (bad, good):
            assert_whole(redis_conn, stream, archive, appended[stream.key])

    def test_a_refused_commit_fails_the_streams_it_carries(self, redis_conn, tmp_path):
        """A beat's archived streams share one commit: when the store refuses it, none of them is trimmed (the
        plain stream is); once the store relents, the next beat folds them all on from W and trims."""
        one, two, plain = fresh(), fresh(), fresh()
        archive = FaultyArchive(str(tmp_path / "refused"), key=one.key, step="commit",
                                fault=ArchiveAccessDenied("the store refused the commit"))
        appended = {stream.key: append(redis_conn, stream.key, 200) for stream in (one, two, plain)}
        policy = [StreamPolicy(one, MaxLen(20, approx=False), archive=True),
                  StreamPolicy(two, MaxLen(20, approx=False), archive=True), (plain, MaxLen(20, approx=False))]
        driver = RetentionDriver(redis_conn, policy, archive=archive)
        failed = driver.sweep()
        assert set(failed.fold_failures) == {one.key, two.key} and archive.faults == 1
        assert [redis_conn.xlen(stream.key) for stream in (one, two, plain)] == [200, 200, 20]
        assert archive.version == -1  # nothing committed, not even the table
        archive.key = None
        healed = driver.sweep()
        assert healed.ok and dict(healed.removed_by) == {one.key: 180, two.key: 180, plain.key: 0}
        for stream in (one, two):
            assert_whole(redis_conn, stream, archive, appended[stream.key])

    def test_one_commit_a_beat(self, redis_conn, tmp_path):
        """However many archived streams a beat folds, it makes one commit (a W per stream in it)."""
        streams = [fresh() for _ in range(5)]
        archive = local(tmp_path)
        appended = {stream.key: append(redis_conn, stream.key, 120) for stream in streams}
        driver = RetentionDriver(redis_conn, [StreamPolicy(stream, MaxLen(20, approx=False), archive=True)
                                              for stream in streams], archive=archive)
        report = driver.sweep()
        assert report.ok and set(report.folded_by.values()) == {100}
        assert archive.version == 1  # the table's creation, then the beat's one commit
        assert {len(commits_of(archive, stream)) for stream in streams} == {1}
        for stream in streams:
            assert report.watermarks[stream.key] == StreamId.parse(appended[stream.key][99])
            assert_whole(redis_conn, stream, archive, appended[stream.key])

    def test_an_unavailable_store_is_waited_out_once_a_beat(self, redis_conn, tmp_path):
        """Once the store is unavailable, the archived streams after it fail at once with that error (each
        would wait out the store's retries again); plain streams are trimmed; the next beat tries them all."""
        first, second, plain = fresh(), fresh(), fresh()
        archive = FaultyArchive(str(tmp_path / "down"), key=first.key, step="put_file",
                                fault=ArchiveUnavailable("the store could not be reached"))
        for stream in (first, second, plain):
            append(redis_conn, stream.key, 50)
        policy = [StreamPolicy(first, MaxLen(10, approx=False), archive=True),
                  StreamPolicy(second, MaxLen(10, approx=False), archive=True), (plain, MaxLen(10, approx=False))]
        driver = RetentionDriver(redis_conn, policy, archive=archive)
        down = driver.sweep()
        assert set(down.fold_failures) == {first.key, second.key} and dict(down.removed_by) == {plain.key: 40}
        skipped = down.fold_failures[second.key]
        assert isinstance(skipped, ArchiveUnavailable) and skipped.__cause__ is down.fold_failures[first.key]
        assert str(skipped).startswith(f"not folded this beat: the archive was unavailable to {first.key}")
        assert archive.watermark(second) is None and redis_conn.xlen(second.key) == 50
        archive.key = None  # the store is back
        assert driver.sweep().removed_by == {plain.key: 0, first.key: 40, second.key: 40}

    def test_s3_refusing_the_credentials(self, redis_conn, seaweed_server):
        """SeaweedFS refusing the driver's credentials: archived streams are not trimmed, the plain one is;
        a driver with good credentials on the same archive then folds and trims them."""
        prefix = f"denied-{uuid.uuid4().hex}"
        options = dict(seaweed_server.archive_options(), secret_access_key="wrong")
        denied = Archive(seaweed_server.archive_url(prefix), **options)
        archived, plain = fresh(), fresh()
        appended = append(redis_conn, archived.key, 100)
        append(redis_conn, plain.key, 100)
        policy = [StreamPolicy(archived, MaxLen(10, approx=False), archive=True), (plain, MaxLen(10, approx=False))]
        report = RetentionDriver(redis_conn, policy, archive=denied, replicas=SOLO).sweep()
        assert isinstance(report.fold_failures[archived.key], ArchiveAccessDenied)
        assert dict(report.removed_by) == {plain.key: 90} and redis_conn.xlen(archived.key) == 100
        allowed = seaweed_server.archive(prefix)
        report = RetentionDriver(redis_conn, policy, archive=allowed, replicas=SOLO).sweep()
        assert report.ok and report.removed_by[archived.key] == 90
        assert_whole(redis_conn, archived, allowed, appended)


class Crash(Exception):
    """Stands for the process dying: not a RetainError, so it ends the beat as a crash would."""


class TestCrashBetweenFoldAndTrim:
    @pytest.mark.parametrize(("step", "after"), [
        ("put_file", True),    # a data file stored, its commit not written
        ("commit", False),     # the file stored, dead before its commit
        ("commit", True),      # W advanced, the trim never sent
    ], ids=["after-file", "before-commit", "after-commit"])
    def test_a_beat_re_run_after_a_crash(self, redis_conn, tmp_path, step, after):
        """INV-IDEMPOTENT: a beat dies mid-fold; a restarted driver beats again: nothing lost, nothing twice."""
        stream, other = fresh(), fresh()
        url = str(tmp_path / "crashing")
        appended = append(redis_conn, stream.key, 500)
        append(redis_conn, other.key, 500)
        policy = [StreamPolicy(stream, MaxLen(100, approx=False), archive=True),
                  StreamPolicy(other, MaxLen(100, approx=False), archive=True)]
        crashing = FaultyArchive(url, key=stream.key, step=step, fault=Crash(step), after=after)
        with pytest.raises(Crash):
            RetentionDriver(redis_conn, policy, archive=crashing, replicas=SOLO).sweep()
        assert redis_conn.xlen(stream.key) == 500, "the crash came before the trim"
        assert_whole(redis_conn, stream, Archive(url), appended)
        appended += append(redis_conn, stream.key, 50)
        restarted = Archive(url)  # a new process: nothing remembered but what is stored
        reports = [RetentionDriver(redis_conn, policy, archive=restarted, replicas=SOLO).sweep() for _ in range(2)]
        assert all(report.ok for report in reports)
        assert reports[0].removed_by[stream.key] == 450 and reports[1].removed_by[stream.key] == 0
        assert reports[1].folded_by[stream.key] == 0
        assert redis_conn.xlen(stream.key) == 100
        assert_whole(redis_conn, stream, restarted, appended)


class TestMergeUnderARunningDriver:
    @pytest.mark.parametrize("approx", [True, False], ids=["~", "="])
    def test_no_gap_no_duplicate_order_kept(self, redis_server, tmp_path, approx):
        """INV-MERGE: producers append, the thread runner folds and trims, readers merge-read, all at once:
        each read yields every entry appended before it began, none twice, none unappended, in id order."""
        stream = fresh()
        archive = local(tmp_path)
        reports = Reports()
        reads: list[tuple[set[bytes], list[bytes]]] = []
        reading = threading.Event()
        failures: list[BaseException] = []

        def reader(producers: Producers) -> None:
            try:
                with redis_server.client() as conn:
                    while reading.is_set():
                        before = producers.appended(stream)
                        if not before:
                            continue
                        # Up to the newest id appended so far: a read to the end would chase the producers.
                        end = max(before, key=ms_of)
                        reads.append((set(before), ids_of(read(conn, stream, archive, end=end.decode(), count=37))))
            except BaseException as exc:  # noqa: BLE001 - reported on the test's thread
                failures.append(exc)

        with redis_server.client() as conn:
            driver = RetentionDriver(conn, [StreamPolicy(stream, MaxLen(60, approx=approx), archive=True)],
                                     archive=archive, tick=0.01, on_report=reports)
            with Producers(redis_server, [stream], threads=2, batch=15) as producers, driver:
                reading.set()
                readers = [threading.Thread(target=reader, args=(producers,)) for _ in range(2)]
                for thread in readers:
                    thread.start()
                wait_for(lambda: sum(report.folded for report in reports.since(0)) >= 3_000
                         and len(reads) >= 30, "folds and trims under the readers")
                reading.clear()
                for thread in readers:
                    thread.join(30)
            assert not failures, failures
            everything = producers.appended(stream)
            assert all(report.ok for report in reports.since(0))
            assert conn.xlen(stream.key) < len(everything), "the driver trimmed under the readers"
            for before, got in reads:
                assert len(got) == len(set(got)), "an entry came twice"
                assert [ms_of(entry_id) for entry_id in got] == sorted(ms_of(entry_id) for entry_id in got)
                assert before <= set(got), f"missed {sorted(before - set(got))[:5]}"
                assert set(got) <= set(everything)
            driver.sweep()
            assert_whole(conn, stream, archive, everything)


class TestAsyncTwin:
    def test_folds_on_a_worker_thread(self, redis_server, redis_conn, tmp_path):
        """await sweep() pipelines the plain trims and folds the archived streams off the event loop."""
        threads: set[int] = set()

        class Watched(Archive):
            def put_file(self, stream, encoded):
                threads.add(threading.get_ident())
                return super().put_file(stream, encoded)

        archive = Watched(str(tmp_path / "watched"))
        archived, plain = fresh(), fresh()
        appended = append(redis_conn, archived.key, 80)
        append(redis_conn, plain.key, 80)
        policy = [StreamPolicy(archived, MaxLen(30, approx=False), archive=True), (plain, MaxLen(30, approx=False))]

        async def scenario() -> tuple[SweepReport, int]:
            conn = redis.asyncio.Redis(host=redis_server.host, port=redis_server.port)
            try:
                driver = AsyncRetentionDriver(conn, policy, archive=archive, fold_conn=redis_conn,
                                              measure_lengths=True)
                return await driver.sweep(), threading.get_ident()
            finally:
                await conn.aclose()

        report, loop_thread = asyncio.run(scenario())
        assert dict(report.removed_by) == {plain.key: 50, archived.key: 50}
        assert dict(report.folded_by) == {archived.key: 50}
        assert dict(report.lengths) == {plain.key: 30, archived.key: 30}
        assert threads and loop_thread not in threads
        assert_whole(redis_conn, archived, archive, appended)


class TestMaintenance:
    """The driver maintains its archive on a thread and a cadence of its own, by its clock."""

    def test_on_its_own_cadence(self, redis_conn, tmp_path):
        """The maintainer maintains once ``every`` has passed since the last time (the first: one period
        after its first look), beside the beats: small files compacted, rows past max_age expired, the log
        kept; the next beat's report carries what it did."""
        archive, stream = local(tmp_path), fresh()
        start = datetime(2026, 9, 12, tzinfo=UTC)
        now = [start]
        settings = MaintenanceSettings(every=timedelta(minutes=10), max_age=timedelta(days=1),
                                       log_retention=timedelta(seconds=1), vacuum_retention=timedelta(seconds=1))
        driver = RetentionDriver(redis_conn, [StreamPolicy(stream, MaxLen(0, approx=False), archive=True)],
                                 archive=archive, maintenance=settings, clock=lambda: now[0])
        assert driver.maintainer is not None
        appended: list[bytes] = []
        maintained, reported = [], []
        for minute in range(0, 25, 5):
            now[0] = start + timedelta(minutes=minute)
            appended += append(redis_conn, stream.key, 10)
            assert driver.sweep().ok
            maintained.append(driver.maintainer.check(now[0], wait=True) is not None)
            reported.append(driver.sweep().maintenance is not None)
        assert maintained == [False, False, True, False, True]  # at 10 and 20 minutes
        assert reported == maintained, "a beat reports the maintenance that ended since the one before"
        assert len(archive.state(stream).files) == 1  # the 20-minute maintenance merged the small files
        assert [entry_id for entry_id, _ in read(redis_conn, stream, archive)] == appended
        now[0] = datetime.fromtimestamp(ms_of(appended[-1])[0] / 1000, UTC) + timedelta(days=2)
        report = driver.maintain()
        assert report is not None and report.streams[0].expired == 50 and archive.state(stream).entries == 0

    def test_replaced_files_vacuumed_once_the_retention_passed(self, redis_conn, tmp_path):
        """After a maintenance that compacted, the maintainer's first look once vacuum_retention has passed
        vacuums the files it replaced: they leave the store then, not one cadence later; the read stays whole."""
        archive, stream = local(tmp_path), fresh()
        start = datetime.now(UTC)
        now = [start]
        settings = MaintenanceSettings(every=timedelta(minutes=10), log_retention=timedelta(seconds=1),
                                       vacuum_retention=timedelta(seconds=1))
        driver = RetentionDriver(redis_conn, [StreamPolicy(stream, MaxLen(0, approx=False), archive=True)],
                                 archive=archive, maintenance=settings, clock=lambda: now[0])
        assert driver.maintainer is not None
        appended: list[bytes] = []
        for _ in range(4):
            appended += append(redis_conn, stream.key, 10)
            assert driver.sweep().ok
        replaced = [file.path for file in archive.state(stream).files]
        driver.maintainer.check(now[0], wait=True)  # the first look starts the cadence
        now[0] = start + timedelta(minutes=10)
        compacted_at = time.monotonic()
        report = driver.maintainer.check(now[0], wait=True)
        assert report is not None and report.replaced
        assert all(archive.location.exists(path) for path in replaced)  # younger than the retention
        now[0] += timedelta(seconds=1)
        wait_for(lambda: time.monotonic() - compacted_at > 1.5, "the table's vacuum_retention to pass")
        assert driver.maintainer.check(now[0]) is None  # not a maintenance: the vacuum of what it replaced
        wait_for(lambda: not driver.maintainer.busy, "the vacuum to end")
        assert not any(archive.location.exists(path) for path in replaced)
        assert [entry_id for entry_id, _ in read(redis_conn, stream, archive)] == appended

    def test_defaults_and_refusals(self, redis_conn, tmp_path):
        """An archived policy is maintained with the archive's defaults unless told otherwise; a maintenance
        that is not MaintenanceSettings is refused; a plain policy has none."""
        policy = [StreamPolicy(fresh(), MaxLen(10), archive=True)]
        assert RetentionDriver(redis_conn, policy, archive=local(tmp_path)).maintenance == MaintenanceSettings()
        with pytest.raises(InvalidPolicy, match="maintenance must be a retain.archive.MaintenanceSettings"):
            RetentionDriver(redis_conn, policy, archive=local(tmp_path), maintenance={"every": "1h"})
        assert RetentionDriver(redis_conn, [(fresh(), MaxLen(10))]).maintenance is None
