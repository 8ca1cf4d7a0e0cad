"""retain.retention.archive_job: a beat's archive work on a thread of its own, one job at a time, given up at its
deadline; what a job came to, merged with a later one's."""

from __future__ import annotations

import threading
import uuid
from datetime import UTC, datetime

from retain.archive import Archive
from retain.errors import ArchiveTimeout, ServerError
from retain.retention import StreamPolicy
from retain.retention.archive_job import ArchivedBeat, ArchiveJob
from retain.streams import StreamRef
from retain.windows import MaxLen
from tests.helpers.streams import append
from tests.helpers.waiting import wait_for

NOW = datetime(2026, 9, 12, tzinfo=UTC)


def entry() -> StreamPolicy:
    return StreamPolicy(StreamRef("job", uuid.uuid4().hex[:8]), MaxLen(5, approx=False), archive=True)


class Held(Archive):
    """An archive whose commits wait for ``go``."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.go = threading.Event()

    def commit(self, changes, **options):
        assert self.go.wait(30)
        return super().commit(changes, **options)


class TestJob:
    def test_folds_and_trims_each_stream(self, redis_conn, tmp_path):
        """A job folds every stream in one commit, then trims it past W; its outcome says so per stream."""
        one, two = entry(), entry()
        for item in (one, two):
            append(redis_conn, item.key, 20)
        job = ArchiveJob(Archive(str(tmp_path / "a")), deadline=10, fold_min_entries=1, measure_lengths=True)
        done = job.start(redis_conn, NOW, [one, two]).result(30)
        assert done.folded_by == {one.key: 15, two.key: 15} and done.removed_by == {one.key: 15, two.key: 15}
        assert done.lengths == {one.key: 5, two.key: 5} and not done.failures
        assert job.finished() == done and job.finished() is None

    def test_one_job_at_a_time_then_given_up(self, redis_conn, tmp_path):
        """While a job runs, starting another reports its streams as still archiving (no second job); once it is
        past its deadline it is given up: its streams fail with ArchiveTimeout and it starts no further step (the
        commit it was in lands: a fold without its trim is safe; it never trims)."""
        item = entry()
        append(redis_conn, item.key, 20)
        archive = Held(str(tmp_path / "a"))
        job = ArchiveJob(archive, deadline=0.5, fold_min_entries=1, measure_lengths=False)
        first = job.start(redis_conn, NOW, [item])
        again = job.start(redis_conn, NOW, [item])
        assert isinstance(again, ArchivedBeat) and again.archiving == {item.key} and not again.failures
        wait_for(job.overdue, "the job to pass its deadline")
        late = job.start(redis_conn, NOW, [item])
        assert isinstance(late, ArchivedBeat) and isinstance(late.failures[item.key], ArchiveTimeout)
        archive.go.set()
        first.result(30)
        assert redis_conn.xlen(item.key) == 20, "the job given up on trimmed nothing"

    def test_an_entry_with_nothing_to_do(self, redis_conn, tmp_path):
        """No entries: no job, an empty outcome at once."""
        job = ArchiveJob(Archive(str(tmp_path / "a")), deadline=10, fold_min_entries=1, measure_lengths=False)
        assert job.start(redis_conn, NOW, []) == ArchivedBeat() and not job.busy


class TestThen:
    def test_a_later_outcome_follows_an_earlier_one(self):
        """Counts add up; the later W, length and failure win; an earlier failure of a stream the later job
        folded is gone; the later job's archiving stands."""
        earlier = ArchivedBeat(folded_by={"a": 3, "b": 2}, removed_by={"a": 3, "b": 2}, watermarks={"a": None},
                               failures={"c": ServerError("x", server_message="x")}, fold_failures={"c": ServerError("x", server_message="x")})
        later = ArchivedBeat(folded_by={"a": 4, "c": 1}, removed_by={"a": 4, "c": 1}, watermarks={"a": None},
                             failures={"b": ServerError("y", server_message="y")}, archiving={"d"})
        merged = earlier.then(later)
        assert merged.folded_by == {"a": 7, "b": 2, "c": 1}
        assert merged.removed_by == {"a": 7, "c": 1}
        assert set(merged.failures) == {"b"} and merged.fold_failures == {}
        assert merged.archiving == {"d"}
