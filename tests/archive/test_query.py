"""retain.archive.query, and the table as an open format: DuckDB reads it and sees the same rows."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime

import duckdb
import pytest
from click.testing import CliRunner

from retain.archive import Archive, StreamId, fold_then_trim, query, read
from retain.cli import main
from retain.errors import ArchiveGap, InvalidInput
from retain.streams import RawKey
from retain.windows import MaxLen
from tests.helpers.archive import NO_GAP_CHECK, keeps_entries_added, table_of
from tests.helpers.streams import append as append_entries


def entries_from(rows) -> list[tuple[bytes, dict[bytes, bytes]]]:
    """(id, fields, fields_binary) rows (maps as dicts or as lists of pairs) as redis-py's XRANGE entries."""
    return [(entry_id.encode(), {name.encode(): value.encode() for name, value in dict(fields).items()} if fields
             else {name.encode(): value for name, value in dict(binary).items()}) for entry_id, fields, binary in rows]


@pytest.fixture
def folded(redis_conn, tmp_path, stream, append):
    archive = Archive(f"file://{tmp_path / 'archive'}")
    append(stream, 700)
    fold_then_trim(redis_conn, stream, archive, MaxLen(200, approx=False), segment_entries=150)
    assert len(archive.state(stream).files) == 4
    return archive


class TestDuckDB:
    def test_the_files_read_directly(self, redis_conn, stream, folded):
        """SELECT over the table's files as they are gives the archived entries: ids, names, binary values."""
        files = table_of(folded).file_uris()
        rows = duckdb.sql(f"SELECT id, fields, fields_binary FROM read_parquet({files!r}) ORDER BY ms, seq").fetchall()
        watermark = folded.watermark(stream)
        assert entries_from(rows) == list(read(redis_conn, stream, folded, end=watermark))
        assert StreamId.parse(rows[-1][0]) == watermark and len(rows) == 500

    def test_types(self, folded):
        """DuckDB sees the table's columns typed: text ids, BIGINT ms and seq, a UTC timestamp, maps; the
        partition column last (the views leave it out)."""
        dataset = folded.dataset()  # noqa: F841 -- DuckDB's replacement scan reads this local by its name
        described = [(name, kind) for name, kind, *_ in duckdb.sql("DESCRIBE SELECT * FROM dataset").fetchall()]
        assert described == [("stream", "VARCHAR"), ("id", "VARCHAR"), ("ms", "BIGINT"), ("seq", "BIGINT"),
                             ("ts", "TIMESTAMP WITH TIME ZONE"), ("fields", "MAP(VARCHAR, VARCHAR)"),
                             ("fields_binary", "MAP(VARCHAR, BLOB)"), ("stream_digest", "VARCHAR")]
        assert query(folded, "SELECT * FROM archive LIMIT 0").column_names == [name for name, _ in described[:-1]]


class TestQuery:
    def test_views(self, redis_conn, stream, folded):
        """``entries`` is one stream's archived rows, ``archive`` every stream's."""
        rows = query(folded, "SELECT id, fields, fields_binary FROM entries ORDER BY ms, seq", stream=stream)
        watermark = folded.watermark(stream)
        assert entries_from(tuple(row.values()) for row in rows.to_pylist()) == list(
            read(redis_conn, stream, folded, end=watermark))
        counted = query(folded, "SELECT stream, count(*) AS n, last(id ORDER BY ms, seq) AS last FROM archive "
                                "GROUP BY 1")
        assert counted.to_pylist() == [{"stream": stream.key, "n": 500, "last": str(watermark)}]
        # The fixture's entries hold a binary value: their fields are in fields_binary, every one as bytes.
        text = query(folded, "SELECT coalesce(fields['i'], decode(fields_binary['i'])) AS i FROM entries "
                             "ORDER BY ms, seq LIMIT 2", stream=stream)
        assert text.column("i").to_pylist() == ["0", "1"]

    def test_refusals(self, folded, stream):
        """SQL DuckDB refuses is InvalidInput with its message; an empty query is refused before any I/O."""
        with pytest.raises(InvalidInput, match="DuckDB refused the query"):
            query(folded, "SELECT nothing FROM entries", stream=stream)
        with pytest.raises(InvalidInput, match="non-empty SQL"):
            query(folded, "  ")

    def test_an_empty_archive(self, tmp_path):
        """Before the first commit the views exist and hold nothing."""
        assert query(Archive(str(tmp_path / "empty")), "SELECT count(*) AS n FROM archive").to_pylist() == [{"n": 0}]


