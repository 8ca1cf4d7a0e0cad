"""Replicas of one policy: how fast a dead one's streams are taken over, what sharing costs, what it saves.

Part 1, processes (``retain streams run``, as an operator runs them): three
replicas on one policy (5 archived and 5 plain streams, ``maxlen = 1000``, exact,
tick 1 s, leases of 3 s, a local archive, maintenance off so that every file
written stays), producers appending to every stream throughout. ``--kills``
times: find the replica that holds a stream's shard (its lease's value names
its process), SIGKILL it, and time until that stream is trimmed again, by
another replica (its length falls): ``takeover_ms``, the median; its ratio to
the tick is ``takeover_ticks`` (target <= 3). A new replica is started in the
killed one's place each time. After the run, every data file in the archive
is counted against those the table lists: ``duplicated_rows_share`` is the
rows written twice (a lost race's file, a killed fold's) over the rows
archived (target <= 0.01).

Part 2, in this process: a policy of ``--streams`` (20,000) plain streams,
``MAXLEN ~ 100``. The client CPU of one beat (this thread's CPU time, median
of ``--beats``) of a replica alone, the baseline, and of one replica of four
once they have spread the shards. Each round times a warm beat of each:
``beat_cpu_share_4`` = the median over the rounds of four / one (target <=
0.35; an even share alone is 0.25). ``lease_ops_per_beat``: the lease commands
one of the four sends per beat (both round trips).

Run: python3 dev.py bench replicas [--kills 5] [--streams 20000] [--beats 15]
Prints the figures, then one JSON line: {"takeover_ms", "takeover_ticks", "duplicated_rows_share",
"beat_cpu_share_4", "lease_ops_per_beat", ...}. Absolute figures vary 2-3x between machines; the ratios
are measured in one run.
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import redis

from retain.archive import Archive
from retain.archive.files import open_parquet
from retain.retention import Replicas, RetentionDriver
from retain.retention.shards import Shards
from retain.servers import RedisServer
from retain.streams import RawKey, StreamRef
from retain.windows import MaxLen

TICK, WINDOW = 1.0, 1000
RUN = "from retain.cli import main; main()"


def policy(path: Path, url: str, archive: str, keys: list[str], group: str) -> None:
    # Exact windows: every trim removes what was appended since the last, so the first one after a takeover
    # shows at once (a ~ trim waits for a whole node to pile up).
    streams = "".join(f'[[stream]]\nkey = "{key}"\nmaxlen = {WINDOW}\napprox = false\n'
                      f'archive = {str(number < 5).lower()}\n' for number, key in enumerate(keys))
    path.write_text(f'url = "{url}"\ntick = {TICK}\n[archive]\nurl = "{archive}"\nmaintain_every = false\n'
                    f'[replicas]\ngroup = "{group}"\n{streams}')


def start(path: Path, logs: Path, number: int) -> subprocess.Popen[bytes]:
    with (logs / f"replica-{number}.log").open("w") as stderr:
        return subprocess.Popen([sys.executable, "-c", RUN, "streams", "run", str(path)],
                                stdout=subprocess.DEVNULL, stderr=stderr)


def produce(server: RedisServer, keys: list[str], stop: threading.Event) -> None:
    with server.client() as conn:
        while not stop.wait(0.05):
            pipe = conn.pipeline(transaction=False)
            for key in keys:
                for index in range(10):
                    pipe.xadd(key, {"i": str(index)})
            pipe.execute()


def holder_pid(conn: redis.Redis, shards: Shards, key: str) -> int | None:
    """The process id in the name of the replica holding ``key``'s shard (names default to host-pid)."""
    value = conn.get(shards.lease_key(shards.of(key)))
    if value is None:
        return None
    member = value.decode().split(" ", 1)[1]
    return int(member.split("~")[0].rsplit("-", 1)[1])


