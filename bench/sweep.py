"""One beat of the retention driver over 1,000 and 10,000 streams: pipelined against one trim after another.

The baseline is the braced shape of a sweep, in the same run on the same
streams: decide the beat, then call ``trim`` once per stream, each a round trip.
The driver sends the same XTRIMs in one pipeline (``RetentionDriver.sweep``).

Two beats per size, each timed in alternating rounds (median of ROUNDS):
- trimming: every stream holds its window plus one whole node, and the beat
  removes that node (streams refilled between rounds, untimed);
- idle: the beat right after, with nothing to remove (steady state under ``~``).

Streams spread over 50 queues; ``stream-node-max-entries`` is set to NODE so a
node is small and the fill is quick.

Then the floor, at ``--floor-streams`` (100,000) streams: the same beats of the
driver against the least a client can do for them, measured in the same run on
the same streams — the very commands the driver's beat sends (its XINFO GROUPS,
XLEN and XTRIM per stream), packed once before the clock starts, written to a
raw socket in one write, and the replies parsed with hiredis and counted. What
the driver costs beyond it is its own work: deciding the beat, packing what is
not cached, reading the replies into a report. ``ratio_floor_100000`` is the
larger of the trimming and the idle beat's driver / floor ratio (target ≤ 1.3).

Run: python3 dev.py bench sweep [--sizes 1000,10000] [--rounds 5] [--floor-streams 100000] [--floor-rounds 3]
Prints a table, then one JSON line: {"ratio": sequential / pipelined time, trimming beat at 1,000 streams,
..., "ratio_floor_100000": driver / floor, ...}. Figures are noisy on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import time

import hiredis

from retain.clock import utc_now
from retain.retention import Policy, RetentionDriver, decide
from retain.servers import RedisServer
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


def measure(conn, size, rounds=ROUNDS):
    refs = [StreamRef(f"q{index % QUEUES}", f"s{index}") for index in range(size)]
    policy = Policy([(ref, MaxLen(KEEP)) for ref in refs])
    driver = RetentionDriver(conn, policy)
    conn.delete(*[ref.key for ref in refs])
    append(conn, refs, KEEP)
    times = {f"{beat}_{side}": [] for beat in ("trimming", "idle") for side in ("pipelined", "sequential")}
    sides = [("pipelined", lambda: driver.sweep().removed), ("sequential", lambda: sequential(conn, policy))]
    for round_index in range(rounds):
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


def floor_beat(port: int, packed: bytes, replies: int) -> int:
    """The least a client does for a beat: one write of pre-packed commands, the replies parsed and counted."""
    with socket.create_connection(("127.0.0.1", port)) as sock:
        reader = hiredis.Reader()
        buffer = bytearray(1 << 20)
        view = memoryview(buffer)
        start = time.perf_counter()
        sock.sendall(packed)
        removed = got = 0
        while got < replies:
            size = sock.recv_into(buffer)
            reader.feed(view[:size])
            while (reply := reader.gets()) is not False:
                got += 1
                if type(reply) is int:
                    removed += reply
        elapsed = time.perf_counter() - start
    return elapsed, removed


def measure_floor(conn, port: int, size: int, rounds: int) -> dict[str, float]:
    """The driver's trimming and idle beats at ``size`` streams, against the floor of the same commands."""
    refs = [StreamRef(f"q{index % QUEUES}", f"s{index}") for index in range(size)]
    policy = Policy([(ref, MaxLen(KEEP)) for ref in refs])
    driver = RetentionDriver(conn, policy)
    commands = driver._commands(decide(policy, utc_now()))
    connection = conn.connection_pool.get_connection()
    packed = b"".join(b"".join(connection.pack_command(*command)) for command in commands)
    conn.connection_pool.release(connection)
    lengths = sum(1 for command in commands if command[0] == "XLEN")
    conn.delete(*[ref.key for ref in refs])
    append(conn, refs, KEEP)
    times: dict[str, list[float]] = {f"{beat}_{side}": [] for beat in ("trimming", "idle") for side in ("driver", "floor")}
    sides = [("driver", lambda: timed(lambda: driver.sweep().removed)),
             ("floor", lambda: floor_beat(port, packed, len(commands)))]
    for round_index in range(rounds):
        for side, beat in (sides[::-1] if round_index % 2 else sides):
            append(conn, refs, NODE)
            elapsed, removed = beat()
            if side == "floor":
                removed -= KEEP * lengths + NODE * lengths  # the floor sums XLEN replies too (before the trim)
            assert removed == size * NODE, f"{side} removed {removed}, expected {size * NODE}"
            times[f"trimming_{side}"].append(elapsed)
            elapsed, removed = beat()
            if side == "floor":
                removed -= KEEP * lengths
            assert removed == 0, f"{side} idle beat removed {removed}"
            times[f"idle_{side}"].append(elapsed)
    conn.delete(*[ref.key for ref in refs])
    return {name: statistics.median(values) for name, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="stream counts for driver vs sequential")
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--floor-streams", type=int, default=100_000, help="streams for driver vs floor (0: skip)")
    parser.add_argument("--floor-rounds", type=int, default=3)
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",") if size]
    with RedisServer(config={"stream-node-max-entries": str(NODE), "stream-node-max-bytes": "0"}) as server:
        conn = server.client()
        results = {size: measure(conn, size, args.rounds) for size in sizes}
        floor = measure_floor(conn, server.port, args.floor_streams, args.floor_rounds) if args.floor_streams else None
        conn.close()

    print(f"{'streams':>8} {'beat':<9} {'pipelined':>11} {'sequential':>11} {'ratio':>7}   (median of {args.rounds})")
    figures: dict[str, float] = {}
    for size, median in results.items():
        for beat in ("trimming", "idle"):
            piped, seq = median[f"{beat}_pipelined"], median[f"{beat}_sequential"]
            print(f"{size:>8} {beat:<9} {piped * 1e3:>8.2f} ms {seq * 1e3:>8.1f} ms {seq / piped:>7.1f}")
            figures[f"ratio_{beat}_{size}"] = round(seq / piped, 2)
            figures[f"pipelined_{beat}_{size}_ms"] = round(piped * 1e3, 3)
            figures[f"sequential_{beat}_{size}_ms"] = round(seq * 1e3, 3)
    if floor is not None:
        size = args.floor_streams
        print(f"\n{'streams':>8} {'beat':<9} {'driver':>11} {'floor':>11} {'ratio':>7}   (median of {args.floor_rounds})")
        for beat in ("trimming", "idle"):
            driver, least = floor[f"{beat}_driver"], floor[f"{beat}_floor"]
            print(f"{size:>8} {beat:<9} {driver * 1e3:>8.1f} ms {least * 1e3:>8.1f} ms {driver / least:>7.2f}")
            figures[f"ratio_floor_{beat}_{size}"] = round(driver / least, 2)
            figures[f"driver_{beat}_{size}_ms"] = round(driver * 1e3, 1)
            figures[f"floor_{beat}_{size}_ms"] = round(least * 1e3, 1)
        figures[f"ratio_floor_{size}"] = max(figures[f"ratio_floor_trimming_{size}"], figures[f"ratio_floor_idle_{size}"])
    first = f"ratio_trimming_{sizes[0]}" if sizes else None
    print(json.dumps({"bench": "sweep", "ratio": figures.get("ratio_trimming_1000", figures.get(first or "", None)),
                      **figures}))


if __name__ == "__main__":
    main()
