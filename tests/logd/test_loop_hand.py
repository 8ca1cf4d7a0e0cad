"""The event loop's hand in group commits: small patches run on the loop, in their place, while the writer waits."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from retain.logd import ServerThread, Store
from retain.logd.client import Client
from retain.logd.loop_hand import LoopHand, small_write
from retain.logd.store import Written
from retain.logd.view import ScanBudgetExceeded
from retain.logd.writer import Writer
from tests.helpers.logd import LIMITS
from tests.logd.test_writer import CountingGroups


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    """An event loop running in a thread of its own, as a server's does."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield loop
    loop.call_soon_threadsafe(loop.stop)
    thread.join(30)
    loop.close()


@pytest.fixture
def counted(tmp_path) -> Iterator[tuple[Store, CountingGroups]]:
    backend = CountingGroups(str(tmp_path / "logd.sqlite3"))
    store = Store(backend)
    yield store, backend
    store.close()


def on_thread(ran: list[int], write: Callable[[], Any]) -> Callable[[], Any]:
    """``write``, noting the thread that runs it in ``ran``."""
    def noted() -> Any:
        ran.append(threading.get_ident())
        return write()
    return noted


def loop_thread(loop: asyncio.AbstractEventLoop) -> int:
    return asyncio.run_coroutine_threadsafe(_ident(), loop).result(30)


async def _ident() -> int:
    return threading.get_ident()


class TestLoopHand:
    def test_small_writes_run_on_the_loop_in_their_place(self, loop, counted):
        """Of a group of five queued writes, the small ones run on the loop and the plain one on the writer
        thread, in submission order, in one transaction, each answered with its own commit."""
        store, backend = counted
        session, ran = store.session(), []
        writer = Writer(store)
        writer.hand = LoopHand(loop, store)
        release = threading.Event()
        busy = writer.submit(lambda: (ran.append(threading.get_ident()), release.wait(30)))
        futures = [writer.submit_small_write(on_thread(ran, lambda: session.patch([{"set": "a", "value": 1}]))),
                   writer.submit_small_write(on_thread(ran, lambda: session.patch([{"set": "b", "value": 2}]))),
                   writer.submit_write(on_thread(ran, lambda: session.patch([{"set": "c", "value": 3}]))),
                   writer.submit_small_write(on_thread(ran, lambda: session.patch([{"set": "a", "value": 4}],
                                                                                  precondition={"c": 3})))]
        release.set()
        assert busy.result(30)[1]
        assert [future.result(30) for future in futures] == [Written(n) for n in range(1, 5)]
        writer_thread, on_loop = ran[0], loop_thread(loop)
        assert ran[1:] == [on_loop, on_loop, writer_thread, on_loop]
        assert backend.groups == 1
        assert store.session().get().value == {"a": 4, "b": 2, "c": 3}
        writer.shutdown()

    def test_a_patch_scanning_too_much_runs_on_the_writer(self, loop, counted):
        """A small request whose scans pass the hand's bound (a delete of a container of 10 records, against
        5) stops before writing; the writer thread runs it in its place, and the loop the small one after."""
        store, _ = counted
        session, ran = store.session(), []
        session.patch([{"set": "big", "value": {f"r{n}": {"n": n} for n in range(10)}}])
        writer = Writer(store)
        writer.hand = LoopHand(loop, store, scan_rows=5)
        release = threading.Event()
        writer.submit(lambda: (ran.append(threading.get_ident()), release.wait(30)))
        futures = [writer.submit_small_write(on_thread(ran, lambda: session.patch([{"delete": "big"}]))),
                   writer.submit_small_write(on_thread(ran, lambda: session.patch([{"set": "after", "value": 1}])))]
        release.set()
        assert [future.result(30) for future in futures] == [Written(2), Written(3)]
        writer_thread, on_loop = ran[0], loop_thread(loop)
        assert ran[1:] == [on_loop, writer_thread, on_loop]  # the delete tried on the loop, then run by the writer
        assert store.session().get().value == {"after": 1}
        writer.shutdown()

    def test_the_scan_bound_stops_before_anything_is_written(self, counted):
        """Within scans_at_most, a patch that would scan more raises ScanBudgetExceeded and leaves the store
        as it was; outside, the same patch commits."""
        store, _ = counted
        session = store.session()
        session.patch([{"set": "big", "value": {f"r{n}": {"n": n} for n in range(10)}}])
        with store.scans_at_most(5), pytest.raises(ScanBudgetExceeded):
            session.patch([{"set": "big", "value": {}}])
        assert store.head == 1
        assert session.patch([{"set": "big", "value": {}}]) == Written(2)

    def test_a_closed_hand_leaves_every_write_to_the_writer(self, loop, counted):
        store, _ = counted
        session, ran = store.session(), []
        writer = Writer(store)
        hand = LoopHand(loop, store)
        writer.hand = hand
        hand.close()
        future = writer.submit_small_write(on_thread(ran, lambda: session.patch([{"set": "a", "value": 1}])))
        assert future.result(30) == Written(1)
        assert ran != [loop_thread(loop)]
        writer.shutdown()

    def test_a_stopped_loop_hands_the_writes_back(self, counted):
        """A loop that is not running never comes to the writes handed to it: the writer takes them back
        and runs them itself, rather than wait for it without end."""
        store, _ = counted
        stopped = asyncio.new_event_loop()
        writer = Writer(store)
        writer.hand = LoopHand(stopped, store)
        future = writer.submit_small_write(store.session().patch, [{"set": "a", "value": 1}])
        assert future.result(30) == Written(1)
        writer.shutdown()
        stopped.close()


