"""retain.archive.migrate, and format 1 read as it is until then: manifests and segments into the table."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime

import pytest

from retain.archive import Archive, MaintenanceSettings, StreamId, fold, maintain, migrate, read, read_arrow
from retain.archive.layout import FORMAT, stream_digest
from retain.archive.legacy.layout import stream_dir
from retain.errors import ArchiveCorrupt, ArchiveNeedsMigration, InvalidInput
from retain.streams import RawKey
from tests.helpers.archive import SHARED_STORES, archived_ids, open_archive
from tests.helpers.legacy import segment_bytes, write_legacy

KEY = "emq:{game}:stream:old"


def entries(first_ms: int, count: int, binary: bool = False) -> list[tuple[bytes, dict[bytes, bytes]]]:
    return [(f"{first_ms + index}-{index % 2}".encode(),
             {b"i": str(index).encode(), b"v": b"\xff\x00" if binary and index % 3 == 0 else b"text"})
            for index in range(count)]


@pytest.fixture
def legacy(store_kind, tmp_path, request):
    """A format-1 archive of two streams on the store kind of the test (one another Archive can open: not
    memory://), with its URL and options."""
    seaweed = request.getfixturevalue("seaweed_server") if store_kind == "s3" else None
    _, url, options = open_archive(store_kind, tmp_path, seaweed)
    segments = [entries(1_000, 40, binary=True), entries(2_000, 30), entries(3_000, 25, binary=True)]
    write_legacy(url, {KEY: segments, "raw:other": [entries(10, 5)]}, **options)
    return url, options, [entry for segment in segments for entry in segment]


class TestFormatOne:
    @pytest.mark.parametrize("store_kind", SHARED_STORES)
    def test_read_as_it_is(self, redis_conn, legacy):
        """Until migrated, a format-1 archive reads as before: W, segments, the merge-read, Arrow batches."""
        url, options, written = legacy
        archive = Archive(url, **options)
        assert archive.format == 1 and archive.streams() == [KEY, "raw:other"]
        stream = RawKey(KEY)
        state = archive.state(stream)
        assert (state.watermark, state.entries, len(state.files), state.format) == (StreamId(3_024, 0), 95, 3, 1)
        assert list(read(redis_conn, stream, archive, count=7)) == written
        assert list(read(redis_conn, stream, archive, "2000", "2010-0")) == written[40:51]
        table = [row for batch in read_arrow(redis_conn, stream, archive) for row in batch.to_pylist()]
        assert [row["id"] for row in table] == [entry_id.decode() for entry_id, _ in written]
        assert table[0]["fields"] is None and table[1]["fields"] == [("i", "1"), ("v", "text")]

    @pytest.mark.parametrize("store_kind", ["local"])
    def test_no_fold_into_it(self, redis_conn, legacy):
        """A fold into a format-1 archive is refused before anything is read: migrate it first."""
        url, options, _ = legacy
        redis_conn.xadd(KEY, {"a": "1"}, id="9000-0")
        redis_conn.config_resetstat()
        with pytest.raises(ArchiveNeedsMigration, match="retain archive migrate"):
            fold(redis_conn, RawKey(KEY), Archive(url, **options))
        assert "cmdstat_xrange" not in redis_conn.info("commandstats")


class TestMigrate:
    @pytest.mark.parametrize("store_kind", SHARED_STORES)
    def test_every_id_once(self, redis_conn, legacy):
        """migrate moves every stream into the table in one commit: W as the manifest's, each id once, in order;
        the archive is then a table, and folds go on from W."""
        url, options, written = legacy
        archive = Archive(url, **options)
        report = migrate(archive, file_entries=50)
        assert report.entries == 100 and report.version == 1  # the table's creation, then one commit
        moved = {stream.stream: stream for stream in report.streams}
        assert (moved[KEY].segments, moved[KEY].files, moved[KEY].watermark) == (3, 2, StreamId(3_024, 0))
        assert archive.format == FORMAT
        stream = RawKey(KEY)
        assert archive.watermark(stream) == StreamId(3_024, 0) and archive.state(stream).entries == 95
        assert list(read(redis_conn, stream, archive)) == written
        assert archived_ids(archive, stream) == [(int(e.split(b"-")[0]), int(e.split(b"-")[1])) for e, _ in written]
        redis_conn.xadd(KEY, {"new": "1"}, id="9000-0")
        assert fold(redis_conn, stream, archive).entries == 1
        assert len(list(read(redis_conn, stream, archive))) == 96

    @pytest.mark.parametrize("store_kind", ["local"])
    def test_twice_changes_nothing(self, legacy):
        """A second migration finds every stream in the table at its W and does nothing."""
        url, options, _ = legacy
        archive = Archive(url, **options)
        first = migrate(archive)
        again = migrate(Archive(url, **options))
        assert first.entries == 100 and again.entries == 0 and again.version == -1
        assert all(stream.skipped for stream in again.streams)

    def test_a_segment_that_breaks_its_manifest(self, tmp_path):
        """A segment whose rows are not what its manifest says stops the migration before any commit."""
        broken = write_legacy(str(tmp_path / "broken"), {"raw:k": [entries(1, 10), entries(100, 10)]})
        # The second segment rewritten with a row out of order: the check of every id finds it.
        segment = broken["raw:k"].segments[1]
        rows = entries(100, 10)
        rows[3], rows[4] = rows[4], rows[3]
        (tmp_path / "broken" / stream_dir("raw:k") / segment.name).write_bytes(segment_bytes("raw:k", rows))
        archive = Archive(str(tmp_path / "broken"))
        with pytest.raises(ArchiveCorrupt, match="out of order|twice"):
            migrate(archive)
        assert archive.format == 1 and Archive(str(tmp_path / "broken")).version == -1

    def test_maintenance_then_removes_format_one(self, redis_conn, tmp_path):
        """After the migration, maintenance's vacuum removes the format-1 objects (files no commit lists, over
        an hour old); the table reads whole."""
        url = str(tmp_path / "moved")
        written = entries(1, 30)
        write_legacy(url, {KEY: [written[:15], written[15:]]})
        hours_ago = time.time() - 2 * 3600
        for path in (tmp_path / "moved").rglob("*"):
            os.utime(path, (hours_ago, hours_ago))
        archive = Archive(url)
        migrate(archive)
        maintain(archive, MaintenanceSettings(every=None), now=datetime.now(UTC))
        left = sorted(path.relative_to(tmp_path / "moved").parts[0] for path in (tmp_path / "moved").rglob("*.*"))
        assert set(left) == {"_delta_log", f"stream_digest={stream_digest(KEY)}"}
        assert list(read(redis_conn, RawKey(KEY), Archive(url))) == written

    def test_refusals(self, tmp_path):
        """file_entries must be a whole number >= 1, checked before any I/O."""
        with pytest.raises(InvalidInput, match="file_entries"):
            migrate(Archive(str(tmp_path / "x")), file_entries=0)
