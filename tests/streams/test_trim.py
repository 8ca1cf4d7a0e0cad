"""retain.streams.trim against a real redis-server: INV-WINDOW, INV-VALIDATE, INV-SURFACE, INV-DECOUPLED."""

from __future__ import annotations

import asyncio
import itertools
from datetime import UTC, datetime

import pytest
import redis
import redis.asyncio
from hypothesis import given, settings
from hypothesis import strategies as st

from retain.errors import InvalidStreamName, InvalidWindow, ServerUnavailable, WrongTypeError
from retain.servers import free_port
from retain.streams import RawKey, StreamRef, atrim, trim, xtrim_command
from retain.windows import MaxAge, MaxLen, MinId
from tests.helpers.streams import BASE_MS, at_node_boundary, fill, remaining

UTC = UTC
_keys = itertools.count()


class TestWindowInvariant:
    """INV-WINDOW: a trim never deletes inside its window; ~ removes whole nodes only."""

    @settings(max_examples=120)
    @given(steps=st.lists(st.integers(min_value=0, max_value=3), max_size=1200),
           node=st.integers(min_value=1, max_value=120), data=st.data(), approx=st.booleans())
    def test_maxlen(self, redis_conn, node_size, steps, node, data, approx):
        """MAXLEN: = leaves exactly the newest count; ~ leaves at least them and removes whole nodes."""
        node_size(node)
        key = f"prop:maxlen:{next(_keys)}"
        ids = fill(redis_conn, key, steps)
        count = data.draw(st.integers(min_value=0, max_value=len(ids) + 20), label="count")
        removed = trim(redis_conn, RawKey(key), MaxLen(count, approx))
        kept = remaining(redis_conn, key)
        window = ids[-count:] if count else []
        assert kept == ids[len(ids) - len(kept):], "a trim removes from the head only"
        assert removed == len(ids) - len(kept)
        if approx:
            assert len(kept) >= len(window) and kept[len(kept) - len(window):] == window
            assert at_node_boundary(removed, len(ids), node), f"~ removed {removed}, not whole nodes of {node}"
        else:
            assert kept == window
        redis_conn.delete(key)

    @settings(max_examples=120)
    @given(steps=st.lists(st.integers(min_value=0, max_value=3), max_size=1200),
           node=st.integers(min_value=1, max_value=120), data=st.data(), approx=st.booleans())
    def test_minid(self, redis_conn, node_size, steps, node, data, approx):
        """MINID: never removes an entry at or after the floor; = removes everything before it."""
        node_size(node)
        key = f"prop:minid:{next(_keys)}"
        ids = fill(redis_conn, key, steps)
        last_ms = ids[-1][0] if ids else BASE_MS
        floor_ms = data.draw(st.integers(min_value=BASE_MS - 5, max_value=last_ms + 5), label="floor_ms")
        instant = datetime.fromtimestamp(floor_ms / 1000, UTC)
        removed = trim(redis_conn, RawKey(key), MinId(instant, approx))
        kept = remaining(redis_conn, key)
        window = [entry for entry in ids if entry >= (floor_ms, 0)]
        assert removed == len(ids) - len(kept)
        assert all(entry < (floor_ms, 0) for entry in ids[:removed]), "removed an entry at or after the floor"
        if approx:
            assert kept[len(kept) - len(window):] == window
            assert at_node_boundary(removed, len(ids), node), f"~ removed {removed}, not whole nodes of {node}"
        else:
            assert kept == window
        redis_conn.delete(key)

    def test_approx_under_trims_exact_does_not(self, redis_conn, node_size):
        """With nodes of 10, MAXLEN ~ 25 of 100 keeps 30; MAXLEN = 25 keeps 25."""
        node_size(10)
        for key in ("a", "b"):
            fill(redis_conn, key, [1] * 100)
        assert trim(redis_conn, RawKey("a"), MaxLen(25)) == 70
        assert trim(redis_conn, RawKey("b"), MaxLen(25, approx=False)) == 75
        assert (redis_conn.xlen("a"), redis_conn.xlen("b")) == (30, 25)

    def test_max_age_resolves_against_now(self, redis_conn):
        """MaxAge keeps exactly what is younger than now - duration (exact mode)."""
        fill(redis_conn, "aged", [60_000] * 10)  # one entry a minute
        now = datetime.fromtimestamp((BASE_MS + 10 * 60_000) / 1000, UTC)
        assert trim(redis_conn, RawKey("aged"), MaxAge("3m30s", approx=False), now=now) == 6
        assert [ms for ms, _ in remaining(redis_conn, "aged")] == [BASE_MS + m * 60_000 for m in (7, 8, 9, 10)]


