"""retain.retention.cuts and byte budgets: combined limits (the strictest wins) and MaxBytes, pure and live.

INV-WINDOW for several limits on one stream: a beat keeps an entry only while it
is inside every limit, and never removes one that every limit keeps; for a byte
budget, never an entry that a length window of the converted count would keep,
and after a beat the stream's MEMORY USAGE is within the budget plus one node.
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retain.errors import InvalidWindow
from retain.retention import RetentionDriver, StreamPolicy, decide, preview
from retain.retention.cuts import Size, cuts
from retain.streams import RawKey
from retain.windows import Limits, MaxAge, MaxBytes, MaxLen, MinId, parse_size
from tests.helpers.streams import BASE_MS

UTC = UTC
NOW = datetime.fromtimestamp(BASE_MS / 1000, UTC) + timedelta(seconds=100)
_keys = itertools.count()
#: what a node costs beyond its entries: the rax node, the listpack header and the master entry
NODE_OVERHEAD = 256


class TestMaxBytes:
    @pytest.mark.parametrize(("text", "size"), [("1B", 1), ("64MiB", 64 << 20), ("2KiB", 2048), ("1GiB", 1 << 30)])
    def test_sizes(self, text, size):
        """A whole number and a binary unit is a budget in bytes."""
        assert parse_size(text) == size
        assert MaxBytes(text).budget == size

    @pytest.mark.parametrize("bad", ["64MB", "64", "1.5MiB", "-1KiB", "", 64.0, None])
    def test_bad_sizes(self, bad):
        """Decimal units, a missing unit, fractions and other types are refused, saying what is expected."""
        with pytest.raises(InvalidWindow, match="B, KiB, MiB, GiB|whole number"):
            MaxBytes(bad)

    def test_budget_and_samples_checked(self):
        """A budget of 0 bytes or a negative sample count is refused before any I/O."""
        with pytest.raises(InvalidWindow, match="budget: must be a whole number >= 1"):
            MaxBytes(0)
        with pytest.raises(InvalidWindow, match="samples: must be a whole number >= 0"):
            MaxBytes(10, samples=-1)

    @given(budget=st.integers(1, 10**9), usage=st.integers(1, 10**9), length=st.integers(1, 10**6))
    def test_to_maxlen(self, budget, usage, length):
        """The count keeps the entries that fit at the stream's average cost; within budget it keeps them all."""
        count = MaxBytes(budget).to_maxlen(usage, length).count
        assert count * usage <= budget * length < (count + 1) * usage
        if usage <= budget:
            assert count >= length

    def test_nothing_measured_cuts_nothing(self):
        """A missing or empty stream gives the budget nothing to cut: no call rather than MAXLEN 0."""
        entry = StreamPolicy(RawKey("k"), MaxBytes("1KiB"))
        assert decide([entry], NOW) == ()
        assert decide([entry], NOW, {"k": Size(None, 0)}) == ()
        (call,) = decide([entry], NOW, {"k": Size(4096, 100)})
        assert call.command[2:5] == ("MAXLEN", "~", "25") and call.limit == "max_bytes"


class TestLimits:
    def test_one_of_each_kind(self):
        """Two limits of one kind, a single limit or something else are refused."""
        with pytest.raises(InvalidWindow, match="one MaxLen at most"):
            Limits(MaxLen(1), MaxLen(2))
        with pytest.raises(InvalidWindow, match="two limits or more"):
            Limits(MaxLen(1))
        with pytest.raises(InvalidWindow, match="takes MaxLen, MaxAge, MinId and MaxBytes"):
            Limits(MaxLen(1), "7d")  # type: ignore[arg-type]

    def test_strictest_length_and_time(self):
        """The smallest count and the latest floor are sent: at most two XTRIMs, each naming its limit."""
        window = Limits(MaxLen(100), MaxBytes(1000), MaxAge("10s"), MinId(NOW - timedelta(seconds=20)))
        found = cuts(window, NOW, {"k": Size(10_000, 900)}, "k")
        assert [(cut.limit, cut.window) for cut in found] == [
            ("max_bytes", MaxLen(90)), ("max_age", MinId(NOW - timedelta(seconds=10)))]
        found = cuts(window, NOW, {"k": Size(10_000, 1000)}, "k")
        assert found[0].limit == "maxlen"  # 100 either way: ties go to the first declared

    def test_decide_sends_both(self):
        """A stream with a length and an age limit gets a MAXLEN and a MINID call in one beat."""
        calls = decide([StreamPolicy(RawKey("k"), Limits(MaxLen(5), MaxAge("1s")))], NOW)
        assert [call.command[2] for call in calls] == ["MAXLEN", "MINID"]
        assert [call.limit for call in calls] == ["maxlen", "max_age"]


