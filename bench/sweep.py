"""One beat of the retention driver over 1,000 and 10,000 streams: pipelined against one trim after another.

The baseline is the seed's shape of a sweep, in the same run on the same
streams: decide the beat, then call ``trim`` once per stream, each a round trip.
The driver sends the same XTRIMs in one pipeline (``RetentionDriver.sweep``).

Two beats per size, each timed in alternating rounds (median of ROUNDS):
- trimming: every stream holds its window plus one whole node, and the beat
  removes that node (streams refilled between rounds, untimed);
- idle: the beat right after, with nothing to remove (steady state under ``~``).

Streams spread over 50 queues; ``stream-node-max-entries`` is set to NODE so a
node is small and the fill is quick.

Run: python3 dev.py bench sweep
Prints a table, then one JSON line: {"ratio": sequential / pipelined time, trimming beat at 1,000 streams, ...}.
"""

from __future__ import annotations

import json
import statistics
import time

from retain.servers import RedisServer
from retain.clock import utc_now
from retain.retention import Policy, RetentionDriver, decide
from retain.streams import StreamRef, trim
from retain.windows import MaxLen

ROUNDS = 5
SIZES = (1_000, 10_000)
QUEUES = 50
NODE = 10   # entries per macro-node
KEEP = 10   # the window: MAXLEN ~ KEEP


def append(conn, refs, count):
    pipe = conn.pipeline(transaction=False)
    for ref in refs:
        for index in range(count):
            pipe.xadd(ref.key, {"player": "ada", "guess": "🍎", "outcome": "miss", "i": str(index)})
    pipe.execute()


def sequential(conn, policy):
    """The seed's sweep: decide, then one trim per call, one round trip each."""
    removed = 0
    for call in decide(policy, utc_now()):
        removed += trim(conn, call.entry.stream, call.window)
    return removed


def timed(function):
    start = time.perf_counter()
    result = function()
    return time.perf_counter() - start, result


def measure(conn, size):
    refs = [StreamRef(f"q{index % QUEUES}", f"s{index}") for index in range(size)]
    policy = Policy([(ref, MaxLen(KEEP)) for ref in refs])
    driver = RetentionDriver(conn, policy)
    conn.delete(*[ref.key for ref in refs])
    append(conn, refs, KEEP)
    times = {f"{beat}_{side}": [] for beat in ("trimming", "idle") for side in ("pipelined", "sequential")}
    sides = [("pipelined", lambda: driver.sweep().removed), ("sequential", lambda: sequential(conn, policy))]
    for round_index in range(ROUNDS):
        # Alternate which side goes first so drift on a shared machine hits both alike.
        for side, beat in (sides[::-1] if round_index % 2 else sides):
            append(conn, refs, NODE)
            elapsed, removed = timed(beat)
            assert removed == size * NODE, f"{side} removed {removed}, expected {size * NODE}"
            times[f"trimming_{side}"].append(elapsed)
            elapsed, removed = timed(beat)
            assert removed == 0, f"{side} idle beat removed {removed}"
            times[f"idle_{side}"].append(elapsed)
    conn.delete(*[ref.key for ref in refs])
    return {name: statistics.median(values) for name, values in times.items()}


def main() -> None:
    with RedisServer(config={"stream-node-max-entries": str(NODE), "stream-node-max-bytes": "0"}) as server:
        conn = server.client()
        results = {size: measure(conn, size) for size in SIZES}
        conn.close()

    print(f"{'streams':>8} {'beat':<9} {'pipelined':>11} {'sequential':>11} {'ratio':>7}   (median of {ROUNDS})")
    figures: dict[str, float] = {}
    for size, median in results.items():
        for beat in ("trimming", "idle"):
            piped, seq = median[f"{beat}_pipelined"], median[f"{beat}_sequential"]
            print(f"{size:>8} {beat:<9} {piped * 1e3:>8.2f} ms {seq * 1e3:>8.1f} ms {seq / piped:>7.1f}")
            figures[f"ratio_{beat}_{size}"] = round(seq / piped, 2)
            figures[f"pipelined_{beat}_{size}_ms"] = round(piped * 1e3, 3)
            figures[f"sequential_{beat}_{size}_ms"] = round(seq * 1e3, 3)
    print(json.dumps({"bench": "sweep", "ratio": figures["ratio_trimming_1000"], **figures}))


if __name__ == "__main__":
    main()
