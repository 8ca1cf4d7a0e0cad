"""Producers append as fast as they can while the driver beats: how long do the streams get, and does memory stay flat?

PRODUCERS processes append, in pipelined batches, to STREAMS streams declared
under ``MaxLen(N)`` (``~``) with a beat every T seconds, for DURATION seconds.
The bound is what one beat can let through: the window, what producers add in
one tick, and one macro-node that ``~`` may keep (stream-node-max-entries):

    bound = N + rate x T + one node

``rate`` is per stream. The producers share two cores with Redis and this
process, so their pace drifts over a run; the bound is taken with the busiest
tick's rate (the most entries a stream gained in any T-second window), and the
figure with the mean rate is printed beside it.

The baseline, in the same run: producer 0 also appends to a control stream that
is not declared, so it is never trimmed (a stream you want unbounded is simply
left out of the policy).

Sampled over the run: every stream's XLEN and the producers' counters every
SAMPLE_EVERY seconds (the peak length is the figure), and MEMORY USAGE of the
declared streams and of the control every MEMORY_EVERY seconds. Once the window
is full the declared streams' memory must stay flat while the control's grows.

Then the archived run: ARCHIVED streams (1,000 by default) declared
``MaxLen(ARCHIVED_WINDOW)`` with ``archive = true`` on a local archive (a
temporary directory), beaten by hand ARCHIVED_BEATS times: before each beat
ARCHIVED_RATE entries are appended to every stream (not timed), then one
``sweep()`` folds every stream's overflow into the archive in one Delta commit
and trims it. The figure is the median beat (``archived_beat_ms_<N>``; the
first two beats, which create the table and read it cold, are left out), to
keep under the tick of 1 s. The baseline, in the same run: the same streams
declared without archiving (``plain_beat_ms_<N>``), and the ratio between them.

Run: python3 dev.py bench bounded [--duration 60] [--tick 1] [--window 10000] [--archived 1000]
Prints a table, then one JSON line: {"peak_over_bound": peak length / bound, ..., "archived_beat_ms_1000": ...}.
"""

from __future__ import annotations

import argparse
import bisect
import json
import multiprocessing
import statistics
import tempfile
import time

import redis

from retain.archive import Archive
from retain.retention import RetentionDriver, StreamPolicy
from retain.servers import RedisServer
from retain.streams import StreamRef
from retain.windows import MaxLen

BATCH = 100             # entries per producer round trip
SAMPLE_EVERY = 0.01     # seconds between XLEN samples
MEMORY_EVERY = 0.25     # seconds between MEMORY USAGE samples
FIELDS = {"player": "ada", "guess": "🍎", "outcome": "miss", "round": "17"}
CONTROL = "emq:{bench-control}:stream:undeclared"


def produce(port: int, slots: list[tuple[int, str]], go: float, deadline: float, counters) -> None:
    """From ``go`` until ``deadline``, append to each ``(slot, key)`` in turn, counting into ``counters[slot]``."""
    conn = redis.Redis(port=port)
    while time.time() < go:
        time.sleep(0.001)
    turn = 0
    while time.time() < deadline:
        slot, key = slots[turn % len(slots)]
        turn += 1
        pipe = conn.pipeline(transaction=False)
        for _ in range(BATCH):
            pipe.xadd(key, FIELDS)
        pipe.execute()
        counters[slot] += BATCH


def busiest_tick(samples: list[tuple[float, list[int], list[int]]], slot: int, tick: float) -> int:
    """The most entries stream ``slot`` gained in any ``tick``-second window of the samples."""
    times = [t for t, _, _ in samples]
    most = 0
    for t, counts, _ in samples:
        start = max(0, bisect.bisect_left(times, t - tick) - 1)  # the sample at or just before t - tick
        most = max(most, counts[slot] - samples[start][1][slot])
    return most


