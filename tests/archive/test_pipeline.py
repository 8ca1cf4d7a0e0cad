"""retain.archive._pipeline: the chunks a fold reads (prefetched or not, the same)."""

from __future__ import annotations

import pytest

from retain.archive._pipeline import Chunks, raw_reader
from retain.ids import StreamId

HIGH = StreamId(2**64 - 1, 2**64 - 1)


@pytest.fixture
def filled(redis_conn) -> list[bytes]:
    return [redis_conn.xadd("chunks", {"i": str(index)}, id=f"{index + 1}-0") for index in range(250)]


def chunked(conn, low, high, *, count, limit, prefetch=False) -> tuple[list[list[bytes]], bool]:
    chunks = Chunks(raw_reader(conn), "chunks", low, high, count=count, limit=limit, prefetch=prefetch)
    return [[entry[0] for entry in chunk] for chunk in chunks], chunks.exhausted


class TestChunks:
    @pytest.mark.parametrize("prefetch", [False, True], ids=["at-once", "asked-ahead"])
    def test_the_xrange_chunks(self, redis_conn, filled, prefetch):
        """The chunks of a range, in order, up to a limit; exhausted only when the range held nothing more."""
        whole, done = chunked(redis_conn, StreamId(0, 0), HIGH, count=100, limit=10_000, prefetch=prefetch)
        assert [len(chunk) for chunk in whole] == [100, 100, 50] and done
        assert [entry for chunk in whole for entry in chunk] == filled
        limited, done = chunked(redis_conn, StreamId(0, 0), HIGH, count=100, limit=150, prefetch=prefetch)
        assert [len(chunk) for chunk in limited] == [100, 50] and not done
        bounded, done = chunked(redis_conn, StreamId(11, 0), StreamId(30, 0), count=10, limit=10_000,
                                prefetch=prefetch)
        assert [len(chunk) for chunk in bounded] == [10, 10] and done
        assert chunked(redis_conn, StreamId(300, 0), HIGH, count=10, limit=10, prefetch=prefetch) == ([], True)

    def test_a_reader_that_stops_early(self, redis_conn, filled):
        """Leaving the loop reads the answer still on the wire and gives the connection back, clean."""
        chunks = Chunks(raw_reader(redis_conn), "chunks", StreamId(0, 0), HIGH, count=10, limit=10_000,
                        prefetch=True)
        for chunk in chunks:
            assert len(chunk) == 10
            break
        chunks.close()  # reads the next chunk, asked for ahead, and drops it
        assert chunks.read == 10 and not chunks.exhausted
        # The pool lends the connection given back first: an answer left on it would answer this XLEN.
        assert redis_conn.xlen("chunks") == 250

    def test_an_error_on_the_wire(self, redis_conn, filled):
        """A read asked ahead that the server refuses is the stream's error, and the connection stays usable."""
        from retain.errors import WrongTypeError

        chunks = Chunks(raw_reader(redis_conn), "chunks", StreamId(0, 0), HIGH, count=10, limit=10_000,
                        prefetch=True)
        taken = iter(chunks)
        next(taken)
        redis_conn.delete("chunks")
        redis_conn.set("chunks", "no stream")  # the answer already asked for may be a chunk; the next one fails
        with pytest.raises(WrongTypeError):
            for _ in taken:
                pass
        assert redis_conn.ping()
