"""Group commit: Store.together, the server's Writer, and patches racing over a served store."""

from __future__ import annotations

import threading
from concurrent.futures import Future

import pytest

from retain.errors import PreconditionFailed, StorageError
from retain.logd import Store
from retain.logd.client import Client
from retain.logd.server import ServerThread
from retain.logd.sqlite import SqliteBackend
from retain.logd.store import Written
from retain.logd.writer import Writer
from tests.helpers.logd import LIMITS


class CountingGroups(SqliteBackend):
    """A SQLite backend that counts its groups (each one transaction, one sync)."""

    groups = 0

    def group(self):
        self.groups += 1
        return super().group()


class FailingWrite(SqliteBackend):
    """A SQLite backend whose write of any commit that sets ``b`` fails after its rows are in (a disk error)."""

    def write(self, record, rows, meta=None):
        super().write(record, rows, meta)
        if any(op.get("set") == "b" for op in record.ops or ()):
            raise StorageError("sqlite: disk I/O error (made by the test)")


def patches(session):
    """Four writes: the third's precondition fails."""
    return [lambda: session.patch([{"set": "a", "value": 1}]),
            lambda: session.patch([{"set": "b", "value": 2}], precondition={"a": 1}),
            lambda: session.patch([{"set": "c", "value": 3}], precondition={"a": 99}),
            lambda: session.patch([{"set": "a", "value": 4}], precondition={"b": 2})]


class TestTogether:
    def test_a_failed_precondition_fails_alone(self, store):
        """Of four writes together, the one whose precondition fails fails; the others commit as 1, 2, 3."""
        outcomes = store.together(patches(store.session()))
        assert [outcome.value for outcome in outcomes] == [Written(1), Written(2), None, Written(3)]
        assert isinstance(outcomes[2].error, PreconditionFailed)
        assert store.head == 3
        assert store.session().get().value == {"a": 4, "b": 2}
        assert [record.number for record in store.backend.commits(1, (0,))] == [1, 2, 3]

    def test_a_write_failing_after_its_rows_fails_alone(self, tmp_path):
        """A write that fails after its rows went in loses the group, which runs its writes again one by one:
        that write fails and leaves nothing; the writes before and after it commit, the one after taking the
        number it left free, and listeners hear of each once."""
        backend = FailingWrite(str(tmp_path / "logd.sqlite3"))
        store = Store(backend)
        told: list[int] = []
        store.listen(lambda record: told.append(record.number))
        session = store.session()
        outcomes = store.together([lambda: session.patch([{"set": "a", "value": 1}]),
                                   lambda: session.patch([{"set": "b", "value": 2}]),
                                   lambda: session.patch([{"set": "c", "value": 3}])])
        assert [outcome.value for outcome in outcomes] == [Written(1), None, Written(2)]
        assert isinstance(outcomes[1].error, StorageError)
        assert store.session().get().value == {"a": 1, "c": 3}
        assert [record.ops for record in backend.commits(1, (0,))] == [({"set": "a", "value": 1},),
                                                                      ({"set": "c", "value": 3},)]
        assert told == [1, 2]
        store.close()

    def test_listeners_told_after_the_group_in_order(self, store):
        """No listener hears of a write before the whole group is durable; then of each commit, in order."""
        told: list[int] = []
        store.listen(lambda record: told.append(record.number))
        session = store.session()
        heard_meanwhile: list[list[int]] = []

        def second() -> Written:
            heard_meanwhile.append(list(told))
            return session.patch([{"set": "b", "value": 2}])

        store.together([lambda: session.patch([{"set": "a", "value": 1}]), second])
        assert told == [1, 2]
        if isinstance(store.backend, SqliteBackend):  # PostgreSQL commits each alone, and tells at the end
            assert heard_meanwhile == [[]]

    def test_not_visible_before_the_group_commits(self, tmp_path):
        """A reader's snapshot taken between two writes of a group sees none of it: one transaction."""
        store = Store.open(str(tmp_path / "logd.sqlite3"))
        session = store.session()
        seen: list[int] = []

        def look() -> None:
            with store.backend.reading() as reads:
                seen.append(reads.head()[0])

        store.together([lambda: session.patch([{"set": "a", "value": 1}]), look,
                        lambda: session.patch([{"set": "a", "value": 2}])])
        with store.backend.reading() as reads:
            assert reads.head()[0] == 2
        assert seen == [0]
        store.close()

    def test_a_lost_group_runs_again_one_by_one(self, tmp_path):
        """When the group's transaction is lost (SQLite rolls it back on a full disk), its writes run again
        alone: the small one commits, the ones that do not fit fail, and every write answered as committed is
        stored, numbered without gaps."""
        store = Store.open(str(tmp_path / "logd.sqlite3"))
        session = store.session()
        session.patch([{"set": "small", "value": 1}])
        pages = store.backend._db.execute("PRAGMA page_count").fetchone()[0]
        store.backend._db.execute(f"PRAGMA max_page_count = {pages + 2}")
        big = "x" * 20_000
        outcomes = store.together([lambda: session.patch([{"set": "a", "value": 1}])] +
                                  [lambda n=n: session.patch([{"set": f"big{n}", "value": big}]) for n in range(8)])
        committed = [outcome.value.commit for outcome in outcomes if outcome.error is None]
        assert outcomes[0].value == Written(2)
        assert any(outcome.error is not None for outcome in outcomes)
        assert all(isinstance(outcome.error, StorageError) for outcome in outcomes if outcome.error is not None)
        # Whatever SQLite kept, every write answered as committed is there, numbered on from 2 without gaps.
        assert committed == list(range(2, 2 + len(committed)))
        assert store.head == 1 + len(committed)
        store.close()


