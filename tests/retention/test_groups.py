"""retain.retention.groups: what a trim takes from consumer groups, and protect with max_lag, on a real server.

INV-DECOUPLED with groups: a beat always reports, per group, what its trim took
that the group had not been delivered or had not acknowledged; ``protect``
keeps a lagging group's entries until ``max_lag``, and a dead group never lets
the stream grow past ``max_lag``.
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pytest
import redis.asyncio
from hypothesis import given, settings
from hypothesis import strategies as st

from retain.errors import InvalidPolicy
from retain.ids import StreamId
from retain.retention import AsyncRetentionDriver, DriverMetrics, RetentionDriver, StreamPolicy, parse_policy, preview
from retain.retention.groups import GroupState, Protect, protected_floor, undelivered_trimmed
from retain.streams import RawKey
from retain.windows import MaxLen
from tests.helpers.retention import SOLO, lag_known, samples
from tests.helpers.streams import BASE_MS

UTC = UTC
NOW = datetime.fromtimestamp(BASE_MS / 1000, UTC) + timedelta(days=1)
_keys = itertools.count()


def _key() -> str:
    return f"groups:{next(_keys)}"


def _fill(conn, key: str, count: int, start: int = 1) -> list[bytes]:
    pipe = conn.pipeline(transaction=False)
    for index in range(start, start + count):
        pipe.xadd(key, {"i": str(index)}, id=f"{BASE_MS + index}-0")
    return [entry_id.encode() if isinstance(entry_id, str) else entry_id for entry_id in pipe.execute()]


def _ids(conn, key: str) -> list[bytes]:
    return [entry_id for entry_id, _ in conn.xrange(key)]


class TestProtectValue:
    def test_max_lag_required(self):
        """protect without max_lag is refused: a dead group would keep the stream growing for ever."""
        with pytest.raises(InvalidPolicy, match="protect needs max_lag"):
            Protect("pending", None)
        with pytest.raises(InvalidPolicy, match="'pending' or 'undelivered'"):
            Protect("acked", 10)
        assert Protect("undelivered", "1h").max_lag == timedelta(hours=1)
        assert Protect("pending", 100).max_lag == 100

    @pytest.mark.parametrize(("text", "message"), [
        ('protect = "pending"', "field 'max_lag': missing: protect needs max_lag"),
        ('max_lag = "1h"', "field 'max_lag': applies with protect only"),
        ('protect = "all"\nmax_lag = 5', "field 'protect': must be 'pending' or 'undelivered' (got 'all')"),
        ('protect = "pending"\nmax_lag = 0', "field 'max_lag': max_lag: must be a whole number >= 1 (got 0)"),
        ('protect = "pending"\nmax_lag = 1.5', "field 'max_lag': must be a duration such as '1h' or a count"),
    ])
    def test_policy_file_refusals(self, text, message):
        """The policy file refuses a protect without max_lag, and bad values, naming the field."""
        with pytest.raises(InvalidPolicy, match=message.replace("(", r"\(").replace(")", r"\)")):
            parse_policy(f'[[stream]]\nkey = "k"\nmaxlen = 10\n{text}\n')

    def test_policy_file(self):
        """protect and max_lag make a Protect on the entry; an archived stream may not protect."""
        entry = parse_policy('[[stream]]\nkey = "k"\nmaxlen = 10\nprotect = "undelivered"\nmax_lag = "2h"\n') \
            .policy.entries[0]
        assert entry.protect == Protect("undelivered", "2h")
        with pytest.raises(InvalidPolicy, match="catches up from the archive"):
            parse_policy('archive = "/tmp/x"\n[[stream]]\nkey = "k"\nmaxlen = 10\narchive = true\n'
                         'protect = "pending"\nmax_lag = 5\n')


class TestPure:
    @given(length=st.integers(0, 1000), removed=st.integers(0, 1000), lag=st.integers(0, 1000))
    def test_undelivered_count(self, length, removed, lag):
        """The undelivered are the newest `lag`; a trim takes the oldest `removed`: their overlap is counted."""
        removed, lag = min(removed, length), min(lag, length)
        group = GroupState("g", StreamId(0, 0), 0, lag)
        taken = undelivered_trimmed(group, length, removed)
        assert taken == len(set(range(removed)) & set(range(length - lag, length)))

    @given(st.lists(st.integers(0, 100), min_size=3, max_size=3))
    def test_floor(self, values):
        """The floor never passes the limits' floor, and a needed id is kept unless max_lag is past it."""
        limit, needed, lag = (StreamId(value, 0) for value in values)
        floor = protected_floor(limit, needed, lag)
        assert floor is not None and floor <= limit
        assert floor <= needed or floor <= lag
        assert floor >= min(limit, max(needed, lag))


