"""retain.retention.driver against real Redis servers: one round trip a beat, failures per stream, the runners.

INV-DECOUPLED (a stream nobody reads is bounded on the driver's own beat),
INV-WINDOW (a beat never deletes inside a window, LIMIT 0 included),
INV-SURFACE (a WRONGTYPE is reported typed, with the server's message, and the beat goes on),
INV-IDEMPOTENT (a beat after a lost server bounds the stream again).
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import logging
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone

import pytest
import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.cluster
import redis.connection
from hypothesis import given, settings
from hypothesis import strategies as st
from redis.backoff import NoBackoff
from redis.retry import Retry

from retain.errors import InvalidPolicy, InvalidWindow, ServerUnavailable, WrongTypeError
from retain.retention import AsyncRetentionDriver, RetentionDriver, SweepReport, beat_delay
from retain.servers import RedisServer, free_port
from retain.streams import RawKey, StreamRef, trim
from retain.windows import MaxAge, MaxLen, MinId
from tests.helpers.retention import SOLO, Reports, lag_known
from tests.helpers.streams import BASE_MS, append, at_node_boundary, fill, remaining
from tests.helpers.waiting import wait_for

UTC = UTC
_keys = itertools.count()


class CountingConnection(redis.connection.Connection):
    """A real redis-py connection that counts its writes per server port."""

    writes: Counter[int] = Counter()

    def send_packed_command(self, command, check_health=True):
        CountingConnection.writes[self.port] += 1
        return super().send_packed_command(command, check_health)


def fixed_clock(instant: datetime) -> Callable[[], datetime]:
    return lambda: instant


class TestSweep:
    def test_one_beat_one_write(self, redis_server, redis_conn):
        """A beat over many streams is one write on the wire; the report has every stream's figure."""
        refs = [StreamRef(f"q{index % 3}", f"s{index}") for index in range(30)]
        for ref in refs:
            append(redis_conn, ref.key, 50)
        conn = redis.Redis(connection_pool=redis.ConnectionPool(host=redis_server.host, port=redis_server.port,
                                                                connection_class=CountingConnection))
        driver = RetentionDriver(conn, [(ref, MaxLen(20, approx=False)) for ref in refs], measure_lengths=True,
                                 replicas=SOLO)
        driver.sweep()  # the first use opens the connection (a handshake of its own)
        for ref in refs:
            append(redis_conn, ref.key, 5)
        CountingConnection.writes.clear()
        report = driver.sweep()
        assert CountingConnection.writes == Counter({redis_server.port: 1})
        assert (report.removed, report.calls, report.ok) == (150, 30, True)
        assert dict(report.removed_by) == {ref.key: 5 for ref in refs}
        assert dict(report.lengths) == {ref.key: 20 for ref in refs}
        assert report.failures == {} and report.elapsed > 0
        conn.close()

    def test_report_is_frozen(self, redis_conn):
        """A SweepReport cannot be changed, nor can its mappings."""
        report = RetentionDriver(redis_conn, [(StreamRef("q", "s"), MaxLen(1))]).sweep()
        with pytest.raises(AttributeError):
            report.removed = 3  # type: ignore[misc]
        with pytest.raises(TypeError):
            report.removed_by["x"] = 1  # type: ignore[index]

    def test_a_beat_re_run_removes_nothing_more(self, redis_conn, node_size):
        """INV-IDEMPOTENT: a beat re-applied (after a restart, or by a second driver) leaves the same stream."""
        node_size(10)
        floor = datetime.fromtimestamp((BASE_MS + 60) / 1000, UTC)
        policy = [(RawKey("approx"), MaxLen(25)), (RawKey("exact"), MinId(floor, approx=False))]
        for key in ("approx", "exact"):
            fill(redis_conn, key, [1] * 100)
        first = RetentionDriver(redis_conn, policy).sweep()
        kept = {key: remaining(redis_conn, key) for key in ("approx", "exact")}
        again = [RetentionDriver(redis_conn, policy).sweep() for _ in range(2)]
        assert dict(first.removed_by) == {"approx": 70, "exact": 59}
        assert [report.removed for report in again] == [0, 0]
        assert {key: remaining(redis_conn, key) for key in ("approx", "exact")} == kept

    def test_nothing_to_do(self, redis_conn):
        """An empty policy sends nothing and reports nothing."""
        redis_conn.config_resetstat()
        report = RetentionDriver(redis_conn, []).sweep()
        assert (report.removed, report.calls, dict(report.removed_by), report.ok) == (0, 0, {}, True)
        assert "cmdstat_xtrim" not in redis_conn.info("commandstats")

    def test_age_window_at_the_injected_clock(self, redis_conn):
        """MaxAge is resolved against the driver's clock, not the machine's."""
        fill(redis_conn, "aged", [60_000] * 10)  # one entry a minute after BASE_MS
        clock = fixed_clock(datetime.fromtimestamp((BASE_MS + 10 * 60_000) / 1000, UTC))
        report = RetentionDriver(redis_conn, [(RawKey("aged"), MaxAge("3m30s", approx=False))], clock=clock).sweep()
        assert report.removed_by == {"aged": 6}
        assert report.at == clock()
        assert [ms for ms, _ in remaining(redis_conn, "aged")] == [BASE_MS + m * 60_000 for m in (7, 8, 9, 10)]

    def test_age_window_moves_beat_after_beat(self, redis_conn):
        """The age window is sent afresh each beat (never a stale floor) beside fixed windows sent as before."""
        fill(redis_conn, "aged", [60_000] * 10)
        fill(redis_conn, "fixed", [1] * 10)
        instants = iter(datetime.fromtimestamp((BASE_MS + minutes * 60_000) / 1000, UTC) for minutes in (5, 8, 8))
        driver = RetentionDriver(redis_conn, [(RawKey("fixed"), MaxLen(4, approx=False)),
                                              (RawKey("aged"), MaxAge("1m", approx=False))],
                                 clock=lambda: next(instants), measure_lengths=True)
        reports = [driver.sweep() for _ in range(3)]
        assert [dict(report.removed_by) for report in reports] == [
            {"fixed": 6, "aged": 3}, {"fixed": 0, "aged": 3}, {"fixed": 0, "aged": 0}]
        assert [dict(report.lengths) for report in reports] == [
            {"fixed": 4, "aged": 7}, {"fixed": 4, "aged": 4}, {"fixed": 4, "aged": 4}]

    def test_keeps_no_wire_form_of_age_windows(self, redis_conn):
        """The driver's own memory is bounded: only the commands that never change are kept packed."""
        instants = (datetime(2026, 9, 12, tzinfo=UTC) + timedelta(seconds=second) for second in itertools.count())
        driver = RetentionDriver(redis_conn, [(RawKey("fixed"), MaxLen(4)), (RawKey("aged"), MaxAge("1m"))],
                                 clock=lambda: next(instants), measure_lengths=True)
        for _ in range(50):
            driver.sweep()
        # XINFO GROUPS of both streams, XLEN of both (one command, before and after the trim), XTRIM MAXLEN
        assert sorted(command[0] for command in driver.plain.packed) == ["XINFO", "XINFO", "XLEN", "XLEN", "XTRIM"]

    def test_wrongtype_among_good_streams(self, redis_conn, caplog):
        """The good streams are trimmed; the bad one is reported typed, with the server's message, and logged."""
        good = [StreamRef("q", "a"), StreamRef("q", "c")]
        for ref in good:
            append(redis_conn, ref.key, 30)
        redis_conn.set("emq:{q}:stream:b", "not a stream")
        policy = [(good[0], MaxLen(10, approx=False)), (StreamRef("q", "b"), MaxLen(10)), (good[1], MaxLen(5, approx=False))]
        with caplog.at_level(logging.WARNING, logger="retain.retention.driver"):
            report = RetentionDriver(redis_conn, policy).sweep()
        assert dict(report.removed_by) == {good[0].key: 20, good[1].key: 25}
        assert (report.calls, report.removed, report.ok, report.lost_connection) == (2, 45, False, False)
        error = report.failures["emq:{q}:stream:b"]
        assert isinstance(error, WrongTypeError) and error.server_message.startswith("WRONGTYPE")
        assert isinstance(error.__cause__, redis.exceptions.ResponseError)
        assert [redis_conn.xlen(ref.key) for ref in good] == [10, 5]
        assert any("emq:{q}:stream:b" in record.getMessage() and "WRONGTYPE" in record.getMessage()
                   for record in caplog.records)
        assert "1 failed" in report.summary()

    def test_unreachable_server_fails_every_stream_without_raising(self):
        """No server: every stream reports ServerUnavailable and the sweep returns."""
        conn = redis.Redis(port=free_port(), socket_connect_timeout=1, retry=Retry(NoBackoff(), 0))
        refs = [StreamRef("q", "a"), RawKey("b")]
        report = RetentionDriver(conn, [(ref, MaxLen(1)) for ref in refs], replicas=SOLO).sweep()
        assert set(report.failures) == {ref.key for ref in refs}
        assert all(isinstance(error, ServerUnavailable) for error in report.failures.values())
        assert report.lost_connection and report.calls == 0

    def test_unreachable_server_fails_the_leases_without_raising(self):
        """No server, with replicas: the lease round trip fails whole, the replica holds nothing and touches
        nothing; the report says why and that the connection is lost (the runner backs off)."""
        conn = redis.Redis(port=free_port(), socket_connect_timeout=1, retry=Retry(NoBackoff(), 0))
        report = RetentionDriver(conn, [(StreamRef("q", "a"), MaxLen(1))]).sweep()
        assert isinstance(report.lease_error, ServerUnavailable)
        assert report.lost_connection and not report.ok and report.calls == 0
        assert report.replica is not None and report.replica.held == frozenset()

    def test_logs_at_most_ten_failures_a_beat(self, redis_conn, caplog):
        """Many failing streams log ten lines and a count, not one line each."""
        keys = [f"bad{index}" for index in range(25)]
        for key in keys:
            redis_conn.set(key, "x")
        with caplog.at_level(logging.WARNING, logger="retain.retention.driver"):
            report = RetentionDriver(redis_conn, [(RawKey(key), MaxLen(1)) for key in keys]).sweep()
        assert len(report.failures) == 25
        assert len(caplog.records) == 11 and "15 more streams failed" in caplog.records[-1].getMessage()

    def test_a_backlog_goes_in_one_beat(self, redis_conn, node_size):
        """~ with LIMIT 0: one beat removes a backlog past the server's default cap (100 x node); trim() is capped."""
        node_size(10)  # the server's default cap for one ~ trim is now 1,000 entries
        for key in ("driven", "verb"):
            append(redis_conn, key, 5_000)
        assert trim(redis_conn, RawKey("verb"), MaxLen(100)) == 1_000
        report = RetentionDriver(redis_conn, [(RawKey("driven"), MaxLen(100))]).sweep()
        assert report.removed == 4_900 and redis_conn.xlen("driven") == 100

    def test_never_touches_consumer_groups(self, redis_conn):
        """A beat writes only XTRIM; it reads the groups (XINFO GROUPS, XPENDING) to report what a trim took
        from each, and a group's state is as the consumer left it."""
        ref = StreamRef("q", "consumed")
        append(redis_conn, ref.key, 300)
        redis_conn.xgroup_create(ref.key, "workers", id="0")
        redis_conn.xreadgroup("workers", "w1", {ref.key: ">"}, count=120)  # pending, never acked

        def group_state():
            (group,) = redis_conn.xinfo_groups(ref.key)
            return {name: group[name] for name in ("name", "consumers", "pending", "last-delivered-id")}

        before = group_state()
        redis_conn.config_resetstat()
        driver = RetentionDriver(redis_conn, [(ref, MaxLen(100, approx=False))], measure_lengths=True)
        first = driver.sweep()
        assert first.removed == 200 and driver.sweep().removed == 0
        (taken,) = first.unconsumed.values()
        assert list(first.unconsumed) == [(ref.key, "workers")]
        assert (taken.pending, taken.undelivered) == (120, 80 if lag_known(redis_conn) else None)
        # Redis 7 names subcommands (cmdstat_config|resetstat), Redis 6 does not: compare commands.
        issued = {name.split("|")[0] for name in redis_conn.info("commandstats") if name != "cmdstat_info"}
        leases = {"cmdstat_time", "cmdstat_zadd", "cmdstat_pexpire", "cmdstat_zremrangebyscore", "cmdstat_zrange",
                  "cmdstat_get", "cmdstat_mget", "cmdstat_pttl", "cmdstat_set", "cmdstat_getex"}  # on the replicas' own keys
        assert issued - leases == {"cmdstat_xtrim", "cmdstat_xlen", "cmdstat_config", "cmdstat_xinfo",
                                   "cmdstat_xrange", "cmdstat_xpending"}
        assert group_state() == before

    @settings(max_examples=40)
    @given(data=st.data(), node=st.integers(min_value=1, max_value=60),
           shapes=st.lists(st.tuples(st.integers(min_value=0, max_value=600), st.booleans(), st.booleans()),
                           min_size=1, max_size=4))
    def test_never_deletes_inside_a_window(self, redis_conn, node_size, data, node, shapes):
        """INV-WINDOW through the driver: for any streams and windows, each beat keeps every entry inside."""
        node_size(node)
        policy, cases = [], []
        for length, by_age, approx in shapes:
            key = f"prop:driver:{next(_keys)}"
            ids = fill(redis_conn, key, [1] * length)
            if by_age:
                floor_ms = data.draw(st.integers(min_value=BASE_MS - 2, max_value=BASE_MS + length + 2))
                window = MinId(datetime.fromtimestamp(floor_ms / 1000, UTC), approx)
                inside = [entry for entry in ids if entry >= (floor_ms, 0)]
            else:
                count = data.draw(st.integers(min_value=0, max_value=length + 5))
                window = MaxLen(count, approx)
                inside = ids[max(0, len(ids) - count):] if count else []
            policy.append((RawKey(key), window))
            cases.append((key, ids, inside, approx))
        report = RetentionDriver(redis_conn, policy).sweep()
        for key, ids, inside, approx in cases:
            kept = remaining(redis_conn, key)
            assert kept[len(kept) - len(inside):] == inside, f"{key}: an entry inside the window went"
            assert report.removed_by[key] == len(ids) - len(kept)
            if approx:
                assert at_node_boundary(report.removed_by[key], len(ids), node), "~ removed part of a node"
            else:
                assert kept == inside
            redis_conn.delete(key)

    def test_refuses_bad_options_before_io(self, redis_conn):
        """A bad tick, backoff or clock is refused at construction."""
        for options in ({"tick": 0}, {"tick": -1}, {"tick": True}, {"tick": float("inf")}, {"max_backoff": 0},
                        {"clock": "now"}):
            with pytest.raises(InvalidPolicy):
                RetentionDriver(redis_conn, [], **options)

    def test_a_naive_clock_raises_from_sweep(self, redis_conn):
        """sweep() itself raises for a clock bug; the runners survive it (below)."""
        driver = RetentionDriver(redis_conn, [(RawKey("k"), MaxLen(1))], clock=lambda: datetime(2026, 1, 1))
        with pytest.raises(InvalidWindow, match="now must be timezone-aware"):
            driver.sweep()


