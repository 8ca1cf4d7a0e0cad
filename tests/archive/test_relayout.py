"""retain.archive.relayout and ``retain archive migrate`` on a format-2 table: rewritten as format 3 in place, in
one commit, W, ordinals and fences carried over, the old files vacuumed; daemons folding meanwhile lose nothing.

Format 2 was partitioned by the stream's key, so Polars and DuckDB's hive reading saw ``emq!3A!7Bshop…`` for a
stream's name (tests/archive/test_readers.py reads format 3 with each of them).
"""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime, timedelta

import pytest
from click.testing import CliRunner

from retain.archive import Archive, fold, read
from retain.archive.files import FileWriter
from retain.archive.fold import FoldProgress
from retain.archive.layout import stream_digest
from retain.archive.maintenance import MaintenanceSettings, maintain
from retain.archive.relayout import relayout
from retain.archive.table import Advance, Fence
from retain.cli import main
from retain.errors import ArchiveConflict, ArchiveFenced
from retain.ids import StreamId
from retain.streams import RawKey
from tests.helpers.archive import format_two, open_archive, table_of
from tests.helpers.waiting import wait_for

#: keys a path must escape: Redis's own layout, a slash, a percent, a bang, a non-ASCII letter
KEYS = ["emq:{shop}:stream:orders", "tenant/a%2Fb!x", "événements:{é}"]
QUICK = MaintenanceSettings(every=None, log_retention=timedelta(seconds=1), vacuum_retention=timedelta(seconds=1))


@pytest.fixture(params=["local", "s3"])
def opened(request, tmp_path) -> tuple[Archive, str, dict[str, object]]:
    """A format-2 table on the store kind of the test, with the URL and options that open it again."""
    seaweed = request.getfixturevalue("seaweed_server") if request.param == "s3" else None
    archive, url, options = open_archive(request.param, tmp_path, seaweed)
    return format_two(archive), url, options


def filled(redis_conn, archive: Archive) -> dict[str, list[bytes]]:
    """Each key: 300 entries, two folds (one file, then two), and on the first key one more file of 20 entries
    committed with a fence token: ten files, 620 entries."""
    ids = {}
    for key in KEYS:
        redis_conn.delete(key)
        pipe = redis_conn.pipeline(transaction=False)
        for index in range(300):
            pipe.xadd(key, {"i": str(index), "raw": bytes([index % 256, 0xFF])})
        ids[key] = pipe.execute()
        fold(redis_conn, RawKey(key), archive, ids[key][99].decode())
        assert fold(redis_conn, RawKey(key), archive, ids[key][199].decode(), segment_entries=50).files == 2
    writer = FileWriter(KEYS[0], table_format=archive.format)
    writer.add(redis_conn.xrange(KEYS[0], ids[KEYS[0]][200], ids[KEYS[0]][219]))
    stored = archive.put_file(RawKey(KEYS[0]), writer.finish())
    archive.commit([Advance(KEYS[0], archive.watermark(RawKey(KEYS[0])), stored.last, (stored,),
                            fence=Fence("retain-lease/g/1/0", 7))])
    return ids


def snapshot(redis_conn, archive: Archive) -> dict[str, object]:
    return {key: (list(read(redis_conn, RawKey(key), archive)), archive.positions([RawKey(key)])[key],
                  archive.state(RawKey(key)).entries) for key in KEYS}


def test_rewritten_in_one_commit(redis_conn, opened):
    """Three streams with keys a path must escape: one commit rewrites every file as format 3; the merge-read,
    W, its ordinal and the rows are what they were; the fence still refuses a stale token; folds go on."""
    old_table, url, options = opened
    ids = filled(redis_conn, old_table)
    before, version = snapshot(redis_conn, old_table), old_table.version
    report = relayout(old_table)
    assert (report.before, report.streams, report.files, report.entries, report.version) == (2, 3, 10, 620,
                                                                                              version + 1)
    again = Archive(url, **options)
    assert again.format == 3 and again.version == version + 1
    assert snapshot(redis_conn, again) == before
    for key in KEYS:
        files = again.state(RawKey(key)).files
        assert files and all(file.format == 3 and file.path.startswith(f"stream_digest={stream_digest(key)}/")
                             for file in files)
    with pytest.raises(ArchiveConflict, match="no longer"):  # a stale W: the in-process fence
        again.commit([Advance(KEYS[2], StreamId.parse(ids[KEYS[2]][99]), StreamId.parse(ids[KEYS[2]][229]), ())])
    with pytest.raises(ArchiveFenced):
        again.commit([Advance(KEYS[0], again.watermark(RawKey(KEYS[0])), StreamId.parse(ids[KEYS[0]][229]), (),
                              fence=Fence("retain-lease/g/1/0", 6))])
    assert fold(redis_conn, RawKey(KEYS[1]), again).entries == 100
    assert [entry for entry, _ in read(redis_conn, RawKey(KEYS[1]), again)] == ids[KEYS[1]]
    assert relayout(again).version == -1, "a format-3 table is left as it is"