class TestProtectLive:
    def test_lagging_group_kept_until_max_lag(self, redis_conn):
        """protect = "pending": nothing the group has not acknowledged goes until max_lag; then the bound holds."""
        key = _key()
        ids = _fill(redis_conn, key, 30)
        redis_conn.xgroup_create(key, "g", id="0")
        redis_conn.xreadgroup("g", "c", {key: ">"}, count=5)  # 1..5 pending, 6..30 undelivered
        entry = StreamPolicy(RawKey(key), MaxLen(10, approx=False), protect=Protect("pending", 50))
        driver = RetentionDriver(redis_conn, [entry], clock=lambda: NOW)
        assert driver.sweep().removed_by[key] == 0 and _ids(redis_conn, key) == ids
        redis_conn.xack(key, "g", *ids[:5])
        report = driver.sweep()
        assert report.removed_by[key] == 5 and _ids(redis_conn, key) == ids[5:]
        assert report.unconsumed == {}  # what went was acknowledged
        ids += _fill(redis_conn, key, 40, start=31)  # 65 live, the group still at 5: max_lag 50 wins
        report = driver.sweep()
        assert _ids(redis_conn, key) == ids[-50:]
        if lag_known(redis_conn):  # Redis 6.2 gives no lag: undelivered is not counted there
            assert report.unconsumed[(key, "g")].undelivered == 15

    @settings(max_examples=20)
    @given(maxlen=st.integers(0, 40), max_lag=st.integers(1, 60), rounds=st.lists(
        st.tuples(st.integers(0, 30), st.integers(0, 10), st.booleans()), min_size=1, max_size=6),
        mode=st.sampled_from(["pending", "undelivered"]))
    def test_invariants(self, redis_conn, maxlen, max_lag, rounds, mode):
        """Every beat: entries inside the limit stay; entries the group still needs stay while among the newest
        max_lag; the stream never holds more than max(maxlen, max_lag) after a beat."""
        key = _key()
        redis_conn.xadd(key, {"i": "0"}, id=f"{BASE_MS}-0")
        redis_conn.xgroup_create(key, "g", id="0")
        entry = StreamPolicy(RawKey(key), MaxLen(maxlen, approx=False), protect=Protect(mode, max_lag))
        driver = RetentionDriver(redis_conn, [entry], clock=lambda: NOW)
        next_index = 1
        for appended, read, ack in rounds:
            _fill(redis_conn, key, appended, start=next_index)
            next_index += appended
            delivered = redis_conn.xreadgroup("g", "c", {key: ">"}, count=read) if read else []
            if ack and delivered:
                redis_conn.xack(key, "g", *[entry_id for entry_id, _ in delivered[0][1]])
            before = _ids(redis_conn, key)
            pending = {item["message_id"] for item in redis_conn.xpending_range(key, "g", "-", "+", 10_000)}
            last = redis_conn.xinfo_groups(key)[0]["last-delivered-id"]
            needed = {entry_id for entry_id in before
                      if entry_id in pending and mode == "pending" or StreamId.parse(entry_id) > StreamId.parse(last)}
            assert driver.sweep().ok
            after = set(_ids(redis_conn, key))
            assert set(before[len(before) - maxlen:] if maxlen else []) <= after
            assert needed & set(before[-max_lag:]) <= after
            assert len(after) <= max(maxlen, max_lag)

    def test_dead_group_bounded_by_duration(self, redis_conn):
        """A group nobody reads: with max_lag = 10s the stream keeps only the last 10 s, beat after beat."""
        key = _key()
        redis_conn.xgroup_create(key, "dead", id="0", mkstream=True)
        entry = StreamPolicy(RawKey(key), MaxLen(0, approx=False), protect=Protect("undelivered", "10s"))
        for second in range(1, 40, 3):
            now = datetime.fromtimestamp(BASE_MS / 1000 + second, UTC)
            redis_conn.xadd(key, {"i": str(second)}, id=f"{BASE_MS + second * 1000}-0")
            RetentionDriver(redis_conn, [entry], clock=lambda now=now: now, replicas=SOLO).sweep()
            oldest = StreamId.parse(_ids(redis_conn, key)[0])
            assert oldest.ms >= BASE_MS + (second - 10) * 1000

    def test_async_twin(self, redis_server, redis_conn):
        """The asyncio driver trims protected streams on a worker thread with fold_conn, with the same result."""
        import asyncio

        key = _key()
        ids = _fill(redis_conn, key, 20)
        redis_conn.xgroup_create(key, "g", id="0")
        redis_conn.xreadgroup("g", "c", {key: ">"}, count=4)
        entry = StreamPolicy(RawKey(key), MaxLen(5, approx=False), protect=Protect("undelivered", 100))
        with pytest.raises(InvalidPolicy, match="fold_conn"):
            AsyncRetentionDriver(redis.asyncio.Redis(port=redis_server.port), [entry])

        async def beat():
            conn = redis.asyncio.Redis(port=redis_server.port)
            try:
                return await AsyncRetentionDriver(conn, [entry], fold_conn=redis_conn, clock=lambda: NOW).sweep()
            finally:
                await conn.aclose()

        assert asyncio.run(beat()).removed_by[key] == 4 and _ids(redis_conn, key) == ids[4:]