class TestBeatDelay:
    @pytest.mark.parametrize(("tick", "troubled", "max_backoff", "delay"), [
        (1.0, 0, 30.0, 1.0),
        (1.0, 1, 30.0, 2.0),
        (1.0, 3, 30.0, 8.0),
        (1.0, 10, 30.0, 30.0),
        (1.0, 10_000, 30.0, 30.0),
        (0.05, 2, 0.1, 0.1),
        (5.0, 3, 1.0, 5.0),   # the backoff never shortens the beat
    ])
    def test_table(self, tick, troubled, max_backoff, delay):
        """tick when healthy; doubling per troubled beat, capped at max(max_backoff, tick)."""
        assert beat_delay(tick, troubled, max_backoff) == delay


@pytest.fixture
def own_server():
    """A server of the test's own, for tests that stop it or flood it."""
    with RedisServer() as server:
        yield server


def quick_client(server: RedisServer) -> redis.Redis:
    # No client-side retries: the driver's backoff is the retry policy under test.
    return redis.Redis(host=server.host, port=server.port, socket_timeout=2, socket_connect_timeout=1,
                       retry=Retry(NoBackoff(), 0))


class TestThreadRunner:
    def test_bounds_a_stream_nobody_reads(self, own_server):
        """INV-DECOUPLED: a producer appends flat out, no consumer exists, every beat brings it back to N."""
        feed, window, batch = StreamRef("codemojex", "live"), 500, 100
        appended, stop = [0], threading.Event()

        def produce() -> None:
            with own_server.client() as conn:
                while not stop.is_set():
                    append(conn, feed.key, batch)
                    appended[0] += batch

        reports = Reports()
        conn = quick_client(own_server)
        driver = RetentionDriver(conn, [(feed, MaxLen(window, approx=False))], tick=0.02,
                                 measure_lengths=True, on_report=reports)
        producer = threading.Thread(target=produce)
        with driver:
            producer.start()
            wait_for(lambda: appended[0] >= 40 * window, "the producer to append 40 windows")
            beats = reports.wait_more(3)
            stop.set()
            producer.join()
        removed = sum(report.removed for report in reports.items)
        assert removed > 30 * window, "the driver trimmed as the producer appended"
        # Exact MAXLEN: right after each trim the stream holds N, plus at most the batch
        # the producer may slip in between the XTRIM and the XLEN of the same pipeline.
        assert all(window <= report.lengths[feed.key] <= window + batch for report in beats)
        assert conn.xinfo_stream(feed.key)["groups"] == 0
        assert not driver.running
        conn.close()

    def test_wrongtype_beat_after_beat(self, redis_conn):
        """A WRONGTYPE key fails every beat; the good streams are trimmed each time and the loop goes on."""
        good = StreamRef("q", "good")
        redis_conn.set("emq:{q}:stream:bad", "x")
        reports = Reports()
        driver = RetentionDriver(redis_conn, [(StreamRef("q", "bad"), MaxLen(1)), (good, MaxLen(10, approx=False))],
                                 tick=0.01, on_report=reports)
        with driver:
            for _ in range(3):
                append(redis_conn, good.key, 50)
                wait_for(lambda: redis_conn.xlen(good.key) == 10, "the good stream to be trimmed")
        assert all(isinstance(report.failures["emq:{q}:stream:bad"], WrongTypeError) for report in reports.items)
        # 150 appended, 10 kept: however the beats fell between the appends, 140 went.
        assert sum(report.removed_by.get(good.key, 0) for report in reports.items) == 140
        assert len(reports) >= 3 and redis_conn.get("emq:{q}:stream:bad") == b"x"

    def test_a_raising_beat_never_kills_the_runner(self, redis_conn, caplog):
        """A clock that raises (or goes naive) is logged; the next beats trim as usual."""
        readings = iter([RuntimeError("clock broke"), datetime(2026, 1, 1)])

        def clock() -> datetime:
            reading = next(readings, None)
            if isinstance(reading, Exception):
                raise reading
            return reading or datetime.now(UTC)

        ref = StreamRef("q", "s")
        append(redis_conn, ref.key, 20)
        reports = Reports()
        driver = RetentionDriver(redis_conn, [(ref, MaxLen(5, approx=False))], tick=0.01, max_backoff=0.02,
                                 clock=clock, on_report=reports)
        with caplog.at_level(logging.ERROR, logger="retain.retention.driver"), driver:
            wait_for(lambda: redis_conn.xlen(ref.key) == 5, "a healthy beat to trim")
        assert driver.beats >= 3 and reports.items[0].removed == 15
        assert [record.exc_info[0] for record in caplog.records[:2]] == [RuntimeError, InvalidWindow]

    def test_on_report_raising_is_survived(self, redis_conn):
        """An on_report hook that raises does not stop the beat."""
        driver = RetentionDriver(redis_conn, [(RawKey("k"), MaxLen(1))], tick=0.01,
                                 on_report=lambda report: 1 / 0)
        with driver:
            wait_for(lambda: driver.beats >= 3, "three beats")

    def test_server_stopped_and_restarted(self, own_server):
        """The driver reports the outage, keeps beating with backoff, and bounds the stream again after."""
        feed = StreamRef("codemojex", "live")
        reports = Reports()
        conn = quick_client(own_server)
        driver = RetentionDriver(conn, [(feed, MaxLen(100, approx=False))], tick=0.02, max_backoff=0.1,
                                 on_report=reports)
        with driver, own_server.client() as producer:
            append(producer, feed.key, 1_000)
            # The trim shows in the stream before its report reaches the hook: wait for the report.
            wait_for(lambda: sum(report.removed for report in reports.since(0)) >= 900, "the first trim's report")
            before = reports.since(0)
            own_server.stop()
            down = reports.wait_more(4)
            assert all(isinstance(report.failures.get(feed.key), ServerUnavailable) for report in down[1:])
            assert all(report.lost_connection for report in down[1:])
            wait_for(lambda: driver.delay == 0.1, "the backoff to reach max_backoff")
            restarted = len(reports)
            own_server.start()  # same port, nothing persisted: the stream starts over
            with own_server.client() as fresh:
                append(fresh, feed.key, 1_000)
                wait_for(lambda: sum(report.removed for report in reports.since(restarted)) >= 900,
                         "the trim after the restart, reported")
                assert fresh.xlen(feed.key) == 100
            assert driver.running
            wait_for(lambda: driver.delay == 0.02, "a healthy beat to reset the backoff")
        assert sum(report.removed for report in before) == 900
        after = reports.since(restarted)
        assert sum(report.removed for report in after) == 900 and after[-1].ok
        conn.close()

    def test_start_stop(self, redis_conn):
        """start twice is refused; stop ends the thread and may be called again; run() beats in the caller."""
        driver = RetentionDriver(redis_conn, [], tick=0.01)
        driver.start()
        with pytest.raises(RuntimeError, match="already running"):
            driver.start()
        driver.stop()
        assert not driver.running
        driver.stop()
        stopper = threading.Timer(0.05, driver.stop)
        stopper.start()
        driver.run()  # returns once stop() is called from another thread
        assert driver.beats >= 2
        for _ in range(20):  # a stop() right on the heels of start() is never lost
            with driver:
                pass
            assert not driver.running


