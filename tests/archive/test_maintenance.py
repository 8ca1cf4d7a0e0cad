"""retain.archive.maintenance: the plans (pure), and maintenance on real stores: compaction, expiry, the log."""

from __future__ import annotations

import os
import threading
import time
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from retain.archive import (
    Archive,
    ArchivedFile,
    MaintenanceSettings,
    StreamId,
    fold,
    maintain,
    plan_compaction,
    plan_expiry,
    preview_maintenance,
    read,
    vacuum_replaced,
)
from retain.errors import ArchiveConflict, ArchiveNeedsMigration, InvalidArchive, InvalidWindow
from tests.helpers.archive import archived_ids, table_of
from tests.helpers.waiting import wait_for

#: maintenance as a test needs it: the log and removed files kept a moment only
QUICK = MaintenanceSettings(every=None, log_retention=timedelta(seconds=1), vacuum_retention=timedelta(seconds=1))


def files_of(counts: list[int], start_ms: int = 1) -> list[ArchivedFile]:
    """Consecutive files holding ``counts`` entries, one a millisecond."""
    files, ms = [], start_ms
    for count in counts:
        files.append(ArchivedFile(f"f{ms}", StreamId(ms, 0), StreamId(ms + count - 1, 0), count, 100))
        ms += count
    return files


def ids_of(entries) -> list[bytes]:
    return [entry_id for entry_id, _ in entries]


def fold_in_steps(conn, stream, archive, append, steps: int, size: int) -> list[bytes]:
    """``steps`` folds of ``size`` new entries each: as many small files."""
    appended: list[bytes] = []
    for step in range(steps):
        appended += append(stream, size, start=step * size)
        fold(conn, stream, archive)
    return appended


class TestPlanCompaction:
    @pytest.mark.parametrize(("counts", "target", "runs"), [
        ([10, 10, 10], 100, [[0, 1, 2]]),
        ([10, 10, 10], 25, [[0, 1]]),
        ([10], 100, []),
        ([60, 60, 60, 60], 200, [[0, 1, 2]]),
        ([60, 60], 120, []),
        ([10, 10, 10, 990, 5, 5], 1000, [[0, 1, 2], [4, 5]]),
        ([1000, 10, 10, 1000, 10], 1000, [[1, 2]]),
        ([], 10, []),
    ])
    def test_table(self, counts, target, runs):
        """Runs of two or more consecutive files, each run at most the target; half-full files are left alone."""
        files = files_of(counts)
        assert [[files.index(file) for file in run] for run in plan_compaction(files, target)] == runs

    @given(st.lists(st.integers(1, 50), max_size=30), st.integers(1, 120))
    def test_properties(self, counts, target):
        """Every run is consecutive, at least two small files, at most the target; no file is in two runs; no
        two neighbouring small files are left apart when together they fit."""
        files = files_of(counts)
        runs = plan_compaction(files, target)
        seen = [file for run in runs for file in run]
        assert len(seen) == len(set(seen))
        for run in runs:
            assert len(run) >= 2 and sum(file.count for file in run) <= target
            assert all(file.count * 2 < target for file in run)
            first = files.index(run[0])
            assert list(run) == files[first:first + len(run)]


class TestPlanExpiry:
    def test_whole_and_straddling(self):
        """Files wholly before the cutoff go; the one that holds it is the straddler; later ones stay."""
        files = files_of([10, 10, 10])  # ms 1-10, 11-20, 21-30
        assert plan_expiry(files, 15) == ((files[0],), files[1])
        assert plan_expiry(files, 11) == ((files[0],), None)
        assert plan_expiry(files, 1) == ((), None)
        assert plan_expiry(files, 100) == (tuple(files), None)


