"""The archive as it ages: a fold and a merge-read cost the same after thousands of folds as after the first.

One stream, one local-directory archive, small folds (FOLD_ENTRIES entries each,
one commit each, as a driver beating every second makes them):

1. WARM folds with no maintenance: the table grows a file and a commit per fold;
2. the live read: LIVE entries appended and left live, with WARM folds behind
   them, merge-read (W checked after every chunk) against a raw redis-py XRANGE
   loop over the same entries, alternating, median of rounds;
3. FOLDS more folds (or as many as fit in BUDGET seconds) with maintenance on,
   every MAINTAIN_EVERY folds (compaction, checkpoint, log cleanup, vacuum),
   then one more maintenance.

Time is compressed: at one fold a second, 20,000 folds are 5.5 hours; here
they take minutes. So the maintenance settings are the defaults at the pace
the warm folds measured: the log keeps commits, and the store removed files,
for as many folds as the defaults (5 minutes, 1 minute) keep at one fold a
second, and maintenance runs every 300 folds (the default 5 minutes).

Figures (JSON keys):
- ``fold_cost_growth``: median fold time (the driver's case: one Archive for
  the whole run) of the last 100 folds / of the first 100 (target <= 1.5);
- ``first_entry_ms_growth``: a merge-read's time to its first entry, with a
  fresh Archive, on the table as it is at the end / on a copy of it taken
  after the first 100 folds, the two alternating in the same minute, median of
  SAMPLES each (target <= 1.5);
- ``fresh_fold_cost_growth`` (a fold with a fresh Archive, as a CLI call: the
  table opened each time) and ``fold_cost_growth_interleaved`` (one Archive
  each): a fold of a stream of its own into the late table / into the early
  copy, alternating: the growth with the machine's drift left out;
- ``log_bytes``: the table's log after the last maintenance (target <= 1 MiB);
- ``live_read_ratio``: merge-read entries/s of the LIVE live entries / raw
  XRANGE entries/s, with WARM folds behind them (target >= 0.8);
- ``fold_cost_growth_unmaintained``: median of the last 50 / of the first 50
  of the WARM direct folds (2,000 by default), no maintenance: what a script
  or a cron running ``retain archive fold`` meets (target <= 1.5); the first
  and the last 50 run minutes apart, so a shared machine's drift is in it:
  ``fold_cost_growth_unmaintained_interleaved`` is the same growth with the
  drift left out (folds of a stream of its own into the table after WARM
  folds / into a copy of it taken after 50, alternating, 50 each);
- ``rss_growth_after_maintenance``: the process's RSS after the third
  maintenance / after the first (target <= 1.1).

Run: python3 dev.py bench archive_age   (or bench/archive_age.py --warm 200 --folds 1000 for a quick look)
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import statistics
import tempfile
import time
from collections import deque
from collections.abc import Callable, Iterator

from retain.archive import Archive, MaintenanceSettings, StreamId, fold, maintain, read
from retain.clock import utc_now
from retain.servers import RedisServer
from retain.streams import StreamRef

FOLD_ENTRIES = 10
COUNT = 1_000
ROUNDS = 9
SAMPLES = 30
DEFAULTS = MaintenanceSettings()


def at_pace(folds_per_second: float) -> MaintenanceSettings:
    """The default maintenance, its retentions shrunk from one fold a second to ``folds_per_second``."""
    return MaintenanceSettings(every=None, log_retention=DEFAULTS.log_retention / folds_per_second,
                               vacuum_retention=DEFAULTS.vacuum_retention / folds_per_second)


def options() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--warm", type=int, default=2_000, help="folds before the live read, no maintenance")
    parser.add_argument("--folds", type=int, default=20_000, help="folds after it, maintenance on")
    parser.add_argument("--budget", type=float, default=210.0, help="most seconds for those folds")
    parser.add_argument("--live", type=int, default=100_000, help="live entries of the live read")
    parser.add_argument("--maintain-every", type=int, default=int(DEFAULTS.every.total_seconds()),
                        help="folds between two maintenances (the default: one a second over its 5 minutes)")
    return parser.parse_args()


def append(conn, key: str, count: int) -> None:
    pipe = conn.pipeline(transaction=False)
    for index in range(count):
        pipe.xadd(key, {"player": f"p{index % 97}", "game": "codemojex", "n": str(index), "score": "12.5"})
    pipe.execute()


def rss_bytes() -> int:
    """The process's resident set now (not its peak)."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def timed(function: Callable[[], object]) -> float:
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def raw_entries(conn, key: str, low: StreamId) -> Iterator[object]:
    while True:
        chunk = conn.xrange(key, str(low), "+", count=COUNT)
        yield from chunk
        if len(chunk) < COUNT:
            return
        low = StreamId.parse(chunk[-1][0]).successor()