def test_the_old_files_go_with_the_vacuum(redis_conn, tmp_path):
    """Readers of the old snapshot keep its files until maintenance's vacuum, once its retention has passed."""
    archive = format_two(open_archive("local", tmp_path, None)[0])
    written = filled(redis_conn, archive)
    root = archive.location.local_root
    assert root is not None
    old = {path for path in root.rglob("*.parquet") if path.parts[-2].startswith("stream=")}
    relayout(archive)
    assert all(path.exists() for path in old), "the old snapshot still reads"
    assert len(table_of(archive, archive.version - 1).file_uris()) == 10
    hours_ago = time.time() - 2 * 3600  # past the orphan hour too: only the retention after removal matters
    for path in root.rglob("*.parquet"):
        os.utime(path, (hours_ago, hours_ago))

    def vacuumed() -> bool:
        # Beats go on, as a daemon's would: a tombstone leaves the log with the first checkpoint after its
        # retention, and its file goes with the vacuum after that.
        written[KEYS[1]].append(redis_conn.xadd(KEYS[1], {"i": "more"}))
        fold(redis_conn, RawKey(KEYS[1]), archive)
        maintain(archive, QUICK, now=datetime.now(UTC))
        return not any(path.exists() for path in old)

    wait_for(vacuumed, "the format-2 files to be vacuumed", interval=0.3)
    assert all(read_ids(redis_conn, archive, key) == ids for key, ids in written.items())


def read_ids(redis_conn, archive: Archive, key: str) -> list[bytes]:
    return [entry for entry, _ in read(redis_conn, RawKey(key), archive)]


def test_a_fold_that_commits_meanwhile_is_rewritten_too(redis_conn, opened):
    """A daemon's fold commits a format-2 file after the rewrite listed the files: the rewrite's commit finds
    its version taken, rewrites the new file too and commits at the next; nothing is lost."""
    old_table, url, options = opened
    ids = filled(redis_conn, old_table)
    rival = Archive(url, **options)
    folded: list[int] = []

    def fold_once(key: str, file) -> None:
        if not folded:
            folded.append(fold(redis_conn, RawKey(KEYS[2]), rival, ids[KEYS[2]][249].decode()).entries)

    report = relayout(old_table, progress=fold_once)
    assert folded == [50] and report.races == 1 and report.files == 11
    again = Archive(url, **options)
    assert again.watermark(RawKey(KEYS[2])) == StreamId.parse(ids[KEYS[2]][249])
    assert all(file.format == 3 for key in KEYS for file in again.state(RawKey(key)).files)
    assert read_ids(redis_conn, again, KEYS[2]) == ids[KEYS[2]]


def test_a_fold_from_before_the_rewrite_is_refused_then_writes_format_3(redis_conn, opened):
    """A fold read its W from a format-2 snapshot and stored its file; the rewrite commits; the fold's commit
    is refused (the table's metadata changed), and the fold writes its file again as format 3."""
    old_table, url, options = opened
    ids = filled(redis_conn, old_table)
    rewrites: list[int] = []

    def rewrite_after_the_first_file(event: FoldProgress) -> None:
        if event.kind == "file" and not rewrites:
            rewrites.append(relayout(Archive(url, **options)).version)

    result = fold(redis_conn, RawKey(KEYS[1]), old_table, ids[KEYS[1]][259].decode(),
                  progress=rewrite_after_the_first_file)
    assert rewrites and result.races_lost == 1 and result.entries == 60
    assert all(file.format == 3 for file in old_table.state(RawKey(KEYS[1])).files)
    assert read_ids(redis_conn, old_table, KEYS[1]) == ids[KEYS[1]]


def test_the_command(redis_conn, tmp_path):
    """`retain archive migrate` rewrites a format-2 table and says so; ls then says it is the table."""
    archive = format_two(open_archive("local", tmp_path, None)[0])
    filled(redis_conn, archive)
    runner = CliRunner()
    listed = runner.invoke(main, ["archive", "ls", "--archive", archive.url])
    assert "format 2" in " ".join(listed.output.split())
    moved = runner.invoke(main, ["archive", "migrate", "--archive", archive.url])
    assert moved.exit_code == 0, moved.output
    assert "rewrote 10 files (620 entries) of 3 streams as format 3 in one commit" in moved.output
    listed = runner.invoke(main, ["archive", "ls", "--archive", archive.url])
    assert f"(table, version {archive.version})" in " ".join(listed.output.split())