class TestAsyncRunner:
    def test_twin_of_sweep(self, redis_server, redis_conn):
        """await sweep() reports what sweep() reports, WRONGTYPE included."""
        refs = [StreamRef("q", "a"), StreamRef("q", "b")]
        redis_conn.set("emq:{q}:stream:bad", "x")
        policy = [(ref, MaxLen(10, approx=False)) for ref in refs] + [(StreamRef("q", "bad"), MaxLen(1))]

        async def scenario() -> SweepReport:
            conn = redis.asyncio.Redis(host=redis_server.host, port=redis_server.port)
            try:
                return await AsyncRetentionDriver(conn, policy, measure_lengths=True, replicas=SOLO).sweep()
            finally:
                await conn.aclose()

        for ref in refs:
            append(redis_conn, ref.key, 40)
        sync_report = RetentionDriver(redis_conn, policy, measure_lengths=True, replicas=SOLO).sweep()
        for ref in refs:
            append(redis_conn, ref.key, 30)
        async_report = asyncio.run(scenario())
        for report in (sync_report, async_report):
            assert set(report.failures) == {"emq:{q}:stream:bad"}
            assert isinstance(report.failures["emq:{q}:stream:bad"], WrongTypeError)
            assert dict(report.lengths) == {ref.key: 10 for ref in refs}
        assert dict(sync_report.removed_by) == {ref.key: 30 for ref in refs}
        assert dict(async_report.removed_by) == {ref.key: 30 for ref in refs}

    def test_async_with_bounds_and_survives(self, redis_server, redis_conn):
        """async with beats in a task; a raising clock is survived; stop ends the task."""
        ref = StreamRef("q", "s")
        calls = itertools.count()

        def clock() -> datetime:
            if next(calls) == 0:
                raise RuntimeError("clock broke")
            return datetime.now(UTC)

        async def scenario() -> int:
            conn = redis.asyncio.Redis(host=redis_server.host, port=redis_server.port)
            driver = AsyncRetentionDriver(conn, [(ref, MaxLen(5, approx=False))], tick=0.01, max_backoff=0.02,
                                          clock=clock)
            try:
                async with driver:
                    for _ in range(2):
                        await conn.xadd(ref.key, {"i": "x"})
                        for _ in range(20):
                            await conn.xadd(ref.key, {"i": "y"})
                        while await conn.xlen(ref.key) != 5:
                            await asyncio.sleep(0.005)
                    with pytest.raises(RuntimeError, match="already running"):
                        await driver.start()
                assert not driver.running
                return driver.beats
            finally:
                await conn.aclose()

        assert asyncio.run(asyncio.wait_for(scenario(), 20)) >= 3

    def test_run_until_stopped(self, redis_server):
        """await run() beats in the caller's task until stop() from another task."""
        async def scenario() -> int:
            conn = redis.asyncio.Redis(host=redis_server.host, port=redis_server.port)
            driver = AsyncRetentionDriver(conn, [], tick=0.01)
            try:
                runner = asyncio.create_task(driver.run())
                while driver.beats < 3:
                    await asyncio.sleep(0.005)
                await driver.stop()
                await asyncio.wait_for(runner, 5)
                return driver.beats
            finally:
                await conn.aclose()

        assert asyncio.run(scenario()) >= 3

    def test_one_driver_in_two_event_loops(self, redis_server):
        """A driver is not tied to the loop it was made in: start and stop it under two asyncio.run calls."""
        driver = AsyncRetentionDriver(None, [], tick=0.01)

        async def scenario() -> None:
            driver.conn = redis.asyncio.Redis(host=redis_server.host, port=redis_server.port)
            async with driver:
                while driver.beats < 2:
                    await asyncio.sleep(0.005)
            await driver.conn.aclose()

        for _ in range(2):
            driver.beats = 0
            asyncio.run(asyncio.wait_for(scenario(), 20))


