"""The archive read by the readers people use, on a local table and on SeaweedFS: the same rows, and the same
``stream``, ``id``, ``ms``, ``seq``, ``ts`` and fields (non-UTF-8 ones included), whichever reader, filtered on
each stream's real key.

Format 2 failed this: partitioned by the key, a folder ``stream=emq!3A!7Bshop…`` gave Polars (``read_delta``,
``scan_delta``) and DuckDB's ``read_parquet(…, hive_partitioning = true)`` the escaped name, and a filter on the
real key returned nothing, without an error. Format 3 keeps the key in every file and partitions by a digest no
path escapes (docs/archive.md, "What each reader sees").

DuckDB reads S3 through its ``httpfs`` extension, which it downloads on first use: a test machine may have no
network, so on SeaweedFS DuckDB reads through pyarrow's dataset, and the folder names are read by Polars' own
hive reading over the listed files.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

import duckdb
import polars as pl
import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable

from retain.archive import Archive, fold, read
from retain.streams import RawKey
from tests.helpers.archive import open_archive

#: keys a path must escape, and one of them holding values that are not UTF-8
KEYS = ["emq:{shop}:stream:orders", "tenant/a%2Fb!x", "événements:{é}"]
COLUMNS = ["stream", "id", "ms", "seq", "ts", "fields", "fields_binary"]

Row = tuple[Any, ...]


@pytest.fixture(scope="module", params=["local", "s3"])
def folded(request, tmp_path_factory, redis_server) -> tuple[Archive, dict[str, list[Row]]]:
    """Three streams folded into a fresh archive (two folds each), and each one's rows as retain reads them."""
    seaweed = request.getfixturevalue("seaweed_server") if request.param == "s3" else None
    archive = open_archive(request.param, tmp_path_factory.mktemp("readers"), seaweed)[0]
    expected = {}
    with redis_server.client() as conn:
        for number, key in enumerate(KEYS):
            conn.delete(key)
            for index in range(120):
                value = bytes([0xFF, index % 256]) if number == 2 and index % 3 == 0 else f"v{index}".encode()
                conn.xadd(key, {"n": str(index), "value": value})
            ids = [entry for entry, _ in conn.xrange(key)]
            fold(conn, RawKey(key), archive, ids[59].decode())
            fold(conn, RawKey(key), archive, ids[99].decode())
            expected[key] = [_row(key, entry, fields) for entry, fields in read(conn, RawKey(key), archive,
                                                                                   end=ids[99])]
    return archive, expected


def _row(key: str, entry_id: bytes, fields: dict[bytes, bytes]) -> Row:
    """A row as every reader must give it: text fields when all are UTF-8, else every field as bytes."""
    ms, seq = (int(part) for part in entry_id.decode().split("-"))
    try:
        text = tuple(sorted((name.decode(), value.decode()) for name, value in fields.items()))
        binary = None
    except UnicodeDecodeError:
        text, binary = None, tuple(sorted((name.decode(), value) for name, value in fields.items()))
    return key, entry_id.decode(), ms, seq, ms, text, binary


def canonical(rows: list[dict[str, Any]]) -> list[Row]:
    """Rows as dicts (any reader's) in one shape: ``ts`` as epoch milliseconds, maps as sorted pairs."""
    def instant(value: datetime) -> int:
        return round(value.timestamp() * 1000)

    def pairs(value: Any) -> tuple[tuple[str, Any], ...] | None:
        if value is None:
            return None
        items = value.items() if isinstance(value, dict) else value
        return tuple(sorted((name, bytes(data) if isinstance(data, (bytes, bytearray, memoryview)) else data)
                            for name, data in items))

    found = [(row["stream"], row["id"], row["ms"], row["seq"], instant(row["ts"]), pairs(row["fields"]),
              pairs(row["fields_binary"])) for row in rows]
    return sorted(found, key=lambda row: (row[2], row[3]))