def consumed(entries: Iterator[object]) -> tuple[float, int]:
    gc.collect()
    counter: deque = deque(maxlen=1)
    start = time.perf_counter()
    counter.extend(enumerate(entries, 1))
    return time.perf_counter() - start, counter[0][0] if counter else 0


def alternating(early: Callable[[], float], late: Callable[[], float], rounds: int) -> tuple[float, float]:
    """Medians of ``early()`` and ``late()`` called in turn, which goes first alternating: drift hits both alike."""
    firsts: list[float] = []
    lasts: list[float] = []
    for round_index in range(rounds):
        pair = [(firsts, early), (lasts, late)]
        for times, function in (pair if round_index % 2 == 0 else pair[::-1]):
            times.append(function())
    return statistics.median(firsts), statistics.median(lasts)


def main() -> None:
    args = options()
    stream = StreamRef("bench", "aging")
    with RedisServer() as server, tempfile.TemporaryDirectory(prefix="retain-bench-age-") as directory:
        conn = server.client()
        table, early_copy, copy_50 = f"{directory}/table", f"{directory}/early", f"{directory}/after-50"
        archive = Archive(table)
        fold_times: list[float] = []

        def one_fold(into: Archive, key: StreamRef = stream) -> float:
            append(conn, key.key, FOLD_ENTRIES)
            return timed(lambda: fold(conn, key, into, count=COUNT))

        def first_entry(url: str) -> float:
            fresh = Archive(url)
            return timed(lambda: next(read(conn, stream, fresh, count=COUNT)))

        started = time.monotonic()
        for _ in range(args.warm):
            fold_times.append(one_fold(archive))
            if len(fold_times) == 50:
                shutil.copytree(table, copy_50)  # the table after 50 folds, against the unmaintained one below
            if len(fold_times) == 100:
                shutil.copytree(table, early_copy)  # the table after 100 folds, to measure against at the end
        warm_seconds = time.monotonic() - started
        pace = args.warm / warm_seconds
        settings = at_pace(pace)
        objects_warm, log_warm = archive.log_size()
        print(f"{args.warm} folds of {FOLD_ENTRIES} entries in {warm_seconds:.1f} s ({pace:.1f} a second), no "
              f"maintenance: {len(archive.state(stream).files)} files, log {objects_warm} objects, {log_warm} bytes; "
              f"so the log keeps {settings.log_retention.total_seconds():.1f} s, removed files "
              f"{settings.vacuum_retention.total_seconds():.2f} s")
        # The unmaintained growth without the drift: the table after 50 folds and after WARM, side by side.
        after_50 = Archive(copy_50)
        unmaintained_early, unmaintained_late = alternating(
            lambda: one_fold(after_50, StreamRef("bench", "side-50")),
            lambda: one_fold(archive, StreamRef("bench", "side-warm")), 50)

        # The live read, with the warm folds behind it.
        watermark = archive.watermark(stream)
        assert watermark is not None
        append(conn, stream.key, args.live)
        live, raw = alternating(
            lambda: consumed(read(conn, stream, archive, start=watermark.successor(), count=COUNT))[0],
            lambda: consumed(raw_entries(conn, stream.key, watermark.successor()))[0], ROUNDS)
        live_read_ratio = raw / live
        print(f"live read of {args.live} entries with {args.warm} folds behind: {args.live / live:,.0f} e/s merged, "
              f"{args.live / raw:,.0f} e/s raw XRANGE: {live_read_ratio:.3f}")
        fold(conn, stream, archive, count=COUNT)  # the live entries, folded: the next folds are small again

        # Folds with maintenance on, within the budget.
        maintenances: list[float] = []
        rss: list[int] = []
        started = time.monotonic()
        done = 0
        while done < args.folds and time.monotonic() - started < args.budget:
            fold_times.append(one_fold(archive))
            done += 1
            if done % args.maintain_every == 0:
                maintenances.append(timed(lambda: maintain(archive, settings, now=utc_now())))
                rss.append(rss_bytes())
        maintained_seconds = time.monotonic() - started
        maintenances.append(timed(lambda: maintain(archive, settings, now=utc_now())))
        rss.append(rss_bytes())
        assert len(rss) >= 3, "fewer than 3 maintenances: raise --folds or --budget, or lower --maintain-every"
        objects, log_bytes = archive.log_size()
        state = archive.state(stream)
        assert state.entries == (args.warm + done) * FOLD_ENTRIES + args.live

        # The early copy and the table as it is now, side by side.
        early_first, late_first = alternating(lambda: first_entry(early_copy), lambda: first_entry(table), SAMPLES)
        early_side, late_side = StreamRef("bench", "early-side"), StreamRef("bench", "late-side")
        early_fresh, late_fresh = alternating(lambda: one_fold(Archive(early_copy), early_side),
                                              lambda: one_fold(Archive(table), late_side), SAMPLES)
        early_archive, late_archive = Archive(early_copy), Archive(table)
        early_kept, late_kept = alternating(lambda: one_fold(early_archive, early_side),
                                            lambda: one_fold(late_archive, late_side), 100)
        conn.close()

    first, last = statistics.median(fold_times[:100]), statistics.median(fold_times[-100:])
    growth = last / first
    unmaintained = statistics.median(fold_times[args.warm - 50:args.warm]) / statistics.median(fold_times[:50])
    rss_growth = rss[2] / rss[0]
    print(f"{done} more folds in {maintained_seconds:.1f} s with maintenance every {args.maintain_every} "
          f"(median {statistics.median(maintenances):.2f} s, {len(maintenances)} runs): {len(state.files)} files, "
          f"log {objects} objects, {log_bytes} bytes after the last")
    rows = [("fold, one Archive (run)", first, last), ("fold, one Archive (side by side)", early_kept, late_kept),
            ("fold, fresh Archive", early_fresh, late_fresh), ("merge-read's 1st entry", early_first, late_first)]
    print(f"{'':<34} {'early':>9} {'late':>9} {'growth':>7}")
    for label, early, late in rows:
        print(f"{label:<34} {early * 1e3:7.2f}ms {late * 1e3:7.2f}ms {late / early:7.3f}")
    print(f"RSS after each maintenance: {', '.join(f'{value / 2**20:.0f}' for value in rss)} MiB")
    print(json.dumps({"bench": "archive_age", "fold_cost_growth": round(growth, 4),
                      "fold_cost_growth_unmaintained": round(unmaintained, 4),
                      "fold_cost_growth_unmaintained_interleaved": round(unmaintained_late / unmaintained_early, 4),
                      "rss_growth_after_maintenance": round(rss_growth, 4),
                      "rss_mib_after_maintenances": [round(value / 2**20, 1) for value in rss],
                      "first_entry_ms_growth": round(late_first / early_first, 4), "log_bytes": log_bytes,
                      "live_read_ratio": round(live_read_ratio, 4),
                      "fresh_fold_cost_growth": round(late_fresh / early_fresh, 4),
                      "fold_cost_growth_interleaved": round(late_kept / early_kept, 4),
                      "warm_folds": args.warm, "maintained_folds": done, "fold_ms_first": round(first * 1e3, 3),
                      "fold_ms_last": round(last * 1e3, 3), "first_entry_ms_early": round(early_first * 1e3, 3),
                      "first_entry_ms_late": round(late_first * 1e3, 3), "log_bytes_before_maintenance": log_warm,
                      "log_objects": objects, "files_after": len(state.files)}))


if __name__ == "__main__":
    main()
