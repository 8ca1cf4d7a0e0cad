"""What the archive tests share: a fresh archive on each store kind, and the ids a table holds, read straight."""

from __future__ import annotations

import uuid
from typing import Any

import obstore
import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable

from retain.archive import Archive
from retain.streams import Stream

__all__ = ["SHARED_STORES", "STORES", "archived_ids", "commits_of", "format_two", "keys_of", "open_archive",
           "table_of"]

STORES = ["local", "memory", "s3"]
#: stores another process can open too (memory:// lives in one process)
SHARED_STORES = ["local", "s3"]


def open_archive(kind: str, tmp_path: Any, seaweed_server: Any) -> tuple[Archive, str, dict[str, Any]]:
    """A fresh, empty archive of ``kind``, with the URL and options that open it again."""
    if kind == "local":
        url, options = f"file://{tmp_path / f'archive-{uuid.uuid4().hex[:8]}'}", {}
    elif kind == "memory":
        url, options = "memory://", {}
    else:
        url, options = seaweed_server.archive_url(f"test-{uuid.uuid4().hex}"), seaweed_server.archive_options()
    return Archive(url, **options), url, options


def format_two(archive: Archive) -> Archive:
    """``archive`` (fresh, no table yet) with an empty table of format 2 made there, as a retain before format 3
    made them: partitioned by ``stream`` itself (its folders ``stream=emq!3A…``), the files without the key.
    Retain then reads and writes it as format 2 until it is migrated."""
    from retain.archive.columns import TABLE_SCHEMA_2
    from retain.archive.table import TABLE_PROPERTIES

    DeltaTable.create(archive.location.table_uri, TABLE_SCHEMA_2, partition_by=["stream"], name="retain archive",
                      configuration=TABLE_PROPERTIES, storage_options=archive.location.storage_options)
    archive.reload()
    assert archive.format == 2
    return archive


def table_of(archive: Archive, version: int | None = None) -> DeltaTable:
    """The archive's Delta table as delta-rs opens it, apart from retain's own reading (at ``version``)."""
    return DeltaTable(archive.location.table_uri, version=version, storage_options=archive.location.storage_options)


def archived_ids(archive: Archive, stream: Stream) -> list[tuple[int, int]]:
    """Every row's id, ``(ms, seq)``, of every live file of ``stream`` in the table's log, read straight from the
    store, file after file in the order of the first id each holds (its name starts with it)."""
    if archive.version < 0:
        return []
    actions = pa.table(table_of(archive).get_add_actions(flatten=True))
    paths = sorted((path for path, key in zip(actions.column("path").to_pylist(), keys_of(actions), strict=False)
                    if key == stream.key), key=_first)
    rows: list[tuple[int, int]] = []
    for path in paths:
        data = bytes(obstore.get(archive.store, path).bytes())
        table = pq.read_table(pa.BufferReader(data), columns=["ms", "seq"])
        rows += zip(table.column("ms").to_pylist(), table.column("seq").to_pylist(), strict=False)
    return rows


def commits_of(archive: Archive, stream: Stream) -> list[tuple[int, list[tuple[str, str]], tuple[int, int] | None]]:
    """Every commit that added files of ``stream``: its version, the ranges of the files it added (first, last
    as ``<ms>-<seq>``), and W it set, ``(ms, seq)``; read from the log's history, in version order."""
    table = table_of(archive)
    found = []
    for version in range(1, table.version() + 1):
        at = table_of(archive, version)
        before = table_of(archive, version - 1)
        added = {path for path, key in _files(at) if key == stream.key} - {path for path, key in _files(before)}
        ms, seq = at.transaction_version(f"{stream.key}/ms"), at.transaction_version(f"{stream.key}/seq")
        if added:
            ranges = [_range(path) for path in sorted(added, key=_first)]
            found.append((version, ranges, (ms, seq or 0) if ms is not None else None))
    return found


def _files(table: DeltaTable) -> list[tuple[str, str]]:
    actions = pa.table(table.get_add_actions(flatten=True))
    if not actions.num_rows:
        return []
    return list(zip(actions.column("path").to_pylist(), keys_of(actions), strict=False))


def keys_of(actions: pa.Table) -> list[str]:
    """The stream of each file of a log's add actions: its ``stream`` column's statistics (format 3), or its
    partition value (format 2)."""
    name = "min.stream" if "min.stream" in actions.column_names else "partition.stream"
    return actions.column(name).to_pylist()


def _first(path: str) -> tuple[int, int]:
    first = _range(path)[0]
    return int(first.split("-")[0]), int(first.split("-")[1])


def _range(path: str) -> tuple[str, str]:
    first, last = path.rsplit("/", 1)[-1].split(".")[0].split("_")
    return tuple(f"{int(part.split('-')[0])}-{int(part.split('-')[1])}" for part in (first, last))  # type: ignore[return-value]


def keeps_entries_added(conn: Any) -> bool:
    """True when XINFO STREAM counts every entry ever added (Redis 7, Valkey): the gap check needs that count.

    Redis 6.2 keeps no such count, so the archive makes no gap check there (docs/archive.md).
    """
    info = conn.info("server")
    return "valkey_version" in info or int(str(info["redis_version"]).split(".")[0]) >= 7


NO_GAP_CHECK = "Redis 6.2 keeps no entries-added count, so the archive makes no gap check there (docs/archive.md)"