class TestSmallWrite:
    def test_a_patch_of_few_objects_is_small(self):
        assert small_write({"patch": {"ops": [{"set": "jobs.j1.status", "value": "done"}]}})

    def test_a_patch_of_many_objects_is_not(self):
        assert not small_write({"patch": {"ops": [{"set": "big", "value": list(range(5_000))}]}})


class TestServed:
    def test_the_loop_runs_patches_on_a_local_store_only(self, tmp_path):
        """A SQLite store served gets the loop's hand; patches over it commit as before."""
        store = Store.open(str(tmp_path / "logd.sqlite3"))
        with ServerThread(store, listen=("127.0.0.1", 0), limits=LIMITS) as served:
            assert isinstance(served.server.writer.hand, LoopHand)
            with Client(served.address) as logd:
                assert logd.patch([{"set": "a", "value": 1}]).commit == 1
                assert logd.get("a").value == 1
        store.close()

    def test_big_and_small_patches_racing_all_commit(self, tmp_path):
        """Clients patch at once, one deleting a container past the hand's scan bound: every patch commits,
        numbered without gaps, and the store holds what they wrote."""
        store = Store.open(str(tmp_path / "logd.sqlite3"))
        store.session().patch([{"set": "big", "value": {f"r{n}": {"n": n} for n in range(600)}}])
        with ServerThread(store, listen=("127.0.0.1", 0), limits=LIMITS) as served:
            commits: list[int] = []
            start = threading.Barrier(9)

            def work(number: int) -> None:
                with Client(served.address) as logd:
                    start.wait(30)
                    op = {"delete": "big"} if number == 4 else {"set": f"k{number}", "value": number}
                    commits.append(logd.patch([op]).commit)

            threads = [threading.Thread(target=work, args=(n,)) for n in range(9)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(60)
            assert sorted(commits) == list(range(2, 11))
            assert store.session().get().value == {f"k{n}": n for n in range(9) if n != 4}
        store.close()

    def test_stopping_under_patches_finishes_and_keeps_what_was_answered(self, tmp_path):
        """Stopping the server while clients patch as fast as they can does not wait on itself (a group handed
        to the loop before the stop is run by it or taken back), and every patch answered is stored."""
        store = Store.open(str(tmp_path / "logd.sqlite3"))
        served = ServerThread(store, listen=("127.0.0.1", 0), limits=LIMITS).start()
        answered: list[int] = []
        going = threading.Barrier(5)

        def work(number: int) -> None:
            try:
                with Client(served.address) as logd:
                    going.wait(30)
                    for count in range(100_000):
                        answered.append(logd.patch([{"set": f"k{number}", "value": count}]).commit)
            except Exception:  # the server went away under it: what it was told before that counts
                return

        threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
        for thread in threads:
            thread.start()
        going.wait(30)
        for _ in range(3000):  # until 200 are answered: the server is busy with patches when it stops
            if len(answered) >= 200:
                break
            threading.Event().wait(0.01)
        assert len(answered) >= 200
        served.stop()  # raises if the server's close did not finish within 30 s
        for thread in threads:
            thread.join(60)
        assert answered and store.head >= max(answered)
        assert sorted(answered) == list(range(1, len(answered) + 1))
        store.close()
