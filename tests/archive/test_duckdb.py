"""The archive is an open format: DuckDB reads the segment files as they are and sees the same rows."""

from __future__ import annotations

import duckdb

from retain.archive import Archive, StreamId, fold_then_trim, read
from retain.archive.layout import stream_dir
from retain.windows import MaxLen


class TestDuckDB:
    def test_segments_read_directly(self, redis_conn, tmp_path, stream, append):
        """SELECT over the segment files gives the archived entries: ids, field names, binary values."""
        root = tmp_path / "archive"
        archive = Archive(f"file://{root}")
        append(stream, 700)
        fold_then_trim(redis_conn, stream, archive, MaxLen(200, approx=False), segment_entries=150)
        watermark = archive.manifest(stream).watermark
        assert len(archive.manifest(stream).segments) == 4
        files = str(root / stream_dir(stream.key) / "segments" / "*.parquet")
        rows = duckdb.sql(f"SELECT ms, seq, map_keys(fields), map_values(fields) FROM read_parquet('{files}') "
                          "ORDER BY ms, seq").fetchall()
        from_duckdb = [(f"{ms}-{seq}".encode(), dict(zip((k.encode() for k in keys), values)))
                       for ms, seq, keys, values in rows]
        assert from_duckdb == list(read(redis_conn, stream, archive, end=watermark))
        assert StreamId.parse(from_duckdb[-1][0]) == watermark and len(from_duckdb) == 500

    def test_types(self, redis_conn, tmp_path, stream, append):
        """DuckDB sees ms and seq as BIGINT and fields as MAP(VARCHAR, BLOB)."""
        root = tmp_path / "archive"
        archive = Archive(str(root))
        append(stream, 10)
        fold_then_trim(redis_conn, stream, archive, MaxLen(0, approx=False))
        files = str(root / stream_dir(stream.key) / "segments" / "*.parquet")
        described = {name: kind for name, kind, *_ in duckdb.sql(f"DESCRIBE SELECT * FROM read_parquet('{files}')")
                     .fetchall()}
        assert described == {"ms": "BIGINT", "seq": "BIGINT", "fields": "MAP(VARCHAR, BLOB)"}
