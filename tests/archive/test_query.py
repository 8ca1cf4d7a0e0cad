"""retain.archive.query, and the table as an open format: DuckDB reads it and sees the same rows."""

from __future__ import annotations

import duckdb
import pytest

from retain.archive import Archive, StreamId, fold_then_trim, query, read
from retain.errors import InvalidInput
from retain.windows import MaxLen
from tests.helpers.archive import table_of


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
        """DuckDB sees the table's columns typed: text ids, BIGINT ms and seq, a UTC timestamp, maps."""
        dataset = folded.dataset()
        described = {name: kind for name, kind, *_ in duckdb.sql("DESCRIBE SELECT * FROM dataset").fetchall()}
        assert described == {"stream": "VARCHAR", "id": "VARCHAR", "ms": "BIGINT", "seq": "BIGINT",
                             "ts": "TIMESTAMP WITH TIME ZONE", "fields": "MAP(VARCHAR, VARCHAR)",
                             "fields_binary": "MAP(VARCHAR, BLOB)"}


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
