"""Merge-read throughput over the archived part and over the live part, each against raw XRANGE, same run.

Two streams hold the same 2 x HALF activity-feed entries (four fields each):
- ``merged``: the older HALF folded into a local-directory archive and trimmed
  away (MINID just past W), the newer HALF live;
- ``raw``: all 2 x HALF live, never trimmed: the baseline.
Timed in alternating rounds (median of ROUNDS), every entry consumed one by one:
- archived: ``retain.archive.read`` of ids up to W (all from the table) against a
  raw redis-py XRANGE loop over the same ids of ``raw``;
- live: ``read`` of ids after W (all from Redis, W checked each chunk) against
  the same XRANGE loop over those ids of ``raw``;
- arrow: ``retain.archive.read_arrow`` of ids up to W (record batches, every
  batch taken) against pyarrow's ``dataset(files).to_table()`` over the same
  data files, read straight (no merge, no W, no checksums checked).

Run: python3 dev.py bench read
Prints a table, then one JSON line: {"ratio_archived": ..., "ratio_live": ..., "ratio_arrow": ...}: merge-read
entries/s / raw XRANGE entries/s (targets >= 2 and >= 0.8), and read_arrow rows/s / pyarrow dataset rows/s
(target >= 0.7).
"""

from __future__ import annotations

import gc
import json
import statistics
import tempfile
import time
from collections import deque
from datetime import UTC, datetime, timedelta

import pyarrow.dataset

from retain.archive import Archive, StreamId, fold_then_trim, read, read_arrow
from retain.demo.feed import guess_events
from retain.servers import RedisServer
from retain.streams import StreamRef
from retain.windows import MaxLen

ROUNDS = 7
HALF = 100_000
COUNT = 1_000


def fill(conn, streams: list[StreamRef]) -> None:
    pipe = conn.pipeline(transaction=False)
    end = datetime(2026, 9, 12, tzinfo=UTC)
    for index, (entry_id, fields) in enumerate(guess_events(2 * HALF, end=end, spacing=timedelta(milliseconds=5))):
        for stream in streams:
            pipe.xadd(stream.key, fields, id=entry_id)
        if index % 5_000 == 4_999:
            pipe.execute()
    pipe.execute()


def raw_entries(conn, key: str, low: StreamId, high: StreamId):
    """A raw redis-py XRANGE loop over low..high, entry by entry."""
    while True:
        chunk = conn.xrange(key, str(low), str(high), count=COUNT)
        yield from chunk
        if len(chunk) < COUNT:
            return
        low = StreamId.parse(chunk[-1][0]).successor()


def consumed(entries) -> tuple[float, int]:
    gc.collect()  # neither side pays for the other's garbage
    counter: deque = deque(maxlen=1)
    start = time.perf_counter()
    counter.extend(enumerate(entries, 1))
    seconds = time.perf_counter() - start
    return seconds, counter[0][0] if counter else 0


def rows(batches) -> tuple[float, int]:
    """Seconds to take every batch (or table) of ``batches()``, and the rows they held."""
    gc.collect()
    start = time.perf_counter()
    taken = sum(batch.num_rows for batch in batches())
    return time.perf_counter() - start, taken


def main() -> None:
    merged, raw = StreamRef("bench", "merged"), StreamRef("bench", "raw")
    results: dict[str, list[float]] = {"archived": [], "archived_raw": [], "live": [], "live_raw": [], "arrow": [],
                                       "arrow_dataset": []}
    with RedisServer() as server, tempfile.TemporaryDirectory(prefix="retain-bench-read-") as directory:
        conn = server.client()
        fill(conn, [merged, raw])
        archive = Archive(directory)
        fold_then_trim(conn, merged, archive, MaxLen(HALF, approx=False), count=COUNT)
        watermark = archive.watermark(merged)
        assert watermark is not None and conn.xlen(merged.key) == HALF
        first, last = StreamId(0, 0), StreamId(2**64 - 1, 2**64 - 1)
        sides = {
            "archived": lambda: read(conn, merged, archive, end=watermark, count=COUNT),
            "archived_raw": lambda: raw_entries(conn, raw.key, first, watermark),
            "live": lambda: read(conn, merged, archive, start=watermark.successor(), count=COUNT),
            "live_raw": lambda: raw_entries(conn, raw.key, watermark.successor(), last),
        }
        files = [f"{directory}/{file.path}" for file in archive.state(merged).files]
        batched = {
            "arrow": lambda: read_arrow(conn, merged, archive, end=watermark, count=COUNT),
            "arrow_dataset": lambda: [pyarrow.dataset.dataset(files, format="parquet").to_table()],
        }
        for round_index in range(ROUNDS):
            # Alternate which side goes first so drift on a shared machine hits both alike.
            order = list(sides) if round_index % 2 == 0 else list(sides)[::-1]
            for name in order:
                seconds, entries = consumed(sides[name]())
                assert entries == HALF, (name, entries)
                results[name].append(seconds)
            for name in (list(batched) if round_index % 2 == 0 else list(batched)[::-1]):
                seconds, entries = rows(batched[name])
                assert entries == HALF, (name, entries)
                results[name].append(seconds)
        conn.close()

    rate = {name: HALF / statistics.median(times) for name, times in results.items()}
    ratio_archived = rate["archived"] / rate["archived_raw"]
    ratio_live = rate["live"] / rate["live_raw"]
    ratio_arrow = rate["arrow"] / rate["arrow_dataset"]
    print(f"{'part':<10} {'merge-read':>14} {'raw XRANGE':>14} {'ratio':>7}   ({HALF} entries a part, "
          f"COUNT {COUNT}, median of {ROUNDS})")
    print(f"{'archived':<10} {rate['archived']:>10,.0f} e/s {rate['archived_raw']:>10,.0f} e/s {ratio_archived:>7.3f}")
    print(f"{'live':<10} {rate['live']:>10,.0f} e/s {rate['live_raw']:>10,.0f} e/s {ratio_live:>7.3f}")
    print(f"{'arrow':<10} {rate['arrow']:>10,.0f} e/s {rate['arrow_dataset']:>10,.0f} e/s {ratio_arrow:>7.3f}"
          "   (read_arrow of the archived part vs pyarrow dataset.to_table over its files)")
    print(json.dumps({"bench": "read", "ratio_archived": round(ratio_archived, 4), "ratio_live": round(ratio_live, 4),
                      "ratio_arrow": round(ratio_arrow, 4),
                      "archived_entries_per_s": round(rate["archived"]), "live_entries_per_s": round(rate["live"]),
                      "arrow_entries_per_s": round(rate["arrow"]), "dataset_entries_per_s": round(rate["arrow_dataset"]),
                      "raw_entries_per_s": round(rate["archived_raw"]), "entries_per_part": HALF}))


if __name__ == "__main__":
    main()