class TestLogView:
    def test_the_log_while_folds_trims_and_appends_go_on(self, redis_conn, redis_server, tmp_path, stream):
        """The log view of a stream with archived rows and a live tail, while a producer appends and a fold
        trims beside the query: ids in order, each once, every one appended before the query began, and no gap
        (whatever of the producer's it shows is a prefix of what it appended)."""
        archive = Archive(f"file://{tmp_path / 'archive'}")
        appended = append_entries(redis_conn, stream.key, 6000)
        fold_then_trim(redis_conn, stream, archive, MaxLen(1500, approx=False), segment_entries=1000)
        stop, going = threading.Event(), threading.Event()

        def produce_and_fold() -> None:
            with redis_server.client() as own:
                while not stop.is_set():
                    appended.extend(append_entries(own, stream.key, 200))
                    fold_then_trim(own, stream, Archive(archive.url), MaxLen(1500))
                    going.set()

        worker = threading.Thread(target=produce_and_fold, name="producer-and-folder")
        worker.start()
        going.wait(timeout=60)
        before = len(appended)
        try:
            rows = query(archive, "SELECT id FROM log", stream=stream, conn=redis_conn).column("id").to_pylist()
        finally:
            stop.set()
            worker.join()
        ids = [entry_id.decode() for entry_id in appended]
        assert len(rows) >= before and rows == ids[:len(rows)], "out of order, twice, or a gap between the tiers"

    def test_every_archived_stream(self, redis_conn, tmp_path):
        """Without a stream, the log is every stream the archive holds, each with its live tail, in key order."""
        archive = Archive(f"file://{tmp_path / 'archive'}")
        for key in ("raw:b", "raw:a"):
            redis_conn.delete(key)
            append_entries(redis_conn, key, 30)
            fold_then_trim(redis_conn, RawKey(key), archive, MaxLen(10, approx=False))
        counted = query(archive, "SELECT stream, count(*) AS n FROM log GROUP BY ALL ORDER BY stream",
                        conn=redis_conn)
        assert counted.to_pylist() == [{"stream": "raw:a", "n": 30}, {"stream": "raw:b", "n": 30}]
        assert [row["stream"] for row in query(archive, "SELECT stream FROM log", conn=redis_conn).to_pylist()] == \
            ["raw:a"] * 30 + ["raw:b"] * 30

    def test_a_gap_is_the_log_views_error(self, redis_conn, tmp_path, stream):
        """The log view refuses what the merge-read refuses, with the merge-read's own error, not DuckDB's."""
        if not keeps_entries_added(redis_conn):
            pytest.skip(NO_GAP_CHECK)
        archive = Archive(f"file://{tmp_path / 'archive'}")
        append_entries(redis_conn, stream.key, 300)
        fold_then_trim(redis_conn, stream, archive, MaxLen(100, approx=False))
        redis_conn.xtrim(stream.key, maxlen=20, approximate=False)
        with pytest.raises(ArchiveGap):
            query(archive, "SELECT count(*) FROM log", stream=stream, conn=redis_conn)

    def test_refusals(self, folded, stream, redis_conn):
        """The log view needs Redis, and is now: not as of a version. Both refused before any I/O."""
        with pytest.raises(InvalidInput, match="the log view reads the live tail from Redis"):
            query(folded, "SELECT count(*) FROM log", stream=stream)
        with pytest.raises(InvalidInput, match="as it is now"):
            query(folded, "SELECT count(*) FROM log", stream=stream, conn=redis_conn, as_of=1)


class TestAsOf:
    def test_the_table_as_it_was(self, redis_conn, tmp_path, stream):
        """``as_of`` a version or a time reads the table as it was then; a version it has not reached is
        refused, as is a naive time."""
        archive = Archive(f"file://{tmp_path / 'archive'}")
        append_entries(redis_conn, stream.key, 100)
        fold_then_trim(redis_conn, stream, archive, MaxLen(40, approx=False))
        version, between = archive.version, datetime.now(UTC)
        time.sleep(0.01)  # the next commit's timestamp is after ``between`` (milliseconds)
        append_entries(redis_conn, stream.key, 100)
        fold_then_trim(redis_conn, stream, archive, MaxLen(40, approx=False))
        count = "SELECT count(*) AS n FROM entries"
        assert query(archive, count, stream=stream).to_pylist() == [{"n": 160}]
        assert query(archive, count, stream=stream, as_of=version).to_pylist() == [{"n": 60}]
        assert query(archive, count, stream=stream, as_of=between).to_pylist() == [{"n": 60}]
        with pytest.raises(InvalidInput, match=f"no version {archive.version + 5}"):
            query(archive, count, stream=stream, as_of=archive.version + 5)
        with pytest.raises(InvalidInput, match="aware datetime"):
            query(archive, count, stream=stream, as_of=datetime(2026, 1, 1))

    def test_the_command(self, redis_conn, redis_server, tmp_path, stream):
        """`retain archive query` with the log view (Redis asked only then) and with --as-of."""
        url = str(tmp_path / "archive")
        archive = Archive(url)
        append_entries(redis_conn, stream.key, 50)
        fold_then_trim(redis_conn, stream, archive, MaxLen(20, approx=False))
        version = archive.version
        append_entries(redis_conn, stream.key, 50)
        fold_then_trim(redis_conn, stream, archive, MaxLen(20, approx=False))
        runner = CliRunner()
        base = ["archive", "query", "--key", stream.key, "--archive", url]
        logged = runner.invoke(main, [*base, "SELECT count(*) AS n FROM log", "--url", redis_server.url, "--json"])
        assert logged.exit_code == 0 and logged.output == '{"n": 100}\n', logged.output
        old = runner.invoke(main, [*base, "SELECT count(*) AS n FROM entries", "--as-of", str(version), "--json",
                                   "--url", "redis://127.0.0.1:1/0"])
        assert old.exit_code == 0 and old.output == '{"n": 30}\n', old.output  # Redis was not asked
