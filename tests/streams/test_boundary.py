"""retain.streams.boundary: a length window's edge read in one command, right whatever another client does."""

from __future__ import annotations

import redis
from hypothesis import given
from hypothesis import strategies as st

from retain.ids import StreamId
from retain.streams.boundary import boundary_read, read_boundary
from tests.helpers.rival import proxied
from tests.helpers.streams import append


def ids_of(conn, key) -> list[StreamId]:
    return [StreamId.parse(entry_id) for entry_id, _ in conn.xrange(key)]


class TestBoundaryRead:
    def test_nothing_outside_reads_nothing(self):
        """A stream no longer than the window, as the caller saw it, needs no command."""
        assert boundary_read("k", 10, 10) is None
        assert boundary_read("k", 10, 3) is None

    def test_few_outside_read_from_the_oldest_end_with_the_length(self):
        """Fewer outside than the window holds: XINFO STREAM FULL, the length and the oldest entries at once."""
        assert boundary_read("k", 1000, 1500).command == ("XINFO", "STREAM", "k", "FULL", "COUNT", "500")

    def test_many_outside_read_from_the_newest_end(self):
        """More outside than the window holds, or a length unknown: XREVRANGE of the window and one more."""
        assert boundary_read("k", 10, 5000).command == ("XREVRANGE", "k", "+", "-", "COUNT", "11")
        assert boundary_read("k", 10, None).command == ("XREVRANGE", "k", "+", "-", "COUNT", "11")

    @given(length=st.integers(0, 60), count=st.integers(0, 60), hint=st.none() | st.integers(0, 120))
    def test_any_form_finds_the_same_boundary(self, redis_conn, length, count, hint):
        """Whichever form the expected length picks, the boundary is the (count+1)-th newest, or a lower one
        when the stream is longer than expected (an under-trim), never a higher one."""
        key = "boundary:any"
        redis_conn.delete(key)
        append(redis_conn, key, length)
        ids = ids_of(redis_conn, key)
        exact = ids[-count - 1] if length > count else None
        found = read_boundary(redis_conn, key, count, hint)
        if found is None:
            assert exact is None or (hint is not None and hint <= count)
        else:
            assert exact is not None and found <= exact
            assert found in ids
            if hint is None or hint >= length:
                assert found == exact


class TestRivalBetweenCommands:
    """The measured fault: anything removed from the head between two reads moved the boundary into the window."""

    def test_a_head_trim_after_the_length_does_not_move_the_boundary(self, redis_server):
        """1,500 entries, MaxLen(1000); right after the length is answered a rival trims the 300 oldest: the
        boundary is still the 500th entry (the two-step read, XLEN then the oldest len - n, gave the 800th)."""
        key = "boundary:rival"
        answered = {"length": False}

        def rival(command):
            if answered["length"]:
                answered["length"] = False
                proxy.direct.xtrim(key, minid=ids[300].decode(), approximate=False)
            answered["length"] = command[0].upper() == b"XLEN"

        with proxied(redis_server, rival) as proxy, redis_server.client() as direct:
            direct.delete(key)
            ids = append(direct, key, 1500)
            with redis.Redis.from_url(proxy.url) as conn:
                boundary = read_boundary(conn, key, 1000, int(conn.xlen(key)))
        assert boundary == StreamId.parse(ids[499]), \
            f"the boundary is entry #{ids.index(str(boundary).encode()) + 1}, not #500"

    @given(removed=st.lists(st.integers(0, 40), min_size=1, max_size=4), count=st.integers(0, 100))
    def test_any_head_removal_before_the_read(self, redis_server, removed, count):
        """Whatever a rival removes from the head between the length and the read, the boundary is at or
        below the (count+1)-th newest entry of the stream as the read found it."""
        key = "boundary:heads"
        steps = iter(removed)

        def rival(command):
            if command[0].upper() in (b"XINFO", b"XREVRANGE"):
                take = next(steps, 0)
                oldest = proxy.direct.xrange(key, count=take) if take else []
                if oldest:
                    proxy.direct.xdel(key, *[entry_id for entry_id, _ in oldest])

        with proxied(redis_server, rival) as proxy, redis_server.client() as direct:
            direct.delete(key)
            append(direct, key, 150)
            with redis.Redis.from_url(proxy.url) as conn:
                boundary = read_boundary(conn, key, count, int(conn.xlen(key)))
            left = ids_of(direct, key)
        newest_outside = left[-count - 1] if len(left) > count else None
        if boundary is not None:
            assert newest_outside is not None and boundary <= newest_outside, "the boundary reached into the window"
