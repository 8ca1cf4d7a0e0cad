"""A retain pass over a busy container: how much of what it should delete one request deletes, under a writer.

A container of ITEMS jobs (100,000 by default, built through the store in patches of 10,000), 30% of them expired
(done or canceled, two days old), served by ``retain.logd.ServerThread`` in a child process. The request ages
``jobs.*`` by ``.updatedAt`` after ``1d`` with ``match: {status: !or [done, canceled]}``, batch 256, sent over a
socket.

- the busy pass: while it runs, a writer process patches random jobs -- expired ones included -- at RATE (500) patches
  per second on a connection of its own: a fresh stamp (no longer expired), ``status: running`` (no longer
  matching), another old stamp (still expired, but the batch's guard fails), or a field the rule does not read (the
  guard holds). Every acknowledged write is logged with its commit.
- the baseline, in the same run: the same request over a fresh copy of the same store, with no writer.

``deleted_share`` = of the jobs that were expired when the store was built and that no write touched until the pass's
last commit, the share the busy pass deleted (target >= 0.99); ``skipped_items`` and ``retried_items`` are the
answer's counts.
ROUNDS rounds on fresh copies, alternating which pass runs first; medians, and the least ``deleted_share``.

Run: python3 dev.py bench retain_busy [--items N] [--rate R] [--rounds N]
Prints a table, then one JSON line: {"deleted_share": ..., "skipped_items": ..., "retried_items": ..., "pass_s": ...,
"ratio": busy pass time / quiet pass time, ...}.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import runpy
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

# This file is in bench/: drop its folder from the path so that ``retain`` is the package.
sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != Path(__file__).resolve().parent]

from retain.logd import Client, Store  # noqa: E402
from retain.wire import Or  # noqa: E402

# What logd's benches share, run by path: the bench folder is not on sys.path.
child = SimpleNamespace(**runpy.run_path(str(Path(__file__).with_name("_logd_child.py"))))

ITEMS = 100_000
RATE = 500
ROUNDS = 3
NOW, YOUNG = child.NOW, child.YOUNG
AUTHOR = "bench/retention"
REQUEST = {"now": NOW, "batch": 256, "author": AUTHOR, "what": [
    {"path": "jobs.*", "match": {"status": Or(("done", "canceled"))}, "age": ".updatedAt", "after": "1d"}]}


def name(index: int) -> str:
    return f"j{index:07d}"


def write(port: int, items: int, rate: float, ready: str, stop: str, seed: int) -> None:
    """In a child: patch random jobs at ``rate`` patches per second until ``stop`` exists; print every acknowledged
    write as [commit, job index]."""
    rng = random.Random(seed)
    acked = []
    with Client(("127.0.0.1", port), author="bench/writer") as logd:
        started = time.monotonic()
        while not os.path.exists(stop):
            index = rng.randrange(items)
            value = dict(child.job(index), attempts=len(acked))
            change = len(acked) % 4  # young again, no longer matching, another old stamp, a field the rule ignores
            if change == 0:
                value["updatedAt"] = YOUNG
            elif change == 1:
                value["status"] = "running"
            elif change == 2:
                value["updatedAt"] = f"2026-09-09T{len(acked) // 3600 % 24:02d}:{len(acked) // 60 % 60:02d}:" \
                                     f"{len(acked) % 60:02d}Z"
            acked.append((logd.patch([{"set": f"jobs.{name(index)}", "value": value}]).commit, index))
            if len(acked) == 10:
                Path(ready).touch()
            pause = started + len(acked) / rate - time.monotonic()
            if pause > 0:
                time.sleep(pause)
    print(json.dumps(acked))


def one_pass(directory: Path, copy: str, items: int, rate: float | None, seed: int) -> dict:
    """The request over a served copy of the store, with a writer at ``rate`` beside it (None: no writer)."""
    writer = None
    writes: list[list[int]] = []
    ready, stop = directory / "ready", directory / "stop"
    try:
        with child.served(__file__, copy, items) as port:
            if rate is not None:
                writer = child.start_writer(__file__, [str(port), str(items), str(rate), str(ready), str(stop),
                                                       str(seed)], ready, how="--write")
            with Client(("127.0.0.1", port), author="bench") as logd:
                sent = logd.get("jobs.j0000000").commit  # at or before the pass's read
                started = time.perf_counter()
                answer = logd.call("retain", **REQUEST)
                seconds = time.perf_counter() - started
            if writer is not None:
                stop.touch()
                writes = json.loads(writer.communicate(timeout=120)[0])
    finally:
        ready.unlink(missing_ok=True)
        stop.unlink(missing_ok=True)
    deleted = deleted_by_the_pass(copy, sent)
    rule = answer["rules"][0]
    # Expired at the start, and written by nobody before the pass's last commit (a write just before the pass read
    # may have changed whether the job expires: such a job is left out, one way or the other).
    touched = {index for commit, index in writes if commit <= answer["commit"]}
    eligible = {index for index in range(items) if index % 20 < 6} - touched
    return {"seconds": seconds, "deleted": rule["deleted"], "skipped": rule.get("skipped", 0),
            "retried": rule.get("retried", 0), "writes": len([1 for commit, _ in writes if commit > sent]),
            "touched_eligible": len({index for index in touched if index % 20 < 6}),
            "eligible_unwritten": len(eligible),
            "deleted_share": len(eligible & deleted) / len(eligible) if eligible else 1.0}


def deleted_by_the_pass(path: str, after: int) -> set[int]:
    """The job indices the pass's commits deleted, read from the store's log."""
    deleted = set()
    with Store.open(path) as store:
        for record in store.backend.commits(after + 1, (0,)):
            if record.author == AUTHOR:
                deleted.update(int(op["delete"].removeprefix("jobs.j")) for op in record.ops or ())
    return deleted


def main() -> None:
    if child.role(sys.argv):
        return
    if sys.argv[1:2] == ["--write"]:
        port, items, rate, ready, stop, seed = sys.argv[2:]
        write(int(port), int(items), float(rate), ready, stop, int(seed))
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=ITEMS)
    parser.add_argument("--rate", type=float, default=RATE, help="the writer's patches per second")
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    options = parser.parse_args()
    busy, quiet = [], []
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        build_s = child.build_jobs(directory / "store.sqlite3", options.items, child.job)
        first_s, _ = child.first_pass(directory / "store.sqlite3", REQUEST)  # the rule's heads index built once
        for round_index in range(options.rounds):  # fresh copies; alternating, so drift hits both alike
            sides = [("busy", options.rate, busy), ("quiet", None, quiet)]
            for side, rate, runs in sides[::-1] if round_index % 2 else sides:
                copy = directory / f"{side}.sqlite3"
                shutil.copyfile(directory / "store.sqlite3", copy)
                runs.append(one_pass(directory, str(copy), options.items, rate, seed=round_index))
    pass_s, quiet_s = statistics.median(run["seconds"] for run in busy), statistics.median(
        run["seconds"] for run in quiet)
    share = min(run["deleted_share"] for run in busy)
    skipped = int(statistics.median(run["skipped"] for run in busy))
    retried = int(statistics.median(run["retried"] for run in busy))
    print(f"{options.items:,} items, 30% expired, batch 256; a writer at {options.rate:g} patches/s beside the busy "
          f"pass; store built in {build_s:.1f}s, the rule's first pass (its heads index) {first_s:.1f}s; "
          f"{options.rounds} rounds on fresh copies")
    print(f"{'':<12} {'pass s':>8} {'deleted':>9} {'skipped':>8} {'retried':>8} {'writes':>7} "
          f"{'eligible, unwritten':>20} {'deleted share':>14}")
    for side, runs in (("quiet", quiet), ("busy", busy)):
        for run in runs:
            print(f"{side:<12} {run['seconds']:>8.2f} {run['deleted']:>9,} {run['skipped']:>8,} {run['retried']:>8,} "
                  f"{run['writes']:>7,} {run['eligible_unwritten']:>20,} {run['deleted_share']:>14.4f}")
    print(f"deleted share (least of {options.rounds}) {share:.4f}; busy pass / quiet pass {pass_s / quiet_s:.2f} "
          f"(medians {pass_s:.2f}s / {quiet_s:.2f}s)")
    print(json.dumps({"bench": "retain_busy", "deleted_share": round(share, 5), "skipped_items": skipped,
                      "retried_items": retried, "pass_s": round(pass_s, 3), "quiet_pass_s": round(quiet_s, 3),
                      "ratio": round(pass_s / quiet_s, 3), "writes": int(statistics.median(r["writes"] for r in busy)),
                      "items": options.items, "rate": options.rate, "rounds": options.rounds,
                      "build_s": round(build_s, 1), "first_pass_s": round(first_s, 3)}))


if __name__ == "__main__":
    main()
