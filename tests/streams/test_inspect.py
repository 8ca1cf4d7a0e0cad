"""retain.streams.inspect: what a stream holds now, read whatever the client decodes."""

from __future__ import annotations

import pytest
import redis

from retain.clock import utc_now
from retain.errors import ServerError, WrongTypeError
from retain.streams import list_streams, stream_info


class TestStreamInfo:
    @pytest.mark.parametrize("decode", [False, True], ids=["bytes", "text"])
    def test_figures_and_groups(self, redis_server, redis_conn, decode):
        """Length, first and last id, memory and a group's pending, from a client that decodes answers or not."""
        for index in range(4):
            redis_conn.xadd("s", {"i": str(index)}, id=f"{1000 + index}-0")
        redis_conn.xgroup_create("s", "g", id="0")
        redis_conn.xreadgroup("g", "c", {"s": ">"}, count=1)
        conn = redis.Redis.from_url(redis_server.url, decode_responses=decode)
        info = stream_info(conn, "s", now=utc_now())
        assert (info.length, str(info.first), str(info.last)) == (4, "1000-0", "1003-0")
        assert info.memory and info.memory > 0 and info.first_age_s and info.first_age_s > 0
        (group,) = info.groups
        assert (group.name, group.consumers, group.pending, group.last_delivered) == ("g", 1, 1, "1000-0")

    def test_empty_missing_and_other_types(self, redis_conn):
        """An empty stream has no first or last id; a missing key and a key of another type are refused."""
        redis_conn.xadd("s", {"a": "1"}, id="5-0")
        redis_conn.xdel("s", "5-0")
        redis_conn.set("text", "x")
        info = stream_info(redis_conn, "s", now=utc_now())
        assert (info.length, info.first, info.last, info.first_age_s) == (0, None, None, None)
        with pytest.raises(ServerError, match="does not exist"):
            stream_info(redis_conn, "nope", now=utc_now())
        with pytest.raises(WrongTypeError, match="holds a string"):
            stream_info(redis_conn, "text", now=utc_now())


class TestListStreams:
    def test_streams_only_sorted(self, redis_conn):
        """SCAN ... TYPE stream: a key of another type that matches is never listed."""
        for key in ("b", "a", "c:x"):
            redis_conn.xadd(key, {"a": "1"})
        redis_conn.set("d", "x")
        assert list_streams(redis_conn) == ["a", "b", "c:x"]
        assert list_streams(redis_conn, "c:*") == ["c:x"]

    def test_a_key_that_is_no_text_is_left_out(self, redis_conn):
        """A stream whose key is not UTF-8 is left out, as a pattern's rescan leaves it out (it raised
        UnicodeDecodeError, and `retain streams ls` ended in a traceback)."""
        redis_conn.xadd("a", {"a": "1"})
        redis_conn.xadd(b"\xff\xfe", {"a": "1"})
        assert list_streams(redis_conn) == ["a"]
