"""retain.archive._pipeline: the chunks a fold reads (prefetched or not, the same), and the GC pause."""

from __future__ import annotations

import gc
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from retain.archive._pipeline import Chunks, paused_gc, raw_reader
from retain.ids import StreamId

HIGH = StreamId(2**64 - 1, 2**64 - 1)


@pytest.fixture
def filled(redis_conn) -> list[bytes]:
    return [redis_conn.xadd("chunks", {"i": str(index)}, id=f"{index + 1}-0") for index in range(250)]


def chunked(conn, low, high, *, count, limit, prefetch=None) -> tuple[list[list[bytes]], bool]:
    chunks = Chunks(raw_reader(conn), "chunks", low, high, count=count, limit=limit, prefetch=prefetch)
    return [[entry[0] for entry in chunk] for chunk in chunks], chunks.exhausted


class TestChunks:
    @pytest.mark.parametrize("ahead", [False, True], ids=["at-once", "prefetched"])
    def test_the_xrange_chunks(self, redis_conn, filled, ahead):
        """The chunks of a range, in order, up to a limit; exhausted only when the range held nothing more."""
        with ThreadPoolExecutor(1) as pool:
            prefetch = pool if ahead else None
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
        """Leaving the loop waits for the read in flight: no thread is left with a connection in use."""
        with ThreadPoolExecutor(1) as pool:
            chunks = Chunks(raw_reader(redis_conn), "chunks", StreamId(0, 0), HIGH, count=10, limit=10_000,
                            prefetch=pool)
            for chunk in chunks:
                assert len(chunk) == 10
                break
            chunks.close()  # waits for the next chunk, asked for ahead, and drops it
            assert chunks.read == 10 and not chunks.exhausted


class TestPausedGc:
    def test_paused_inside_restored_after(self):
        """The GC is off inside, nested or on threads at once, and on again when the last block ends."""
        assert gc.isenabled()
        inside = threading.Event()
        leave = threading.Event()

        def other() -> None:
            with paused_gc():
                inside.set()
                leave.wait(10)

        thread = threading.Thread(target=other)
        with paused_gc():
            assert not gc.isenabled()
            thread.start()
            assert inside.wait(10)
        assert not gc.isenabled()  # the other block is still open
        leave.set()
        thread.join(10)
        assert gc.isenabled()

    def test_left_off_when_it_was_off(self):
        """A caller who turned the GC off keeps it off."""
        gc.disable()
        try:
            with paused_gc():
                pass
            assert not gc.isenabled()
        finally:
            gc.enable()