@pytest.fixture
def cluster_streams(redis_cluster):
    """Streams of twelve queues, three streams each, spread over every master; removed after the test.

    The cluster is shared by the session and never flushed, so each test leaves it as it found it.
    """
    refs = [StreamRef(f"driven{q}", f"s{s}") for q in range(12) for s in range(3)]
    with redis_cluster.client() as conn:
        assert len({conn.get_node_from_key(ref.key).name for ref in refs}) == 3, "the queues must reach every master"
        yield refs
        for ref in refs:
            conn.delete(ref.key)  # one key at a time: they live in different slots


class TestCluster:
    def test_one_beat_trims_them_all(self, redis_cluster, cluster_streams):
        """One sweep over a 3-master cluster trims every stream, one write per master."""
        # from_url builds each node's pool with the connection class given
        conn = redis.cluster.RedisCluster.from_url(redis_cluster.url, connection_class=CountingConnection)
        refs = cluster_streams
        for ref in refs:
            append(conn, ref.key, 40)
        driver = RetentionDriver(conn, [(ref, MaxLen(10, approx=False)) for ref in refs], measure_lengths=True,
                                 replicas=SOLO)
        driver.sweep()  # opens a connection to every master
        for ref in refs:
            append(conn, ref.key, 7)
        CountingConnection.writes.clear()
        report = driver.sweep()
        ports = {node.port for node in redis_cluster.nodes}
        assert CountingConnection.writes == Counter({port: 1 for port in ports})
        assert (report.calls, report.removed, report.ok) == (len(refs), 7 * len(refs), True)
        assert set(report.lengths.values()) == {10}
        conn.close()

    def test_wrongtype_on_a_cluster(self, redis_cluster, cluster_streams):
        """A WRONGTYPE key on one master fails that stream only."""
        conn = redis_cluster.client()
        refs = cluster_streams
        for ref in refs[:5] + refs[6:]:
            append(conn, ref.key, 15)
        conn.set(refs[5].key, "x")
        report = RetentionDriver(conn, [(ref, MaxLen(10, approx=False)) for ref in refs], replicas=SOLO).sweep()
        assert set(report.failures) == {refs[5].key}
        assert isinstance(report.failures[refs[5].key], WrongTypeError)
        assert report.removed == 5 * (len(refs) - 1)
        conn.close()

    def test_async_cluster(self, redis_cluster, cluster_streams):
        """The asyncio twin trims a cluster through redis.asyncio.cluster."""
        first = redis_cluster.nodes[0]
        sync = redis_cluster.client()
        refs = cluster_streams
        for ref in refs:
            append(sync, ref.key, 12)

        async def scenario() -> SweepReport:
            conn = redis.asyncio.cluster.RedisCluster(host=first.host, port=first.port)
            try:
                return await AsyncRetentionDriver(conn, [(ref, MaxLen(2, approx=False)) for ref in refs]).sweep()
            finally:
                await conn.aclose()

        report = asyncio.run(scenario())
        assert (report.calls, report.removed, report.ok) == (len(refs), 10 * len(refs), True)
        sync.close()