def slots_of(number: int, keys: list[str], streams: int, producers: int) -> list[tuple[int, str]]:
    """The (slot, key) pairs producer ``number`` appends to: every ``producers``-th stream, the control on the
    first."""
    slots = [(slot, keys[slot]) for slot in range(number, streams, producers)]
    return slots + [(streams, CONTROL)] if number == 0 else slots


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=60.0, help="seconds the producers append (default 60)")
    parser.add_argument("--tick", type=float, default=1.0, help="seconds between beats (default 1)")
    parser.add_argument("--window", type=int, default=10_000, help="MaxLen N of every declared stream (default 10000)")
    parser.add_argument("--streams", type=int, default=4, help="declared streams (default 4)")
    parser.add_argument("--producers", type=int, default=2, help="producer processes (default 2)")
    parser.add_argument("--archived", type=int, default=1000,
                        help="streams of the archived run (default 1000; 0 skips it)")
    parser.add_argument("--archived-beats", type=int, default=12, help="beats of the archived run (default 12)")
    parser.add_argument("--archived-rate", type=int, default=20,
                        help="entries appended to each archived stream before each beat (default 20)")
    parser.add_argument("--archived-window", type=int, default=100,
                        help="MaxLen of every archived stream (default 100)")
    args = parser.parse_args()
    archived = archived_run(args) if args.archived > 0 else {}

    refs = [StreamRef(f"bench{index % 2}", f"feed{index}") for index in range(args.streams)]
    keys = [ref.key for ref in refs] + [CONTROL]
    with RedisServer() as server:
        conn = server.client()
        node = int(conn.config_get("stream-node-max-entries")["stream-node-max-entries"])
        spawn = multiprocessing.get_context("spawn")
        counters = spawn.Array("q", len(keys), lock=False)  # one writer per slot
        go = time.time() + 2.0   # time for the producers to start and import
        deadline = go + args.duration
        producers = [spawn.Process(target=produce, args=(server.port, slots_of(number, keys, len(refs), args.producers),
                                                         go, deadline, counters))
                     for number in range(args.producers)]
        for producer in producers:
            producer.start()
        driver = RetentionDriver(server.client(), [(ref, MaxLen(args.window)) for ref in refs], tick=args.tick)
        samples: list[tuple[float, list[int], list[int]]] = []   # (t, appended per slot, length per slot)
        memory: list[tuple[float, int, int]] = []                # (t, declared bytes, control bytes)
        while time.time() < go:
            time.sleep(0.001)
        started = time.monotonic()
        next_memory = started
        with driver:
            while any(producer.is_alive() for producer in producers):
                appended = list(counters)
                pipe = conn.pipeline(transaction=False)
                for key in keys:
                    pipe.xlen(key)
                samples.append((time.monotonic() - started, appended, pipe.execute()))
                if time.monotonic() >= next_memory:
                    declared = sum(conn.memory_usage(key, samples=0) or 0 for key in keys[:-1])
                    memory.append((time.monotonic() - started, declared, conn.memory_usage(CONTROL) or 0))
                    next_memory += MEMORY_EVERY
                time.sleep(SAMPLE_EVERY)
            for producer in producers:
                producer.join()
        beats = driver.beats
        at_end = [conn.xlen(key) for key in keys]
        driver.sweep()   # one more beat once the producers have stopped: back to the window
        final = [conn.xlen(key) for key in keys]
        appended = list(counters)
        driver.conn.close()
        conn.close()

    rows = []
    for slot, key in enumerate(keys[:-1]):
        peak = max(lengths[slot] for _, _, lengths in samples)
        mean_rate = appended[slot] / args.duration
        busiest = busiest_tick(samples, slot, args.tick)
        bound = args.window + busiest + node
        bound_mean = args.window + mean_rate * args.tick + node
        rows.append((key, appended[slot], mean_rate, busiest, peak, at_end[slot], final[slot], bound, bound_mean))
    worst = max(rows, key=lambda row: row[4] / row[7])
    peak_over_bound = worst[4] / worst[7]
    peak_over_mean_bound = max(row[4] / row[8] for row in rows)
    longest = max(row[4] for row in rows)

    # Flat once full: the declared streams' memory in the last third against the middle third.
    def third(lo: float, hi: float) -> int:
        return max(declared for t, declared, _ in memory if lo * args.duration <= t < hi * args.duration)
    growth = third(2 / 3, 1.01) / third(1 / 3, 2 / 3)
    control_growth = memory[-1][2] / max(1, [c for t, _, c in memory if t >= args.duration / 3][0])

    print(f"{args.producers} producers, {args.streams} streams under MAXLEN ~ {args.window:,}, tick {args.tick}s, "
          f"{args.duration:.0f}s, {beats} beats, node {node} entries")
    print(f"{'t':>5} {'declared MB (max)':>18} {'control MB':>11} {'control length':>15}")
    window = max(1.0, args.duration / 12)
    edge = 0.0
    while edge < args.duration:
        part = [m for m in memory if edge <= m[0] < edge + window]
        if part:
            length = next((lengths[-1] for t, _, lengths in samples if t >= part[-1][0]), final[-1])
            print(f"{edge + window:>4.0f}s {max(d for _, d, _ in part) / 2**20:>18.2f} "
                  f"{part[-1][2] / 2**20:>11.2f} {length:>15,}")
        edge += window
    print(f"{'stream':<28} {'appended':>10} {'mean/s':>8} {'busiest tick':>12} {'peak':>8} {'bound':>8} "
          f"{'at end':>7} {'after a last beat':>17}")
    for key, total, mean_rate, busiest, peak, end, last, bound, _ in rows:
        print(f"{key:<28} {total:>10,} {mean_rate:>8,.0f} {busiest:>12,} {peak:>8,} {bound:>8,.0f} {end:>7,} {last:>17,}")
    print(f"peak / (N + busiest tick + node) = {peak_over_bound:.3f}   (with the mean rate: {peak_over_mean_bound:.3f})")
    print(f"declared memory, max in the last third / max in the middle third = {growth:.3f}; "
          f"the control's memory grew {control_growth:.2f}x over the last two thirds, to {final[-1]:,} entries "
          f"({final[-1] / longest:.1f}x the longest declared stream's peak)")
    print(json.dumps({
        "bench": "bounded", "peak_over_bound": round(peak_over_bound, 4),
        "peak_over_bound_mean_rate": round(peak_over_mean_bound, 4),
        "peak_length": worst[4], "bound": round(worst[7]), "busiest_tick": worst[3], "longest_peak": longest,
        "mean_rate_per_stream": round(sum(row[2] for row in rows) / len(rows)),
        "window": args.window, "tick": args.tick, "node": node, "duration": args.duration, "beats": beats,
        "streams": args.streams, "producers": args.producers,
        "declared_memory_growth": round(growth, 4), "declared_memory_bytes_last": memory[-1][1],
        "control_length": final[-1], "control_memory_growth": round(control_growth, 3),
        "control_over_peak": round(final[-1] / longest, 2),
        **archived,
    }))