def _key() -> str:
    return f"limits:{next(_keys)}"


def _fill(conn, key: str, sizes: list[int], start_ms: int = BASE_MS) -> list[bytes]:
    pipe = conn.pipeline(transaction=False)
    for index, size in enumerate(sizes):
        pipe.xadd(key, {"f": "x" * size}, id=f"{start_ms + index}-0")
    return [entry_id.encode() if isinstance(entry_id, str) else entry_id for entry_id in pipe.execute()]


def _usage(conn, key: str) -> int:
    return int(conn.execute_command("MEMORY", "USAGE", key, "SAMPLES", "0") or 0)


@pytest.fixture
def node_limits(redis_conn):
    """Set stream-node-max-entries and -bytes for new streams; restore the defaults after."""
    def set_limits(entries: int, size: int) -> None:
        redis_conn.config_set("stream-node-max-entries", entries)
        redis_conn.config_set("stream-node-max-bytes", size)
    yield set_limits
    redis_conn.config_set("stream-node-max-entries", 100)
    redis_conn.config_set("stream-node-max-bytes", 4096)


def _fixed_cost(conn) -> int:
    """What a stream of one tiny entry costs under the node settings now: the key, the stream header, the
    radix tree and one node as allocated (Redis 7 pre-allocates a new node's listpack, up to 4096 bytes)."""
    key = _key()
    conn.xadd(key, {"f": "x"})
    cost = _usage(conn, key)
    conn.delete(key)
    return cost


def _one_node(node_entries: int, node_bytes: int, largest: int) -> int:
    """The most one macro-node can cost, as allocated: what it may hold (its byte limit plus the entry that crossed it, or its
    count), or what Redis 7 allocates for a new node up front (4096 bytes, or the byte limit when smaller)."""
    by_count = node_entries * (largest + 16)
    holds = min(by_count, node_bytes + largest + 16) if node_bytes else by_count
    allocated = min(node_bytes, 4096) if node_bytes else 4096
    return max(holds, allocated) * 5 // 4 + NODE_OVERHEAD  # the allocator rounds up by at most a quarter


class TestBytesLive:
    @settings(max_examples=25)
    @given(entries=st.integers(1, 400), field=st.integers(1, 600), node_entries=st.integers(1, 150),
           node_bytes=st.sampled_from([0, 256, 1024, 4096, 8192]), budget=st.integers(1_000, 200_000))
    def test_one_beat_bound(self, redis_conn, node_limits, entries, field, node_entries, node_bytes, budget):
        """Entries of one size: after one beat, memory is within budget plus one node plus the stream's fixed cost
        (spread over the entries by the estimate), and no entry inside the converted length window is gone."""
        node_limits(node_entries, node_bytes)
        key = _key()
        fixed = _fixed_cost(redis_conn)
        _fill(redis_conn, key, [field] * entries)
        before, length = _usage(redis_conn, key), redis_conn.xlen(key)
        count = MaxBytes(budget).to_maxlen(before, length).count
        report = RetentionDriver(redis_conn, [(RawKey(key), MaxBytes(budget))], clock=lambda: NOW).sweep()
        assert report.ok
        assert redis_conn.xlen(key) >= min(length, count)
        assert _usage(redis_conn, key) <= budget + _one_node(node_entries, node_bytes, field) + fixed

    @settings(max_examples=25)
    @given(sizes=st.lists(st.integers(1, 800), min_size=1, max_size=300), node_entries=st.integers(1, 150),
           node_bytes=st.sampled_from([0, 1024, 4096]), budget=st.integers(2_000, 100_000))
    def test_fixed_point_bound(self, redis_conn, node_limits, sizes, node_entries, node_bytes, budget):
        """Entries of any sizes: each beat removes nothing a converted length would keep, and once beats stop
        removing, memory is within budget plus one node plus the fixed cost (a beat re-measures what the last kept)."""
        node_limits(node_entries, node_bytes)
        key = _key()
        fixed = _fixed_cost(redis_conn)
        _fill(redis_conn, key, sizes)
        driver = RetentionDriver(redis_conn, [(RawKey(key), MaxBytes(budget))], clock=lambda: NOW)
        for _ in range(len(sizes) + 1):
            before, length = _usage(redis_conn, key), redis_conn.xlen(key)
            count = MaxBytes(budget).to_maxlen(before, length).count
            report = driver.sweep()
            assert redis_conn.xlen(key) >= min(length, count)
            if report.removed == 0:
                break
        assert _usage(redis_conn, key) <= budget + _one_node(node_entries, node_bytes, max(sizes)) + fixed

    @settings(max_examples=25)
    @given(entries=st.integers(1, 300), maxlen=st.integers(0, 300), age=st.integers(1, 300),
           budget=st.integers(500, 50_000), node_entries=st.integers(1, 50), exact=st.booleans())
    def test_combined_keeps_what_every_limit_keeps(self, redis_conn, node_limits, entries, maxlen, age, budget,
                                                    node_entries, exact):
        """maxlen + max_age + max_bytes: nothing inside all three is removed; with '=' exactly the rest is."""
        node_limits(node_entries, 0)
        key = _key()
        ids = _fill(redis_conn, key, [20] * entries)
        usage, length = _usage(redis_conn, key), redis_conn.xlen(key)
        by_bytes = MaxBytes(budget).to_maxlen(usage, length).count
        now = datetime.fromtimestamp((BASE_MS + entries) / 1000, UTC)  # entry i is (entries - i) ms old
        window = Limits(MaxLen(maxlen, not exact), MaxAge(timedelta(milliseconds=age), not exact),
                        MaxBytes(budget, approx=not exact))
        inside = [entry_id for index, entry_id in enumerate(ids)
                  if index >= entries - maxlen and index >= entries - by_bytes and BASE_MS + index >= BASE_MS + entries - age]
        RetentionDriver(redis_conn, [(RawKey(key), window)], clock=lambda: now).sweep()
        left = [entry_id for entry_id, _ in redis_conn.xrange(key)]
        assert set(inside) <= set(left)
        if exact:
            assert left == inside