class TestSignature:
    @pytest.mark.parametrize("driver", [RetentionDriver, AsyncRetentionDriver])
    def test_every_option_is_named(self, driver, redis_conn):
        """The twins list their keyword arguments, typed: no **options, and a misspelt one is a TypeError."""
        parameters = inspect.signature(driver).parameters
        assert all(p.kind is not inspect.Parameter.VAR_KEYWORD for p in parameters.values())
        options = {name for name, p in parameters.items() if p.kind is inspect.Parameter.KEYWORD_ONLY}
        assert options >= {"archive", "fold_min_entries", "tick", "clock", "max_backoff", "measure_lengths",
                           "on_report"}
        assert all(parameters[name].annotation is not inspect.Parameter.empty for name in options)
        with pytest.raises(TypeError, match="tik"):
            driver(redis_conn, [(RawKey("k"), MaxLen(1))], tik=1.0)


class TestOptIn:
    def test_importing_retain_starts_nothing(self):
        """Importing every retain module leaves one thread and no event loop running."""
        code = ("import threading, asyncio, retain, retain.streams, retain.cli, retain.retention.metrics;"
                "assert threading.enumerate() == [threading.main_thread()], threading.enumerate();"
                "print('quiet')")
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        assert result.returncode == 0 and result.stdout.strip() == "quiet", result.stderr

    def test_a_driver_starts_nothing_until_started(self, redis_conn):
        """Constructing a driver opens no thread and sends nothing."""
        redis_conn.config_resetstat()
        threads = threading.active_count()
        driver = RetentionDriver(redis_conn, [(RawKey("k"), MaxLen(1))], tick=0.01)
        assert threading.active_count() == threads and not driver.running
        assert "cmdstat_xtrim" not in redis_conn.info("commandstats")