class TestTrim:
    def test_missing_key_removes_zero(self, redis_conn):
        """A stream that does not exist removes 0 and is not created."""
        assert trim(redis_conn, StreamRef("q", "absent"), MaxLen(0, approx=False)) == 0
        assert redis_conn.exists(StreamRef("q", "absent").key) == 0

    def test_one_xtrim_direct(self):
        """The command is one XTRIM with ~ or =, never a script."""
        stream = StreamRef("q", "s")
        assert xtrim_command(stream, MaxLen(5)) == ("XTRIM", "emq:{q}:stream:s", "MAXLEN", "~", "5")
        instant = datetime(2026, 9, 12, 8, tzinfo=UTC)
        assert xtrim_command(stream, MinId(instant, approx=False)) == (
            "XTRIM", "emq:{q}:stream:s", "MINID", "=", f"{int(instant.timestamp() * 1000)}-0")

    def test_limit(self, redis_conn, node_size):
        """limit=0 lifts the server's cap on one ~ trim (100 x node entries); = takes no LIMIT; bad limits refused."""
        stream = StreamRef("q", "s")
        assert xtrim_command(stream, MaxLen(5), limit=0)[-2:] == ("LIMIT", "0")
        assert xtrim_command(stream, MaxLen(5, approx=False), limit=0) == ("XTRIM", stream.key, "MAXLEN", "=", "5")
        for bad in (-1, True, "0", 1.5):
            with pytest.raises(InvalidWindow, match="limit: must be a whole number >= 0"):
                xtrim_command(stream, MaxLen(5), limit=bad)
        node_size(10)
        for index in range(5_000):
            redis_conn.xadd(stream.key, {"i": str(index)})
        assert trim(redis_conn, stream, MaxLen(100)) == 1_000
        assert trim(redis_conn, stream, MaxLen(100), limit=0) == 3_900

    def test_issues_exactly_one_command(self, redis_conn):
        """trim sends one XTRIM and nothing else (commandstats count it)."""
        redis_conn.xadd("emq:{q}:stream:s", {"a": "1"})
        redis_conn.config_resetstat()
        trim(redis_conn, StreamRef("q", "s"), MaxLen(0))
        stats = redis_conn.info("commandstats")
        assert stats["cmdstat_xtrim"]["calls"] == 1
        assert [name for name in stats if not name.startswith(("cmdstat_xtrim", "cmdstat_config", "cmdstat_info"))] == []

    def test_async_twin(self, redis_server):
        """atrim removes what trim would, over redis.asyncio."""
        async def scenario() -> int:
            conn = redis.asyncio.Redis(host=redis_server.host, port=redis_server.port)
            try:
                for index in range(50):
                    await conn.xadd("emq:{q}:stream:async", {"i": str(index)})
                return await atrim(conn, StreamRef("q", "async"), MaxLen(10, approx=False))
            finally:
                await conn.aclose()
        assert asyncio.run(scenario()) == 40

    def test_on_a_cluster(self, redis_cluster):
        """trim works through a cluster client; every stream of a queue shares one slot."""
        conn = redis_cluster.client()
        refs = [StreamRef(f"queue{q}", f"s{s}") for q in range(4) for s in range(3)]
        for ref in refs:
            for index in range(30):
                conn.xadd(ref.key, {"i": str(index)})
        assert [trim(conn, ref, MaxLen(5, approx=False)) for ref in refs] == [25] * len(refs)
        slots = {q: {conn.keyslot(r.key) for r in refs if r.queue == q} for q in {r.queue for r in refs}}
        assert all(len(found) == 1 for found in slots.values())
        conn.close()