def archived_run(args: argparse.Namespace) -> dict[str, object]:
    """The archived run (see the module docstring): its figures for the JSON line, printed as it goes."""
    streams = args.archived
    refs = [StreamRef(f"archived{index % 16}", f"feed{index}") for index in range(streams)]

    def feed(conn: redis.Redis) -> None:
        pipe = conn.pipeline(transaction=False)
        for ref in refs:
            for _ in range(args.archived_rate):
                pipe.xadd(ref.key, FIELDS)
        pipe.execute()

    def beats(conn: redis.Redis, driver: RetentionDriver) -> list[float]:
        elapsed = []
        for _ in range(args.archived_beats):
            feed(conn)
            report = driver.sweep()
            if report.failures:
                raise SystemExit(f"a beat failed: {next(iter(report.failures.values()))}")
            elapsed.append(report.elapsed * 1e3)
        return elapsed

    with RedisServer() as server, tempfile.TemporaryDirectory(prefix="retain-bench-archive-") as directory:
        conn = server.client()
        for ref in refs:  # the window full before the first beat, as in a steady state
            conn.xadd(ref.key, FIELDS)
        feed(conn)
        window = MaxLen(args.archived_window)
        plain = RetentionDriver(conn, [(ref, window) for ref in refs], tick=args.tick)
        plain_ms = beats(conn, plain)[2:]
        archive = Archive(f"file://{directory}/archive")
        driver = RetentionDriver(conn, [StreamPolicy(ref, window, archive=True) for ref in refs], archive=archive,
                                 tick=args.tick, archive_deadline=600)
        archived_ms = beats(conn, driver)
        folded = archive.version
        conn.close()
    steady = archived_ms[2:]
    median, plain_median = statistics.median(steady), statistics.median(plain_ms)
    kept = sum(1 for ms in steady if ms <= args.tick * 1e3) / len(steady)
    print(f"archived run: {streams:,} streams under MAXLEN ~ {args.archived_window} with archive = true on a local "
          f"archive, {args.archived_rate} entries each before each of {args.archived_beats} beats "
          f"({folded + 1} commits in all)")
    print(f"  beat ms, steady (first two left out): median {median:,.0f}, max {max(steady):,.0f}; first two "
          f"{archived_ms[0]:,.0f}, {archived_ms[1]:,.0f}; beats within the {args.tick:g}s tick: {kept:.0%}")
    print(f"  baseline, the same streams without archiving: median {plain_median:,.1f} ms; "
          f"archived / plain = {median / plain_median:,.1f}x")
    return {
        f"archived_beat_ms_{streams}": round(median, 1), f"archived_beat_ms_max_{streams}": round(max(steady), 1),
        f"plain_beat_ms_{streams}": round(plain_median, 2),
        "archived_over_plain": round(median / plain_median, 1), "archived_beats_within_tick": round(kept, 3),
        "archived_rate": args.archived_rate, "archived_window": args.archived_window,
    }


if __name__ == "__main__":
    main()
