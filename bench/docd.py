"""docd's cost and its concurrency, against talking to the owners directly, in the same run.

Every server is a child process (``retain logd serve``, ``retain docd controller``,
``retain docd serve``) on loopback, as in production; the bench is their client.

- reads: READS pipelined ``get``s sent to docd (routed to logd) against the same sent to
  logd directly: what the extra hop costs per request;
- fan-out: one retain request through docd with a rule at logd and a rule at a controller,
  ITEMS expired items each, against the same two requests sent directly one after the
  other: docd sends them at once, so its time approaches the slower owner's, not the sum.

Run: python3 dev.py bench docd [ITEMS]
Prints a table, then one JSON line: {"ratio": docd read time / direct read time,
"ratio_fanout": sequential time / docd fan-out time, ...}.
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

from retain.logd.client import Client
from retain.servers import free_port
from retain.wire import AutoId

ROUNDS = 3
READS = 5_000
ITEMS = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000
NOW = "2026-09-12T08:00:00Z"
OLD = "2026-09-01T08:00:00Z"


def start(args: list[str], port: int, log: Path) -> subprocess.Popen:
    process = subprocess.Popen([sys.executable, "-c", "from retain.cli import main; main()", *args],
                               stdout=subprocess.DEVNULL, stderr=log.open("wb"))
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return process
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"retain {' '.join(args)} did not start:\n{log.read_text()}") from None
            time.sleep(0.05)


def fill(client: Client, path: str, count: int) -> None:
    """``count`` expired items appended to the keyed array at ``path``, 1,000 per commit."""
    for first in range(0, count, 1_000):
        client.patch([{"append": path, "value": {"at": OLD, "n": index}}
                      for index in range(first, min(first + 1_000, count))])


def timed(function) -> float:
    start_time = time.perf_counter()
    function()
    return time.perf_counter() - start_time


def main() -> None:
    with tempfile.TemporaryDirectory() as directory:
        where = Path(directory)
        ports = {name: free_port() for name in ("logd", "ctl", "docd")}
        (where / "mounts.toml").write_text(f'[[mount]]\npath = "ci"\naddress = "127.0.0.1:{ports["ctl"]}"\n')
        processes = [
            start(["logd", "serve", "--db", str(where / "logd.sqlite3"), "--listen", f"127.0.0.1:{ports['logd']}",
                   "--synchronous", "normal"], ports["logd"], where / "logd.log"),
            start(["docd", "controller", "--db", str(where / "ci.sqlite3"), "--listen",
                   f"127.0.0.1:{ports['ctl']}"], ports["ctl"], where / "ctl.log"),
            start(["docd", "serve", "--mounts", str(where / "mounts.toml"), "--logd", f"127.0.0.1:{ports['logd']}",
                   "--listen", f"127.0.0.1:{ports['docd']}"], ports["docd"], where / "docd.log"),
        ]
        try:
            results = run(ports)
        finally:
            for process in processes:
                process.terminate()
                process.wait(timeout=30)
    report(results)


def run(ports: dict[str, int]) -> dict[str, list[float]]:
    results: dict[str, list[float]] = {"read_docd": [], "read_direct": [], "fanout_docd": [], "fanout_direct": []}
    with Client(("127.0.0.1", ports["logd"])) as logd, Client(("127.0.0.1", ports["ctl"])) as ctl, \
            Client(("127.0.0.1", ports["docd"])) as docd:
        logd.call("schema", set={"runs": AutoId("id")})
        ctl.call("schema", set={"runs": AutoId("id")})
        logd.patch([{"set": "jobs.j1", "value": {"status": "done"}}])
        reads = [{"get": {"path": "jobs.j1"}}] * READS
        rules = {"logd": {"path": "runs(*)", "age": ".at", "after": "1d"},
                 "ci": {"path": "runs(*)", "age": ".at", "after": "1d"}}
        for round_index in range(ROUNDS):
            # Alternate which side goes first so drift on a shared machine hits both alike.
            for side in (("docd", "direct") if round_index % 2 == 0 else ("direct", "docd")):
                target = docd if side == "docd" else logd
                results[f"read_{side}"].append(timed(partial(_read_all, target, reads)))
                fill(logd, "runs", ITEMS)
                fill(ctl, "runs", ITEMS)
                if side == "docd":
                    request = {"retain": {"now": NOW, "what": [rules["logd"], {**rules["ci"], "path": "ci.runs(*)"}]}}
                    results["fanout_docd"].append(timed(partial(_retain_all, docd, request, 2 * ITEMS)))
                else:
                    def sequential() -> None:
                        expect(logd.request({"retain": {"now": NOW, "what": [rules["logd"]]}}), ITEMS)
                        expect(ctl.request({"retain": {"now": NOW, "what": [rules["ci"]]}}), ITEMS)
                    results["fanout_direct"].append(timed(sequential))
    return results


def _read_all(client: Client, reads: list[dict]) -> None:
    check(client.pipeline(reads))


def _retain_all(client: Client, request: dict, deleted: int) -> None:
    expect(client.request(request), deleted)


def check(answers: list[dict]) -> None:
    assert all("result" in answer for answer in answers), answers[:1]


def expect(answer: dict, deleted: int) -> None:
    assert answer.get("result", {}).get("retain", {}).get("deleted") == deleted, answer


def report(results: dict[str, list[float]]) -> None:
    median = {name: statistics.median(times) for name, times in results.items()}
    ratio = median["read_docd"] / median["read_direct"]
    fanout = median["fanout_direct"] / median["fanout_docd"]
    print(f"{'workload':<28} {'docd':>12} {'direct':>12} {'ratio':>7}")
    print(f"{'get, pipelined (per request)':<28} {median['read_docd'] / READS * 1e6:>9.1f} us "
          f"{median['read_direct'] / READS * 1e6:>9.1f} us {ratio:>7.3f}   ({READS} gets, median of {ROUNDS})")
    print(f"{'retain over 2 owners':<28} {median['fanout_docd'] * 1e3:>9.1f} ms "
          f"{median['fanout_direct'] * 1e3:>9.1f} ms {fanout:>7.3f}   ({ITEMS} expired items per owner; "
          f"direct = one owner after the other; ratio = direct / docd)")
    print(json.dumps({"bench": "docd", "ratio": round(ratio, 4), "ratio_fanout": round(fanout, 4),
                      "read_docd_us": round(median["read_docd"] / READS * 1e6, 2),
                      "read_direct_us": round(median["read_direct"] / READS * 1e6, 2),
                      "fanout_docd_ms": round(median["fanout_docd"] * 1e3, 1),
                      "fanout_direct_ms": round(median["fanout_direct"] * 1e3, 1), "items": ITEMS,
                      "cpus": os.cpu_count()}))


if __name__ == "__main__":
    main()
