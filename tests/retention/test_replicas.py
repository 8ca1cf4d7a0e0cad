"""Replicas of one policy, in one process against a real Redis: the streams split among them, each trimmed and
folded by one replica at a time (INV-ONEHOLDER); a dead one's shards taken over within its lease (INV-TAKEOVER);
a deposed one's late archive commit refused by the fencing token; one maintainer among them."""

from __future__ import annotations

import threading
import uuid
from datetime import UTC, datetime, timedelta

from retain.archive import Archive, MaintenanceSettings, read
from retain.errors import LeaseLost
from retain.retention import DriverMetrics, Replicas, RetentionDriver, StreamPolicy
from retain.streams import StreamRef
from retain.windows import MaxLen
from tests.helpers.archive import archived_ids, table_of
from tests.helpers.retention import Reports, samples
from tests.helpers.streams import append, ms_of
from tests.helpers.waiting import wait_for

#: beats a tenth of a second apart, leases of three beats: the defaults' proportions, ten times as fast
TICK, LEASE = 0.1, 0.3


def refs(count: int) -> list[StreamRef]:
    run = uuid.uuid4().hex[:6]
    return [StreamRef(f"replicas{index % 4}", f"s{run}-{index}") for index in range(count)]


def replica(conn, policy, name: str, **options) -> RetentionDriver:
    return RetentionDriver(conn, policy, tick=TICK, replicas=Replicas(lease=LEASE, name=name), **options)


def crash(driver: RetentionDriver) -> None:
    """Stop a running driver's beat as a SIGKILL would: no lease given back, no further beat."""
    driver._runner.stop()
    if driver.maintainer is not None:
        driver.maintainer._beat.stop()


def held_by(drivers) -> list[frozenset[int]]:
    return [driver.leases.held() for driver in drivers]


class TestSharing:
    def test_alone_a_replica_holds_every_shard(self, redis_conn):
        """One replica takes every shard at its first beat and trims every stream there."""
        streams = refs(20)
        for ref in streams:
            append(redis_conn, ref.key, 30)
        report = replica(redis_conn, [(ref, MaxLen(10, approx=False)) for ref in streams], "alone").sweep()
        assert report.replica is not None and report.replica.held == frozenset(range(64))
        assert report.ok and dict(report.removed_by) == {ref.key: 20 for ref in streams}

    def test_each_stream_is_trimmed_by_one_replica(self, redis_conn):
        """Three replicas beating in turn settle on 22, 21 and 21 shards, none held twice, all held: each
        round every stream is trimmed by exactly one of them."""
        streams = refs(60)
        policy = [(ref, MaxLen(5, approx=False)) for ref in streams]
        drivers = [replica(redis_conn, policy, f"r{number}") for number in range(3)]
        for _ in range(4):  # join, then spread
            for driver in drivers:
                driver.sweep()
        shares = held_by(drivers)
        assert sorted(len(held) for held in shares) == [21, 21, 22]
        assert frozenset().union(*shares) == frozenset(range(64))
        assert sum(len(held) for held in shares) == 64, "no shard is held by two replicas"
        for ref in streams:
            append(redis_conn, ref.key, 9)
        reports = [driver.sweep() for driver in drivers]
        trimmed = [set(report.removed_by) for report in reports]
        assert set().union(*trimmed) == {ref.key for ref in streams}
        assert sum(len(keys) for keys in trimmed) == len(streams), "every stream trimmed once"
        assert all(redis_conn.xlen(ref.key) == 5 for ref in streams)

    def test_a_replica_that_stops_hands_its_shards_over(self, redis_conn):
        """stop() gives the leases back: the other replica holds every shard at its next beat."""
        policy = [(ref, MaxLen(5)) for ref in refs(8)]
        first, second = replica(redis_conn, policy, "first"), replica(redis_conn, policy, "second")
        for _ in range(3):
            first.sweep()
            second.sweep()
        assert held_by([first, second]) != [frozenset(range(64)), frozenset()]
        first.stop()
        assert second.sweep().replica.held == frozenset(range(64))

    def test_a_lost_lease_is_let_go_at_once(self, redis_conn):
        """Another holder in a lease's key (a failover lost the SET): the renewal says so, and the replica stops
        touching that shard's streams that very beat."""
        streams = refs(40)
        policy = [(ref, MaxLen(5, approx=False)) for ref in streams]
        driver = replica(redis_conn, policy, "victim")
        driver.sweep()
        shards = driver.leases.shards
        stolen = shards.of(streams[0].key)
        redis_conn.set(shards.lease_key(stolen), "1 intruder~0000", px=10_000)
        for ref in streams:
            append(redis_conn, ref.key, 9)
        report = driver.sweep()
        assert stolen not in report.replica.held and report.replica.changes.lost == (stolen,)
        assert streams[0].key not in report.removed_by and redis_conn.xlen(streams[0].key) == 9
        assert all(key in report.removed_by for key in (ref.key for ref in streams)
                   if shards.of(key) != stolen)


