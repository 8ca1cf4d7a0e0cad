"""Fold throughput against a raw redis-py XRANGE loop over the same entries, same run.

One stream of ENTRIES activity-feed entries (four fields each). Timed in
alternating rounds (median of ROUNDS):
- raw: ``conn.xrange(key, low, "+", count=COUNT)`` in a loop until the stream is read;
- fold: ``retain.archive.fold`` of the whole stream into a fresh local-directory
  archive (the default store): the same XRANGE chunks, plus Parquet encoding and
  the create-only writes of segments and manifests.
A fold into ``memory://`` is timed too, to show the cost of the local disk.

Run: python3 dev.py bench fold
Prints a table, then one JSON line: {"ratio": fold entries/s / raw XRANGE entries/s, ...} (target >= 0.75).
"""

from __future__ import annotations

import gc
import json
import statistics
import tempfile
import time
from datetime import datetime, timedelta, timezone

from retain.archive import Archive, StreamId, fold
from retain.demo.feed import guess_events
from retain.servers import RedisServer
from retain.streams import StreamRef

ROUNDS = 7
ENTRIES = 200_000
COUNT = 1_000
SEGMENT_ENTRIES = 100_000


def fill(conn, stream: StreamRef) -> None:
    pipe = conn.pipeline(transaction=False)
    end = datetime(2026, 9, 12, tzinfo=timezone.utc)
    for index, (entry_id, fields) in enumerate(guess_events(ENTRIES, end=end, spacing=timedelta(milliseconds=5))):
        pipe.xadd(stream.key, fields, id=entry_id)
        if index % 10_000 == 9_999:
            pipe.execute()
    pipe.execute()


def raw_xrange(conn, key: str) -> int:
    read, low = 0, "-"
    while True:
        chunk = conn.xrange(key, low, "+", count=COUNT)
        read += len(chunk)
        if len(chunk) < COUNT:
            return read
        low = str(StreamId.parse(chunk[-1][0]).successor())


def timed(function) -> tuple[float, int]:
    gc.collect()  # neither side pays for the other's garbage
    start = time.perf_counter()
    entries = function()
    return time.perf_counter() - start, entries


def main() -> None:
    stream = StreamRef("bench", "feed")
    results: dict[str, list[float]] = {"raw": [], "fold": [], "fold_memory": []}
    with RedisServer() as server, tempfile.TemporaryDirectory(prefix="retain-bench-fold-") as directory:
        conn = server.client()
        fill(conn, stream)

        def fold_local(round_index: int) -> int:
            archive = Archive(f"{directory}/round{round_index}")
            return fold(conn, stream, archive, count=COUNT, segment_entries=SEGMENT_ENTRIES).entries

        def fold_memory() -> int:
            return fold(conn, stream, Archive("memory://"), count=COUNT, segment_entries=SEGMENT_ENTRIES).entries

        for round_index in range(ROUNDS):
            sides = [("raw", lambda: raw_xrange(conn, stream.key)),
                     ("fold", lambda: fold_local(round_index)),
                     ("fold_memory", fold_memory)]
            # Alternate which side goes first so drift on a shared machine hits both alike.
            for name, function in (sides if round_index % 2 == 0 else sides[::-1]):
                seconds, entries = timed(function)
                assert entries == ENTRIES, (name, entries)
                results[name].append(seconds)
        conn.close()

    median = {name: statistics.median(times) for name, times in results.items()}
    rate = {name: ENTRIES / seconds for name, seconds in median.items()}
    ratio = rate["fold"] / rate["raw"]
    print(f"{'side':<22} {'seconds':>8} {'entries/s':>12} {'ratio':>7}   ({ENTRIES} entries, COUNT {COUNT}, "
          f"median of {ROUNDS})")
    for name, label in (("raw", "raw XRANGE loop"), ("fold", "fold -> local dir"), ("fold_memory", "fold -> memory://")):
        print(f"{label:<22} {median[name]:>8.3f} {rate[name]:>12,.0f} {rate[name] / rate['raw']:>7.3f}")
    print(json.dumps({"bench": "fold", "ratio": round(ratio, 4),
                      "ratio_memory": round(rate["fold_memory"] / rate["raw"], 4),
                      "fold_entries_per_s": round(rate["fold"]), "raw_entries_per_s": round(rate["raw"]),
                      "entries": ENTRIES, "count": COUNT}))


if __name__ == "__main__":
    main()
