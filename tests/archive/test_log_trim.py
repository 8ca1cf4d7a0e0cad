"""retain.archive.log_trim: the log bounded by commits as well as by time; the plan (pure) and a cleanup on real stores."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from retain.archive import Archive, fold, read
from retain.archive.log_trim import LOG_TRIM_AGE, plan_log_trim
from retain.clock import utc_now
from retain.errors import InvalidInput
from tests.helpers.archive import SHARED_STORES, open_archive

WRITTEN = datetime(2026, 1, 1, tzinfo=UTC)


def log_listing(commits: int, checkpoints: list[int], written: datetime = WRITTEN) -> list[dict[str, object]]:
    """A listing of ``_delta_log/`` as the store gives it: commits 0..commits-1, the checkpoints, _last_checkpoint."""
    names = [f"{version:020d}.json" for version in range(commits)]
    names += [f"{version:020d}.checkpoint.parquet" for version in checkpoints] + ["_last_checkpoint"]
    return [{"path": f"_delta_log/{name}", "last_modified": written, "size": 10} for name in names]


class TestPlanLogTrim:
    def test_the_log_starts_at_the_newest_checkpoint_that_keep_commits_follow(self):
        """Everything before the newest checkpoint at latest - keep or earlier goes, oldest first; it stays."""
        removed = plan_log_trim(log_listing(50, [9, 19, 29, 39, 49]), 49, 20, WRITTEN + timedelta(seconds=1))
        assert removed[0] == "_delta_log/00000000000000000000.json"
        assert removed[-1] == "_delta_log/00000000000000000028.json"
        assert "_delta_log/00000000000000000019.checkpoint.parquet" in removed
        assert not any(name.startswith("_delta_log/000000000000000000" + "29") for name in removed)
        assert "_delta_log/_last_checkpoint" not in removed and len(removed) == 29 + 2

    def test_nothing_goes_without_a_checkpoint_old_enough(self):
        """A reader starts from a checkpoint: with none at latest - keep or earlier, the log stays whole."""
        assert plan_log_trim(log_listing(50, [9, 19, 29, 39, 49]), 49, 45, WRITTEN + timedelta(seconds=1)) == ()

    def test_objects_written_since_the_cutoff_stay(self):
        """An object leaves by count only once written before ``written_before``: the checkpoint before them is
        the log's start then, or nothing goes."""
        young = log_listing(50, [9, 19, 29, 39, 49])
        for item in young:
            if str(item["path"]).split("/")[-1][:20] >= f"{20:020d}":
                item["last_modified"] = WRITTEN + timedelta(minutes=1)
        removed = plan_log_trim(young, 49, 20, WRITTEN + timedelta(seconds=1))
        assert removed[-1] == "_delta_log/00000000000000000018.json" and len(removed) == 19 + 1
        assert plan_log_trim(log_listing(50, [9, 19, 29]), 49, 20, WRITTEN) == ()


@pytest.fixture(params=SHARED_STORES)
def shared(request, tmp_path) -> tuple[Archive, str, dict[str, object]]:
    seaweed = request.getfixturevalue("seaweed_server") if request.param == "s3" else None
    return open_archive(request.param, tmp_path, seaweed)


class TestCleanLog:
    @staticmethod
    def folded(conn, stream, archive: Archive, folds: int) -> list[bytes]:
        appended = []
        for index in range(folds):
            appended.append(conn.xadd(stream.key, {"i": str(index)}))
            fold(conn, stream, archive)
        return appended

    @staticmethod
    def log_versions(archive: Archive) -> list[int]:
        names = [str(item["path"]).rsplit("/", 1)[-1] for item in archive.location.listing("_delta_log/")]
        return sorted(int(name[:20]) for name in names if name.endswith(".json"))

    def test_the_log_keeps_the_newest_commits_and_reads_whole(self, redis_conn, stream, shared):
        """A cleanup whose ``now`` is past LOG_TRIM_AGE leaves the commits from the newest checkpoint that
        keep_commits follow, within the log retention; the table opens, reads and folds as before."""
        archive, url, options = shared
        appended = self.folded(redis_conn, stream, archive, 40)
        assert self.log_versions(archive)[0] == 0  # within the 5-minute log retention: delta-rs removes none
        archive.clean_log(utc_now() + LOG_TRIM_AGE * 2, keep_commits=15)
        versions = self.log_versions(archive)
        assert versions[0] > 0 and archive.version - versions[0] >= 15 and archive.version - versions[0] < 15 + 10
        fresh = Archive(url, **options)
        assert [entry_id for entry_id, _ in read(redis_conn, stream, fresh)] == appended
        appended += self.folded(redis_conn, stream, fresh, 1)
        assert [entry_id for entry_id, _ in read(redis_conn, stream, archive)] == appended
        with pytest.raises(InvalidInput, match="as of 0"):
            fresh.dataset(as_of=0)

    def test_commits_younger_than_the_trim_age_stay(self, redis_conn, stream, shared):
        """A snapshot trusts a missing next commit for half of LOG_TRIM_AGE: no commit leaves by count sooner."""
        archive = shared[0]
        started = utc_now()  # every object is written after this: a cleanup at it finds them all young,
        self.folded(redis_conn, stream, archive, 40)  # however long the folds take on a busy machine
        before = self.log_versions(archive)
        archive.clean_log(started, keep_commits=15)
        assert self.log_versions(archive) == before