class TestReported:
    def test_metrics_and_dry_run(self, redis_conn):
        """An unprotected trim that takes unconsumed entries shows in the metric by stream and group, and the dry run
        says beforehand what it would take from each group."""
        key = _key()
        _fill(redis_conn, key, 50)
        redis_conn.xgroup_create(key, "slow", id="0")
        redis_conn.xreadgroup("slow", "c", {key: ">"}, count=10)  # 10 pending, 40 undelivered
        redis_conn.xgroup_create(key, "done", id="$")
        entry = StreamPolicy(RawKey(key), MaxLen(20, approx=False))
        (row,) = preview(redis_conn, [entry], now=NOW)
        lag = lag_known(redis_conn)
        assert {name: (taken.pending, taken.undelivered) for name, taken in row.groups.items()} == \
            {"slow": (10, 20 if lag else None), "done": (0, 0 if lag else None)}
        assert f"group slow: 10 pending, {20 if lag else 'unknown'} undelivered" in row.describe()
        metrics = DriverMetrics()
        metrics.observe(RetentionDriver(redis_conn, [entry], clock=lambda: NOW).sweep())
        found = samples(metrics.exposition())
        assert found[("retain_stream_unconsumed_trimmed_total", (("group", "slow"), ("stream", key)))] == \
            (30 if lag else 10)
        assert ("retain_stream_unconsumed_trimmed_total", (("group", "done"), ("stream", key))) not in found

    def test_pending_counted_once(self, redis_conn):
        """A pending entry whose stream entry is gone is counted in the beat that took it, not again later."""
        key = _key()
        _fill(redis_conn, key, 30)
        redis_conn.xgroup_create(key, "g", id="0")
        redis_conn.xreadgroup("g", "c", {key: ">"}, count=30)  # all pending
        driver = RetentionDriver(redis_conn, [(RawKey(key), MaxLen(20, approx=False))], clock=lambda: NOW)
        assert driver.sweep().unconsumed[(key, "g")].pending == 10
        _fill(redis_conn, key, 5, start=31)
        report = driver.sweep()
        assert report.unconsumed[(key, "g")].pending == 5
        assert report.unconsumed[(key, "g")].undelivered == (0 if lag_known(redis_conn) else None)