class TestTakeover:
    def test_a_dead_replicas_shards_are_taken_over_within_its_lease(self, redis_conn):
        """INV-TAKEOVER: a replica dies holding shards (no lease given back); the survivor holds them and trims
        their streams within a few of its own beats (its beats are a tick apart at least: by then the lease
        ran out, whatever the machine's speed)."""
        streams = refs(30)
        policy = [(ref, MaxLen(5, approx=False)) for ref in streams]
        survivor_reports = Reports()
        doomed = replica(redis_conn, policy, "doomed").start()
        wait_for(lambda: len(doomed.leases.held()) == 64, "the first replica to hold every shard")
        survivor = replica(redis_conn, policy, "survivor", on_report=survivor_reports).start()
        try:
            wait_for(lambda: len(survivor.leases.held()) == 32, "the second replica to take its share")
            orphaned = doomed.leases.held()
            crash(doomed)
            beats_before = len(survivor_reports)
            # The report, not the lease state: the beat holds its leases before its report reaches the hook.
            wait_for(lambda: any(report.replica.held == frozenset(range(64))
                                 for report in survivor_reports.since(beats_before)), "the survivor to take over")
            beats = survivor_reports.since(beats_before)
            taking = next(number for number, report in enumerate(beats, 1)
                          if report.replica.held == frozenset(range(64)))
            assert taking <= 6, f"took {taking} beats of the survivor to take over a lease of 3 ticks"
            taken = {shard for report in beats for takeover in report.replica.changes.takeovers
                     for shard in [takeover.shard] if takeover.expired}
            assert taken == set(orphaned)
            for ref in streams:
                append(redis_conn, ref.key, 20)
            survivor_reports.wait_more(2)
            assert all(redis_conn.xlen(ref.key) == 5 for ref in streams), "the survivor trims every stream"
        finally:
            survivor.stop()