class TestValidateBeforeIO:
    """INV-VALIDATE: a refused trim sends nothing; the server's counters prove it."""

    def counters(self, conn: redis.Redis) -> dict[str, int]:
        return {name: stat["calls"] for name, stat in conn.info("commandstats").items()
                if name != "cmdstat_info"}

    def test_refused_trims_send_nothing(self, redis_conn):
        """Bad streams, bad windows and a naive clock raise without touching the server."""
        redis_conn.xadd("emq:{q}:stream:s", {"a": "1"})
        before = self.counters(redis_conn)
        refusals = [
            lambda: trim(redis_conn, StreamRef("q", "bad name"), MaxLen(1)),
            lambda: trim(redis_conn, "emq:{q}:stream:s", MaxLen(1)),
            lambda: trim(redis_conn, StreamRef("q", "s"), ("maxlen", 1, True)),
            lambda: trim(redis_conn, StreamRef("q", "s"), MaxLen(-1)),
            lambda: trim(redis_conn, StreamRef("q", "s"), MaxAge("1h"), now=datetime(2026, 1, 1)),
            lambda: trim(redis_conn, StreamRef("q", "s"), MinId(datetime(2026, 1, 1))),
            lambda: trim(redis_conn, RawKey(""), MaxLen(1)),
        ]
        for refusal in refusals:
            with pytest.raises((InvalidStreamName, InvalidWindow)):
                refusal()
        assert self.counters(redis_conn) == before

    def test_counters_do_move_for_a_good_trim(self, redis_conn):
        """The control: a valid trim does show up in the counters."""
        before = self.counters(redis_conn)
        trim(redis_conn, StreamRef("q", "s"), MaxLen(1))
        assert self.counters(redis_conn).get("cmdstat_xtrim", 0) == before.get("cmdstat_xtrim", 0) + 1


class TestSurfaceServerErrors:
    """INV-SURFACE: a server error reaches the caller typed, with the server's message."""

    def test_wrongtype(self, redis_conn):
        """Trimming a string key raises WrongTypeError carrying WRONGTYPE and the cause."""
        redis_conn.set("emq:{q}:stream:s", "not a stream")
        with pytest.raises(WrongTypeError) as info:
            trim(redis_conn, StreamRef("q", "s"), MaxLen(1))
        assert info.value.server_message.startswith("WRONGTYPE")
        assert info.value.key == "emq:{q}:stream:s"
        assert "WRONGTYPE" in str(info.value)
        assert isinstance(info.value.__cause__, redis.exceptions.ResponseError)
        assert redis_conn.get("emq:{q}:stream:s") == b"not a stream"

    def test_unreachable(self):
        """No server on the port: ServerUnavailable, a ConnectionError."""
        conn = redis.Redis(host="127.0.0.1", port=free_port(), socket_connect_timeout=1)
        with pytest.raises(ServerUnavailable) as info:
            trim(conn, StreamRef("q", "s"), MaxLen(1))
        assert isinstance(info.value, ConnectionError)


class TestDecoupled:
    """INV-DECOUPLED: a stream nobody reads trims the same as one with consumers."""

    def test_no_consumer_trims_the_same(self, redis_conn):
        """A stream with no group and no reader loses exactly what a consumed twin loses."""
        lonely, consumed = StreamRef("q", "lonely"), StreamRef("q", "consumed")
        for ref in (lonely, consumed):
            fill(redis_conn, ref.key, [1] * 500)
        redis_conn.xgroup_create(consumed.key, "workers", id="0")
        redis_conn.xreadgroup("workers", "w1", {consumed.key: ">"}, count=200)  # pending, never acked
        assert redis_conn.xinfo_stream(lonely.key)["groups"] == 0
        removed = [trim(redis_conn, ref, MaxLen(100, approx=False)) for ref in (lonely, consumed)]
        assert removed == [400, 400]
        assert remaining(redis_conn, lonely.key) == remaining(redis_conn, consumed.key)
        assert redis_conn.xinfo_stream(lonely.key)["groups"] == 0