def polars_options(archive: Archive) -> dict[str, str] | None:
    """What Polars' object store takes of the archive's options (it wants typed retries, so only these)."""
    storage = archive.location.storage_options
    if storage is None:
        return None
    return {name: value for name, value in storage.items()
            if name in ("endpoint", "region", "access_key_id", "secret_access_key", "allow_http")}


def uri(archive: Archive) -> str:
    return archive.location.table_uri


def files_of(archive: Archive) -> list[str]:
    return DeltaTable(uri(archive), storage_options=archive.location.storage_options).file_uris()


def read_delta(archive: Archive, key: str) -> list[dict[str, Any]]:
    frame = pl.read_delta(uri(archive), storage_options=polars_options(archive))
    return frame.filter(pl.col("stream") == key).to_dicts()


def scan_delta(archive: Archive, key: str) -> list[dict[str, Any]]:
    frame = pl.scan_delta(uri(archive), storage_options=polars_options(archive))
    return frame.filter(pl.col("stream") == key).collect().to_dicts()


def polars_hive(archive: Archive, key: str) -> list[dict[str, Any]]:
    frame = pl.scan_parquet(files_of(archive), hive_partitioning=True, storage_options=polars_options(archive))
    return frame.filter(pl.col("stream") == key).collect().to_dicts()


def deltalake_pyarrow(archive: Archive, key: str) -> list[dict[str, Any]]:
    table = DeltaTable(uri(archive), storage_options=archive.location.storage_options)
    return table.to_pyarrow_dataset().to_table(filter=pc.field("stream") == key).to_pylist()


def duckdb_dataset(archive: Archive, key: str) -> list[dict[str, Any]]:
    dataset = DeltaTable(uri(archive), storage_options=archive.location.storage_options).to_pyarrow_dataset()  # noqa: F841 -- read by name below
    relation = duckdb.sql("SELECT * FROM dataset WHERE stream = $key", params={"key": key})
    return [dict(zip(relation.columns, row, strict=False)) for row in relation.fetchall()]


def duckdb_hive(archive: Archive, key: str) -> list[dict[str, Any]]:
    relation = duckdb.sql("SELECT * FROM read_parquet($files, hive_partitioning = true) WHERE stream = $key",
                          params={"files": files_of(archive), "key": key})
    return [dict(zip(relation.columns, row, strict=False)) for row in relation.fetchall()]


READERS: dict[str, Callable[[Archive, str], list[dict[str, Any]]]] = {
    "polars read_delta": read_delta, "polars scan_delta": scan_delta, "polars hive scan_parquet": polars_hive,
    "deltalake to pyarrow": deltalake_pyarrow, "duckdb over the dataset": duckdb_dataset,
    "duckdb read_parquet hive": duckdb_hive,
}


def test_every_reader_reads_the_same_rows(folded):
    """Each reader, filtered on each stream's real key, gives exactly the rows retain's merge-read gives."""
    archive, expected = folded
    readers = {name: reader for name, reader in READERS.items()
               if archive.location.local_root is not None or name != "duckdb read_parquet hive"}
    for name, reader in readers.items():
        for key in KEYS:
            rows = reader(archive, key)
            assert canonical(rows) == expected[key], f"{name} read {key!r} differently"
            assert {row.get("stream_digest") for row in rows} <= {None, f"sha256-{_digest(key)}"}, name


def _digest(key: str) -> str:
    import hashlib
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def test_every_reader_sees_the_same_columns(folded):
    """The columns of the table, in order, whoever reads it (the partition column last)."""
    archive, _ = folded
    assert pl.scan_delta(uri(archive), storage_options=polars_options(archive)).collect_schema().names() == \
        [*COLUMNS, "stream_digest"]
    assert DeltaTable(uri(archive), storage_options=archive.location.storage_options).to_pyarrow_dataset() \
        .schema.names == [*COLUMNS, "stream_digest"]
