"""Trim through retain against a raw ``execute_command("XTRIM", ...)`` on the same streams, same run.

Two workloads, each timed in alternating rounds (median of ROUNDS):
- noop: 20,000 trims whose window already holds the whole stream; pure per-call overhead;
- removing: 200 streams of 2,000 entries trimmed exactly to 1,000, refilled between rounds.

Run: python3 dev.py bench trim
Prints a table, then one JSON line: {"ratio": retain time / raw time (noop), ...}.
"""

from __future__ import annotations

import json
import statistics
import time

from retain.servers import RedisServer
from retain.streams import StreamRef, trim
from retain.windows import MaxLen

ROUNDS = 5
NOOP_CALLS = 20_000
STREAMS, LENGTH, KEEP = 200, 1_000, 500


def fill(conn, refs):
    pipe = conn.pipeline(transaction=False)
    for ref in refs:
        pipe.delete(ref.key)
        for index in range(LENGTH):
            pipe.xadd(ref.key, {"player": "ada", "guess": "🍎", "outcome": "miss", "i": str(index)})
    pipe.execute()


def alternate(pair, flip):
    return pair[::-1] if flip else pair


def timed(function) -> float:
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def workloads(conn, noop_ref: StreamRef, refs: list[StreamRef]):
    """The four timed workloads: a no-op trim through retain and raw, a removing trim through retain and raw."""
    window, exact = MaxLen(1_000_000), MaxLen(KEEP, approx=False)

    def noop_retain():
        for _ in range(NOOP_CALLS):
            trim(conn, noop_ref, window)

    def noop_raw():
        for _ in range(NOOP_CALLS):
            conn.execute_command("XTRIM", noop_ref.key, "MAXLEN", "~", "1000000")

    def removing_retain():
        for ref in refs:
            trim(conn, ref, exact)

    def removing_raw():
        for ref in refs:
            conn.execute_command("XTRIM", ref.key, "MAXLEN", "=", str(KEEP))

    return noop_retain, noop_raw, removing_retain, removing_raw


def main() -> None:
    with RedisServer() as server:
        conn = server.client()
        noop_ref = StreamRef("bench", "noop")
        for index in range(10):
            conn.xadd(noop_ref.key, {"i": str(index)})
        refs = [StreamRef("bench", f"s{i}") for i in range(STREAMS)]
        noop_retain, noop_raw, removing_retain, removing_raw = workloads(conn, noop_ref, refs)

        results = {"noop_retain": [], "noop_raw": [], "removing_retain": [], "removing_raw": []}
        for round_index in range(ROUNDS):
            # Alternate which side goes first so drift on a shared machine hits both alike.
            flip = round_index % 2 == 1
            for side, function in alternate([("retain", noop_retain), ("raw", noop_raw)], flip):
                results[f"noop_{side}"].append(timed(function))
            for side, function in alternate([("retain", removing_retain), ("raw", removing_raw)], flip):
                fill(conn, refs)
                results[f"removing_{side}"].append(timed(function))
        conn.close()

    median = {name: statistics.median(times) for name, times in results.items()}
    noop_ratio = median["noop_retain"] / median["noop_raw"]
    removing_ratio = median["removing_retain"] / median["removing_raw"]
    print(f"{'workload':<10} {'retain':>12} {'raw XTRIM':>12} {'ratio':>7}")
    print(f"{'noop':<10} {median['noop_retain'] / NOOP_CALLS * 1e6:>9.1f} us {median['noop_raw'] / NOOP_CALLS * 1e6:>9.1f} us "
          f"{noop_ratio:>7.3f}   ({NOOP_CALLS} calls, median of {ROUNDS})")
    print(f"{'removing':<10} {median['removing_retain'] * 1e3:>9.1f} ms {median['removing_raw'] * 1e3:>9.1f} ms "
          f"{removing_ratio:>7.3f}   ({STREAMS} streams {LENGTH}->{KEEP}, median of {ROUNDS})")
    print(json.dumps({"bench": "trim", "ratio": round(noop_ratio, 4), "ratio_removing": round(removing_ratio, 4),
                      "retain_us_per_call": round(median["noop_retain"] / NOOP_CALLS * 1e6, 2),
                      "raw_us_per_call": round(median["noop_raw"] / NOOP_CALLS * 1e6, 2),
                      "removing_retain_ms": round(median["removing_retain"] * 1e3, 2),
                      "removing_raw_ms": round(median["removing_raw"] * 1e3, 2)}))


if __name__ == "__main__":
    main()