def test_clock_in_the_report_is_the_clock_given(redis_conn):
    """The report's instant is the injected clock's, to the microsecond."""
    instant = datetime(2026, 9, 12, 8, 0, 0, 123456, tzinfo=timezone(timedelta(hours=-3)))
    assert RetentionDriver(redis_conn, [(RawKey("k"), MaxLen(1))], clock=fixed_clock(instant)).sweep().at == instant


class TestOnePassReader:
    def test_replies_split_across_reads(self, redis_conn, monkeypatch):
        """Replies cut at any byte between two socket reads are parsed whole: a beat read 7 bytes at a time
        reports what one read in large chunks reports."""
        import retain.retention.roundtrip as roundtrip

        keys = [f"split:{index}" for index in range(30)]
        for key in keys:
            append(redis_conn, key, 15)
        redis_conn.xgroup_create(keys[0], "g", id="0")
        monkeypatch.setattr(roundtrip, "READ_CHUNK", 7)
        report = RetentionDriver(redis_conn, [(RawKey(key), MaxLen(5, approx=False)) for key in keys],
                                 measure_lengths=True).sweep()
        assert report.ok and set(report.removed_by.values()) == {10} and set(report.lengths.values()) == {5}
        taken = report.unconsumed.get((keys[0], "g"))
        if lag_known(redis_conn):
            assert taken is not None and taken.undelivered in (10, None)
        else:  # Redis 6.2 gives no lag: entries never delivered cannot be counted
            assert taken is None or taken.undelivered is None

    def test_the_same_beat_is_packed_once(self, redis_conn):
        """Length windows only: the second beat sends the bytes packed for the first, and still trims."""
        driver = RetentionDriver(redis_conn, [(RawKey("once:a"), MaxLen(2, approx=False)),
                                              (RawKey("once:b"), MaxLen(3, approx=False))])
        driver.sweep()
        kept = driver.plain.blob
        append(redis_conn, "once:a", 10)
        report = driver.sweep()
        assert driver.plain.blob is kept and report.removed_by["once:a"] == 8

    def test_a_decoding_client(self, redis_server):
        """A client that decodes responses goes through redis-py's own reader, with the same report."""
        with redis_server.client(decode_responses=True) as conn:
            append(conn, "decoded", 10)
            report = RetentionDriver(conn, [(RawKey("decoded"), MaxLen(4, approx=False))]).sweep()
            assert report.ok and report.removed_by["decoded"] == 6
            conn.delete("decoded")