class TestDryRunLimits:
    def test_names_the_limit_that_cuts(self, redis_conn):
        """The dry run shows what each limit alone would remove and names the strictest."""
        key = _key()
        _fill(redis_conn, key, [10] * 50)
        now = datetime.fromtimestamp((BASE_MS + 50) / 1000, UTC)
        entry = StreamPolicy(RawKey(key), Limits(MaxLen(40, False), MaxAge(timedelta(milliseconds=20), False)))
        (row,) = preview(redis_conn, [entry], now=now)
        assert dict(row.outside_by) == {"maxlen": 10, "max_age": 30}
        assert (row.cut_by, row.outside, row.keeps) == ("max_age", 30, 20)
        assert "cut by max_age" in row.describe()
        assert redis_conn.xlen(key) == 50  # a dry run writes nothing

    def test_bytes_in_the_dry_run(self, redis_conn):
        """A byte budget is measured and shown as the length it means now."""
        key = _key()
        _fill(redis_conn, key, [100] * 100)
        (row,) = preview(redis_conn, [StreamPolicy(RawKey(key), MaxBytes(2_000, approx=False))], now=NOW)
        assert row.cut_by == "max_bytes" and isinstance(row.window, MaxLen) and row.outside == 100 - row.window.count


class TestArchivedLimits:
    def test_folds_to_the_strictest(self, redis_conn, tmp_path):
        """An archived stream with several limits folds and trims to the one that drops most; nothing inside
        every limit leaves the live stream, and everything that left is archived."""
        from retain.archive import Archive
        from tests.helpers.archive import archived_ids

        key = _key()
        ids = _fill(redis_conn, key, [10] * 60)
        now = datetime.fromtimestamp((BASE_MS + 60) / 1000, UTC)
        window = Limits(MaxLen(50, False), MaxAge(timedelta(milliseconds=25), False), MaxBytes("1GiB"))
        archive = Archive(f"file://{tmp_path}/archive")
        driver = RetentionDriver(redis_conn, [StreamPolicy(RawKey(key), window, archive=True)], archive=archive,
                                 clock=lambda: now)
        report = driver.sweep()
        assert report.ok and report.removed_by[key] == 35 and report.folded_by[key] == 35
        assert [entry_id for entry_id, _ in redis_conn.xrange(key)] == ids[35:]
        assert archived_ids(archive, RawKey(key)) == [(BASE_MS + index, 0) for index in range(35)]