class Paused(Archive):
    """An archive whose commits, once ``armed``, wait for ``go`` after telling ``arrived``."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.armed, self.arrived, self.go = False, threading.Event(), threading.Event()

    def commit(self, changes, **options):
        if self.armed:
            self.arrived.set()
            assert self.go.wait(30)
        return super().commit(changes, **options)


class TestDeposed:
    def test_a_late_commit_is_refused_and_nothing_trimmed(self, redis_conn, tmp_path):
        """INV-ONEHOLDER: a replica paused inside its commit outlives its lease; the new holder folds and commits
        with a newer token; the paused commit is then refused (ArchiveFenced, a LeaseLost), and the paused
        replica trims nothing. The merge-read is whole, no row archived twice."""
        stream = refs(1)[0]
        url = str(tmp_path / "archive")
        policy = [StreamPolicy(stream, MaxLen(10, approx=False), archive=True)]
        slow_archive = Paused(url)
        slow = RetentionDriver(redis_conn, policy, archive=slow_archive, tick=TICK, archive_deadline=60,
                               replicas=Replicas(lease=LEASE, name="slow"))
        appended = append(redis_conn, stream.key, 100)
        assert slow.sweep().ok  # holds every shard, folds 90
        appended += append(redis_conn, stream.key, 50)
        slow_token = slow.leases.fence(slow.leases.shards.of(stream.key)).token
        slow_archive.armed = True
        outcome: list = []
        beat = threading.Thread(target=lambda: outcome.append(slow.sweep()))
        beat.start()
        assert slow_archive.arrived.wait(30)
        shard = slow.leases.shards.of(stream.key)
        fresh = RetentionDriver(redis_conn, policy, archive=Archive(url), tick=TICK,
                                replicas=Replicas(lease=LEASE, name="fresh"))
        wait_for(lambda: shard in fresh.sweep().replica.held, "the lease to run out and the new holder to take it",
                 interval=TICK)
        assert fresh.sweep().ok and redis_conn.xlen(stream.key) == 10
        length = redis_conn.xlen(stream.key)
        slow_archive.go.set()
        beat.join(30)
        report = outcome[0]
        assert isinstance(report.failures[stream.key], LeaseLost)
        assert stream.key not in report.removed_by and redis_conn.xlen(stream.key) == length
        fence_id = slow.leases.shards.fence_id(shard)
        assert table_of(Archive(url)).transaction_version(fence_id) == fresh.leases.fence(shard).token
        assert fresh.leases.fence(shard).token > slow_token
        merged = [entry_id for entry_id, _ in read(redis_conn, stream, Archive(url))]
        assert merged == sorted(appended, key=ms_of)
        archived = archived_ids(Archive(url), stream)
        assert len(archived) == len(set(archived))


class TestMaintainer:
    def test_one_replica_maintains(self, redis_conn, tmp_path):
        """Two replicas' maintainers look at the same moments: one holds the maintenance lease and maintains,
        the other passes; when the holder stops, the other takes the lease and maintains one period later
        (the one it replaced may just have maintained)."""
        archive_url = str(tmp_path / "archive")
        policy = [StreamPolicy(refs(1)[0], MaxLen(5), archive=True)]
        settings = MaintenanceSettings(every=timedelta(minutes=1))
        start = datetime(2026, 9, 12, tzinfo=UTC)
        one, two = (RetentionDriver(redis_conn, policy, archive=Archive(archive_url), maintenance=settings,
                                    replicas=Replicas(name=name)) for name in ("one", "two"))
        for minute in (0, 1, 2):
            now = start + timedelta(minutes=minute)
            done = [driver.maintainer.check(now, wait=True) is not None for driver in (one, two)]
            assert done.count(True) == (0 if minute == 0 else 1)
            assert [one.maintainer.holding, two.maintainer.holding] == [True, False]
        one.maintainer.stop()
        assert two.maintainer.check(start + timedelta(minutes=3), wait=True) is None and two.maintainer.holding
        assert two.maintainer.check(start + timedelta(minutes=4), wait=True) is not None


class TestMetrics:
    def test_a_replica_is_seen_from_outside(self, redis_conn):
        """retain_replica_shards, retain_replica_members, retain_lease_takeovers_total,
        retain_lease_renew_failures_total and retain_fold_races_lost_total, from the reports."""
        policy = [(ref, MaxLen(5)) for ref in refs(4)]
        metrics = DriverMetrics()
        first = replica(redis_conn, policy, "first", on_report=metrics.observe)
        metrics.observe(first.sweep())
        second = replica(redis_conn, policy, "second")
        second.sweep()
        metrics.observe(first.sweep())
        found = samples(metrics.exposition())
        assert found[("retain_replica_shards", ())] == 32
        assert found[("retain_replica_members", ())] == 2
        assert found[("retain_lease_takeovers_total", ())] == 0
        assert found[("retain_lease_renew_failures_total", ())] == 0
        assert found[("retain_fold_races_lost_total", ())] == 0