class TestWriter:
    def test_queued_patches_share_one_transaction(self, tmp_path):
        """Patches queued while the writer is busy commit in one transaction: consecutive numbers, the failing
        one alone answered with its error, and each future resolved only then."""
        backend = CountingGroups(str(tmp_path / "logd.sqlite3"))
        store = Store(backend)
        writer = Writer(store)
        release = threading.Event()
        busy = writer.submit(release.wait, 30)
        futures: list[Future[Written]] = [writer.submit_write(write) for write in patches(store.session())]
        assert not any(future.done() for future in futures)
        release.set()
        assert busy.result(30)
        assert [future.result(30) for future in (futures[0], futures[1], futures[3])] == \
            [Written(1), Written(2), Written(3)]
        with pytest.raises(PreconditionFailed):
            futures[2].result(30)
        assert backend.groups == 1
        writer.shutdown()
        store.close()

    def test_plain_work_keeps_its_place(self, tmp_path):
        """Work submitted alone runs between the writes before and after it, which do not group across it."""
        backend = CountingGroups(str(tmp_path / "logd.sqlite3"))
        store = Store(backend)
        session = store.session()
        writer = Writer(store)
        release = threading.Event()
        writer.submit(release.wait, 30)
        first = writer.submit_write(session.patch, [{"set": "a", "value": 1}])
        middle = writer.submit(lambda: session.get("a").value)
        last = writer.submit_write(session.patch, [{"set": "a", "value": 2}])
        release.set()
        assert (first.result(30), middle.result(30), last.result(30)) == (Written(1), 1, Written(2))
        assert backend.groups == 2
        writer.shutdown()
        store.close()

    def test_shutdown_finishes_what_was_queued(self, tmp_path):
        """shutdown() lets the queued writes finish, then refuses more."""
        store = Store.open(str(tmp_path / "logd.sqlite3"))
        writer = Writer(store)
        futures = [writer.submit_write(store.session().patch, [{"set": f"k{n}", "value": n}]) for n in range(5)]
        writer.shutdown(wait=True)
        assert [future.result(0) for future in futures] == [Written(n) for n in range(1, 6)]
        with pytest.raises(RuntimeError, match="after it shut down"):
            writer.submit(print)
        store.close()

    def test_shutdown_cancels_what_has_not_started(self, tmp_path):
        """shutdown(cancel_futures=True) lets the running work finish and cancels the rest, the plain work held
        back behind a batch of writes too; none of it runs."""
        store = Store.open(str(tmp_path / "logd.sqlite3"))
        writer = Writer(store)
        running, release, ran = threading.Event(), threading.Event(), []
        busy = writer.submit(lambda: (running.set(), release.wait(30)))
        assert running.wait(30)
        queued = [writer.submit_write(ran.append, "write"), writer.submit(ran.append, "plain"),
                  writer.submit_write(ran.append, "later")]
        writer.shutdown(wait=False, cancel_futures=True)
        release.set()
        writer.shutdown(wait=True)
        assert busy.result(0) == (None, True)
        assert [future.cancelled() for future in queued] == [True, True, True]
        assert ran == []
        store.close()

    def test_group_writes_must_be_positive(self, tmp_path):
        """A bound below one is refused, naming what arrived."""
        store = Store.open(str(tmp_path / "logd.sqlite3"))
        with pytest.raises(ValueError, match=r"group_writes must be an int >= 1 \(got 0\)"):
            Writer(store, group_writes=0)
        store.close()


class TestServed:
    def test_racing_patches_commit_gapless_and_only_the_failing_one_fails(self, store):
        """Twenty clients patch at once over the stream socket, one with a precondition that cannot hold: it
        alone is refused; the others commit as 1 to 19, each client told its own number."""
        with ServerThread(store, listen=("127.0.0.1", 0), limits=LIMITS) as served:
            answers: dict[int, object] = {}
            start = threading.Barrier(20)

            def work(number: int) -> None:
                with Client(served.address) as logd:
                    start.wait(30)
                    precondition = {"missing": 1} if number == 7 else None
                    try:
                        answers[number] = logd.patch([{"set": f"jobs.j{number}", "value": number}],
                                                     precondition=precondition).commit
                    except PreconditionFailed as exc:
                        answers[number] = exc

            threads = [threading.Thread(target=work, args=(n,)) for n in range(20)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(60)
            assert isinstance(answers.pop(7), PreconditionFailed)
            assert sorted(answers.values()) == list(range(1, 20))
            log = {record.number: record.ops for record in store.backend.commits(1, (0,))}
            assert sorted(log) == list(range(1, 20))
            for number, commit in answers.items():  # each told the number its own patch got
                assert log[commit] == ({"set": f"jobs.j{number}", "value": number},)