def takeovers(kills: int) -> dict[str, float]:
    """Part 1: the takeover times, and the rows written twice."""
    with tempfile.TemporaryDirectory(prefix="retain-bench-replicas-") as directory, RedisServer() as server:
        root = Path(directory)
        keys = [f"bench:{{q{number}}}:s" for number in range(10)]
        path, archive_url = root / "policy.toml", str(root / "archive")
        policy(path, server.url, archive_url, keys, "bench-replicas")
        shards = Shards(64, "bench-replicas")
        processes = [start(path, root, number) for number in range(3)]
        started = 3
        stop = threading.Event()
        producer = threading.Thread(target=produce, args=(server, keys, stop), daemon=True)
        producer.start()
        times: list[float] = []
        conn = server.client()
        try:
            for kill in range(kills):
                # The replicas spread the shards again, the streams fill; a moment at random within a tick, so that
                # the kill falls anywhere between two renewals (whole seconds kept in step with the beats).
                time.sleep(8 + random.uniform(0, TICK))
                key = keys[kill % len(keys)]
                pid = holder_pid(conn, shards, key)
                victim = next((process for process in processes if process.pid == pid), None)
                if victim is None:
                    continue
                before = conn.xlen(key)
                remaining = conn.pttl(shards.lease_key(shards.of(key)))
                killed_at = time.monotonic()
                victim.send_signal(signal.SIGKILL)
                victim.wait()
                while True:
                    length = conn.xlen(key)
                    if length < before:
                        times.append((time.monotonic() - killed_at) * 1000)
                        break
                    before = max(before, length)
                    time.sleep(0.005)
                processes[processes.index(victim)] = start(path, root, started)
                started += 1
                print(f"kill {kill + 1}: {key} trimmed again by another replica {times[-1]:.0f} ms after SIGKILL "
                      f"(its lease had {remaining} ms to run)")
            stop.set()
            producer.join(30)
            time.sleep(3 * TICK)
        finally:
            stop.set()
            for process in processes:
                process.send_signal(signal.SIGTERM)
            for process in processes:
                process.wait(30)
        archive = Archive(archive_url)
        listed = sum(archive.state(RawKey(key)).entries for key in keys[:5])
        written = 0
        for item in archive.location.listing():
            name = str(item["path"])
            if name.endswith(".parquet") and "_delta_log" not in name:
                written += open_parquet(archive.location.source(name, int(item["size"])), name).metadata.num_rows
        conn.close()
    median = statistics.median(times)
    print(f"takeover: median {median:.0f} ms, max {max(times):.0f} ms over {len(times)} kills "
          f"(tick {TICK * 1000:.0f} ms, lease 3 ticks)")
    print(f"rows archived {listed}, written {written}: {written - listed} written twice")
    return {"takeover_ms": round(median, 1), "takeover_max_ms": round(max(times), 1),
            "takeover_ticks": round(median / (TICK * 1000), 2),
            "duplicated_rows_share": round((written - listed) / max(listed, 1), 5)}


def beat_cpu(streams: int, beats: int) -> dict[str, float]:
    """Part 2: a beat's client CPU, one replica alone against one of four."""
    with RedisServer() as server:
        conn = server.client()
        refs = [StreamRef(f"q{number % 100}", f"s{number}") for number in range(streams)]
        for start_at in range(0, streams, 5000):
            pipe = conn.pipeline(transaction=False)
            for ref in refs[start_at:start_at + 5000]:
                pipe.xadd(ref.key, {"i": "0"})
            pipe.execute()
        entries = [(ref, MaxLen(100)) for ref in refs]

        def cpu_of(driver: RetentionDriver) -> float:
            started = time.thread_time()
            driver.sweep()
            return time.thread_time() - started

        alone = RetentionDriver(conn, entries, track_groups=False, replicas=Replicas(group="bench-one"))
        clients = [server.client() for _ in range(4)]
        four = [RetentionDriver(client, entries, track_groups=False, replicas=Replicas(group="bench-four"))
                for client in clients]
        for _ in range(4):  # the four spread the shards; every driver's first beats pack and cache
            for driver in (alone, *four):
                driver.sweep()
        held = [len(driver.leases.held()) for driver in four]
        # Paired rounds: the machine's speed drifts (and another process may run), so each round times a warm
        # beat (the one just before it untimed) of the replica alone and of each of the four, and the figure is
        # the median of the rounds' ratios.
        ones, samples, ratios = [], [], []
        for _ in range(beats):
            alone.sweep()
            ones.append(cpu_of(alone))
            round_samples = []
            for driver in four:
                driver.sweep()
                round_samples.append(cpu_of(driver))
            samples += round_samples
            ratios.append(statistics.median(round_samples) / ones[-1])
        one = statistics.median(ones)
        report = four[0].sweep()
        lease_ops = report.replica.changes.ops if report.replica is not None else 0
        for client in clients:
            client.close()
        conn.close()
    shared = statistics.median(samples)
    share = statistics.median(ratios)
    print(f"one beat of {streams:,} streams: alone {one * 1000:.1f} ms CPU; one of four replicas "
          f"(holding {held} shards) {shared * 1000:.1f} ms CPU; median of the rounds' ratios {share:.3f}; "
          f"{lease_ops} lease commands a beat")
    return {"beat_cpu_alone_ms": round(one * 1000, 2), "beat_cpu_one_of_4_ms": round(shared * 1000, 2),
            "beat_cpu_share_4": round(share, 3), "lease_ops_per_beat": lease_ops}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kills", type=int, default=5)
    parser.add_argument("--streams", type=int, default=20_000)
    parser.add_argument("--beats", type=int, default=15)
    args = parser.parse_args()
    figures = beat_cpu(args.streams, args.beats)
    if args.kills:
        figures |= takeovers(args.kills)
    print(json.dumps({"bench": "replicas", **figures}))


if __name__ == "__main__":
    main()
