"""Partitioning the archive's table, measured: by the stream's digest (what retain writes, format 3), by the stream
itself (format 2), by stream and day, or not at all.

The same rows in four Delta tables: STREAMS streams of PER_DAY entries a day
for DAYS days (two fields each), row groups of 10,000, zstd; the files as
delta-rs's own writer lays them out for each partitioning. For each: the
files, the checkpoint's size, opening the table and listing its files, and
two DuckDB queries over its pyarrow dataset (as ``retain archive query`` runs
them), median of ROUNDS: one stream's entries of one day, and a count per
stream over everything.

Run: python3 dev.py bench archive_layout
Prints a table, then one JSON line: per layout, its files and milliseconds.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable, WriterProperties, write_deltalake

from retain.archive.columns import TABLE_SCHEMA_2
from retain.archive.layout import stream_digest

STREAMS, DAYS, PER_DAY = 10, 30, 2_000
ROUNDS = 7
START = datetime(2026, 8, 1, tzinfo=UTC)
LAYOUTS = {"stream_digest": ["stream_digest"], "stream": ["stream"], "stream_day": ["stream", "day"],
           "none": None}


def rows() -> pa.Table:
    start_ms = int(START.timestamp() * 1000)
    tables = []
    for stream in range(STREAMS):
        ms = pa.array([start_ms + day * 86_400_000 + index * 40_000 for day in range(DAYS) for index in range(PER_DAY)],
                      pa.int64())
        count = len(ms)
        tables.append(pa.table({
            "stream": pa.array([f"emq:{{bench}}:stream:s{stream}"] * count),
            "id": pc.binary_join_element_wise(pc.cast(ms, pa.string()), "0", "-"),
            "ms": ms, "seq": pa.array([0] * count, pa.int64()), "ts": ms.cast(pa.timestamp("ms", tz="UTC")),
            "fields": pa.array([[("player", f"p{index % 50}"), ("score", "12")] for index in range(count)],
                               pa.map_(pa.string(), pa.string())),
            "fields_binary": pa.nulls(count, pa.map_(pa.string(), pa.binary()))}))
    table = pa.concat_tables(tables).cast(TABLE_SCHEMA_2)
    digests = pa.array([stream_digest(key) for key in table.column("stream").to_pylist()])
    return table.append_column("day", pc.strftime(table.column("ts"), "%Y-%m-%d")).append_column("stream_digest",
                                                                                                   digests)


def median_ms(function: Callable[[], object]) -> float:
    times = []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def main() -> None:
    table = rows()
    day = START + timedelta(days=15)
    one_day = (f"SELECT count(*) FROM dataset WHERE stream = 'emq:{{bench}}:stream:s3' "
               f"AND ts >= TIMESTAMPTZ '{day.isoformat()}' AND ts < TIMESTAMPTZ '{(day + timedelta(days=1)).isoformat()}'")
    figures: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="retain-bench-layout-") as directory:
        for name, partitions in LAYOUTS.items():
            root = f"{directory}/{name}"
            extra = [column for column in ("day", "stream_digest") if column not in (partitions or [])]
            write_deltalake(root, table.drop_columns(extra),
                            partition_by=partitions,
                            writer_properties=WriterProperties(max_row_group_size=10_000, compression="ZSTD"))
            DeltaTable(root).create_checkpoint()
            checkpoint = next(entry for entry in os.listdir(f"{root}/_delta_log") if entry.endswith(".parquet"))

            def query(sql: str, root: str = root) -> list[object]:
                dataset = DeltaTable(root).to_pyarrow_dataset()  # noqa: F841 - DuckDB reads it by name
                return duckdb.sql(sql).fetchall()

            assert query(one_day) == [(PER_DAY,)]
            figures[name] = {
                "files": len(DeltaTable(root).file_uris()),
                "checkpoint_bytes": os.path.getsize(f"{root}/_delta_log/{checkpoint}"),
                "open_ms": round(median_ms(lambda root=root: DeltaTable(root).get_add_actions()), 2),
                "one_stream_one_day_ms": round(median_ms(lambda: query(one_day)), 2),
                "count_per_stream_ms": round(median_ms(
                    lambda: query("SELECT stream, count(*) FROM dataset GROUP BY 1")), 2),
            }
    print(f"{'partitioned by':<14} {'files':>6} {'checkpoint':>11} {'open':>8} {'1 stream, 1 day':>16} {'per stream':>11}"
          f"   ({STREAMS} streams x {DAYS} days x {PER_DAY} entries, median of {ROUNDS})")
    for name, found in figures.items():
        print(f"{name:<14} {found['files']:>6.0f} {found['checkpoint_bytes']:>9.0f} B {found['open_ms']:>6.1f}ms "
              f"{found['one_stream_one_day_ms']:>14.1f}ms {found['count_per_stream_ms']:>9.1f}ms")
    print(json.dumps({"bench": "archive_layout", **figures}))


if __name__ == "__main__":
    main()