class TestSettings:
    @pytest.mark.parametrize(("options", "message"), [
        ({"every": timedelta(0)}, "every"), ({"log_retention": 5}, "log_retention"),
        ({"target_file_entries": 0}, "target_file_entries"), ({"max_age": timedelta(seconds=-1)}, "max_age"),
        ({"max_age_by": {"k": "7d"}}, "max_age_by"),
    ])
    def test_refusals(self, options, message):
        """Settings that cannot hold are InvalidArchive naming the setting, before any I/O."""
        with pytest.raises(InvalidArchive, match=message):
            MaintenanceSettings(**options)

    def test_per_stream_age(self):
        """A stream's own max_age wins over the archive's."""
        settings = MaintenanceSettings(max_age=timedelta(days=400), max_age_by={"k": timedelta(days=7)})
        assert (settings.max_age_of("k"), settings.max_age_of("other")) == (timedelta(days=7), timedelta(days=400))


class TestCompaction:
    def test_small_files_become_one_and_reads_stay_whole(self, redis_conn, archive, stream, append):
        """Many small files merge into one sorted file; the merge-read and the table's rows are unchanged."""
        appended = fold_in_steps(redis_conn, stream, archive, append, steps=12, size=25)
        assert len(archive.state(stream).files) == 12
        report = maintain(archive, QUICK, now=datetime.now(UTC))
        (done,) = report.streams
        assert (done.compacted, done.compacted_into) == (12, 1)
        state = archive.state(stream)
        assert len(state.files) == 1 and state.entries == 300 and state.rewrites == 1
        assert state.files[0].first == StreamId.parse(appended[0]) and state.files[0].last == state.watermark
        assert ids_of(read(redis_conn, stream, archive, count=40)) == appended
        assert archived_ids(archive, stream) == [tuple(map(int, entry_id.split(b"-"))) for entry_id in appended]

    def test_folds_go_on_after_it(self, redis_conn, archive, stream, append):
        """A fold after a compaction continues from W: the merge-read stays whole."""
        appended = fold_in_steps(redis_conn, stream, archive, append, steps=4, size=10)
        maintain(archive, QUICK, now=datetime.now(UTC))
        appended += append(stream, 10, start=40)
        assert fold(redis_conn, stream, archive).entries == 10
        assert ids_of(read(redis_conn, stream, archive)) == appended

    def test_two_maintainers_never_both_rewrite(self, redis_conn, tmp_path, stream, append):
        """INV-FENCE for rewrites: two maintainers compacting the same files at once: one commits, the other
        is left out (a conflict, not a second copy of the rows)."""
        url = str(tmp_path / "shared")
        appended = fold_in_steps(redis_conn, stream, Archive(url), append, steps=6, size=10)
        maintainers = [Archive(url), Archive(url)]
        for maintainer in maintainers:
            maintainer.state(stream)  # both read the same snapshot first
        barrier = threading.Barrier(2)
        reports = []

        def run(maintainer) -> None:
            barrier.wait()
            reports.append(maintain(maintainer, QUICK, now=datetime.now(UTC)))

        threads = [threading.Thread(target=run, args=(maintainer,)) for maintainer in maintainers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        outcomes = sorted("conflict" if report.streams[0].conflict else "compacted" for report in reports)
        assert outcomes in (["compacted", "conflict"], ["compacted", "compacted"])
        reader = Archive(url)
        assert reader.state(stream).entries == 60 and ids_of(read(redis_conn, stream, reader)) == appended
        assert len(archived_ids(reader, stream)) == 60  # no row twice

    def test_a_rewrite_from_a_stale_count_is_refused(self, redis_conn, archive, stream, append):
        """The rewrite fence itself: a rewrite planned before another one committed is ArchiveConflict."""
        from retain.archive.table import Rewrite

        fold_in_steps(redis_conn, stream, archive, append, steps=3, size=5)
        before = archive.state(stream)
        maintain(archive, QUICK, now=datetime.now(UTC))
        with pytest.raises(ArchiveConflict, match="rewritten by another maintainer"):
            archive.commit([Rewrite(stream.key, before.rewrites, before.files[:2])], operation="compact")


class TestExpiry:
    def test_old_rows_leave_the_table_and_the_read(self, redis_conn, archive, stream):
        """Rows older than max_age go: whole files removed, the straddling file rewritten; the merge-read of
        the expired range returns nothing for it; ls says how far expiry reached."""
        now = datetime(2026, 9, 12, tzinfo=UTC)
        day = 86_400_000
        base = int(now.timestamp() * 1000) - 10 * day
        for step in range(10):  # one file a day, 10 entries each, 10 days ago to yesterday
            for index in range(10):
                redis_conn.xadd(stream.key, {"d": str(step)}, id=f"{base + step * day + index * 3_600_000}-0")
            fold(redis_conn, stream, archive)
        redis_conn.delete(stream.key)
        cutoff_ms = int((now - timedelta(days=3, hours=19)).timestamp() * 1000)
        settings = MaintenanceSettings(every=None, max_age=timedelta(days=3, hours=19),
                                       log_retention=timedelta(seconds=1), vacuum_retention=timedelta(seconds=1))
        preview = preview_maintenance(archive, stream.key, settings, now=now)
        report = maintain(archive, settings, now=now)
        (done,) = report.streams
        assert (done.expired_before, done.expired_files) == (cutoff_ms, 6)
        assert done.expired == preview.expired == 60 + 5  # six whole days, and half of the seventh
        state = archive.state(stream)
        assert state.expired_before == cutoff_ms and state.entries == 100 - 65
        kept = ids_of(read(redis_conn, stream, archive))
        assert len(kept) == 35 and all(int(entry_id.split(b"-")[0]) >= cutoff_ms for entry_id in kept)
        assert list(read(redis_conn, stream, archive, end=str(cutoff_ms - 1))) == []
        assert state.watermark == StreamId(base + 9 * day + 9 * 3_600_000, 0)  # W stays: expiry is no fold

    def test_a_stream_of_its_own(self, redis_conn, archive, stream):
        """max_age_by gives one stream its age; the others keep the archive's (here: none)."""
        for ms in (1_000, 2_000):
            redis_conn.xadd(stream.key, {"a": "1"}, id=f"{ms}-0")
        fold(redis_conn, stream, archive)
        now = datetime.fromtimestamp(10, UTC)
        others = maintain(archive, QUICK, now=now)
        assert others.streams[0].expired == 0
        own = MaintenanceSettings(every=None, max_age_by={stream.key: timedelta(seconds=8, milliseconds=500)},
                                  log_retention=timedelta(seconds=1), vacuum_retention=timedelta(seconds=1))
        assert maintain(archive, own, now=now).streams[0].expired == 1
        assert ids_of(read(redis_conn, stream, archive)) == [b"2000-0"]


class TestTheLog:
    def test_checkpoint_cleanup_and_vacuum_keep_it_small(self, redis_conn, tmp_path, stream, append):
        """After maintenance and the retentions, the log keeps a checkpoint and the commits since; files
        compacted away (and older than the orphan hour) are gone from the store; the live ones read whole."""
        archive = Archive(str(tmp_path / "log"))
        appended = fold_in_steps(redis_conn, stream, archive, append, steps=30, size=5)
        objects, _ = archive.log_size()
        hours_ago = time.time() - 2 * 3600  # files an hour old or more: past the orphan retention
        small = {path.name for path in (tmp_path / "log").rglob("*.parquet") if "_delta_log" not in path.parts}
        for path in (tmp_path / "log").rglob("*.parquet"):
            os.utime(path, (hours_ago, hours_ago))
        maintain(archive, QUICK, now=datetime.now(UTC))
        reports = []

        def compacted_files_gone() -> bool:
            # Beats go on (a fold, then maintenance) until the retentions (one second) have passed and the
            # files compacted away are vacuumed.
            appended.extend(fold_in_steps(redis_conn, stream, archive, append, steps=1, size=5))
            reports.append(maintain(archive, QUICK, now=datetime.now(UTC)))
            return not stored() & small

        def stored() -> set[str]:
            return {path.name for path in (tmp_path / "log").rglob("*.parquet") if "_delta_log" not in path.parts}

        wait_for(compacted_files_gone, "the files compacted away to be vacuumed", interval=0.2)
        assert sum(report.vacuumed for report in reports) >= len(small)
        # The log lost the commits older than its retention: far fewer objects than commits were made.
        assert not (tmp_path / "log" / "_delta_log" / "00000000000000000001.json").exists()
        assert reports[-1].log_objects < archive.version and objects > 30
        assert {file.path.rsplit("/", 1)[-1] for file in archive.state(stream).files} <= stored()
        assert ids_of(read(redis_conn, stream, Archive(str(tmp_path / "log")))) == appended
        assert table_of(archive).version() == archive.version

    def test_orphans_are_kept_an_hour(self, redis_conn, archive, stream, append):
        """A file no commit lists (a fold that crashed or lost its race) is not vacuumed while young:
        a fold writing it now is never robbed."""
        from retain.archive.files import FileWriter

        fold_in_steps(redis_conn, stream, archive, append, steps=2, size=5)
        writer = FileWriter(stream.key)
        writer.add([(b"999999999999-0", {b"a": b"1"})])
        orphan = archive.put_file(stream, writer.finish())
        maintain(archive, QUICK, now=datetime.now(UTC))
        assert archive.location.exists(orphan.path)

    def test_a_read_that_lost_its_files_lists_them_again(self, redis_conn, tmp_path, stream, append):
        """A merge-read whose files were compacted and vacuumed under it reads on from the compacted file:
        every entry once, in order."""
        import obstore

        archive = Archive(str(tmp_path / "slow"))
        appended = fold_in_steps(redis_conn, stream, archive, append, steps=5, size=3000)
        reader = read(redis_conn, stream, archive, count=100)
        got = [next(reader)[0] for _ in range(10)]  # mid-way through the first file
        old = archive.state(stream).files
        maintain(archive, QUICK, now=datetime.now(UTC))
        for file in old:  # what a vacuum does once the retention has passed
            obstore.delete(archive.store, file.path)
        got += ids_of(reader)
        assert got == appended

    def test_a_format_one_archive_is_not_maintained(self, tmp_path):
        """Maintenance refuses an archive that is not yet a table."""
        from tests.helpers.legacy import write_legacy

        url = str(tmp_path / "old")
        write_legacy(url, {"emq:{g}:stream:s": [[(b"1-0", {b"a": b"1"})]]})
        with pytest.raises(ArchiveNeedsMigration, match="retain archive migrate"):
            maintain(Archive(url), QUICK, now=datetime.now(UTC))

    def test_naive_now_refused(self, archive):
        """Expiry counts ages from ``now``: a naive one is refused."""
        with pytest.raises(InvalidWindow):
            maintain(archive, QUICK, now=datetime(2026, 9, 12))


class TestVacuumOfReplacedFiles:
    def test_replaced_files_leave_the_store_once_the_retention_passed(self, redis_conn, tmp_path, stream, append):
        """The files a compaction replaced are removed from disk by the vacuum once vacuum_retention has passed
        (not the orphans' hour later); a merge-read stays exact before and after."""
        archive = Archive(str(tmp_path / "replaced"))
        appended = fold_in_steps(redis_conn, stream, archive, append, steps=6, size=20)
        before = {file.path for file in archive.state(stream).files}
        assert maintain(archive, QUICK, now=datetime.now(UTC)).replaced
        assert ids_of(read(redis_conn, stream, archive)) == appended
        assert all(archive.location.exists(path) for path in before)  # younger than the retention: kept

        def replaced_gone() -> bool:
            vacuum_replaced(archive)
            return not any(archive.location.exists(path) for path in before)

        wait_for(replaced_gone, "the replaced files to be vacuumed", interval=0.2)
        assert ids_of(read(redis_conn, stream, Archive(str(tmp_path / "replaced")))) == appended
        assert [file.count for file in archive.state(stream).files] == [120]
