"""logd's retain pass against a raw SQL DELETE of the same rows, and what other writers wait meanwhile.

A container of ITEMS jobs (built through the store in patches of 10,000), 30% of them expired:
done or canceled, and stamped two days before now; the rest are running (as old) or done but
young. The request ages ``jobs.*`` by ``.updatedAt`` after ``1d`` with
``match: {status: !or [done, canceled]}``, batch 256.

- the pass: run as :func:`retain.logd.run_retain` runs it, in a child process of its own (so its peak RSS
  is its own): read the container on a snapshot, select in SQL (a worker process selecting half the
  container beside it), delete in guarded commits of 256; its CPU time counts the worker's;
- the baseline: the same documents in a raw sqlite3 table ``docs(key, doc)`` with the same pragmas
  (WAL, synchronous=normal), and one ``DELETE ... WHERE json_extract(doc, '$.status') IN ('done',
  'canceled') AND json_extract(doc, '$.updatedAt') <= :cutoff`` in one transaction: the same
  decision and the same rows, with no commits, guards or history;
- writers: the store served by ``retain.logd.ServerThread`` in a child process, the same request
  sent over a socket, while another process sends single-item patches one after the other on a
  connection of its own; the latency of every patch sent during the pass (p99 and max).

The store and the raw table are built once, and the rule run once over the store at a ``now`` that expires
nothing: its first pass builds the store's heads index for the rule (docs/logd-retain.md), which the passes
measured then select from (``first_pass_s``, and its longest write step ``first_pass_step_max_ms``). Each of ROUNDS
rounds runs all three on fresh copies of the files, alternating the order of the first two; the medians are
reported. Wall time is the figure
(``ratio``); CPU time is printed too, since a shared machine's load moves wall time. The counts of
deleted rows must agree.

Run: python3 dev.py bench retain [ITEMS]
Prints a table, then one JSON line: {"ratio": pass time / raw DELETE time, "peak_rss_mb": ...,
"write_p99_ms": ..., "write_max_ms": ..., ...}.
"""

from __future__ import annotations

import json
import os
import resource
import runpy
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

# This file is bench/retain.py: drop its folder from the path so that ``retain`` is the package, not this file.
sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != Path(__file__).resolve().parent]

from retain.logd import Client, Store  # noqa: E402
from retain.logd.retain import Step, drive, retain_pass  # noqa: E402
from retain.logd.settings import Settings  # noqa: E402
from retain.wire import Or  # noqa: E402

# What logd's benches share, run by path: the bench folder is not on sys.path.
child = SimpleNamespace(**runpy.run_path(str(Path(__file__).with_name("_logd_child.py"))))

ITEMS = 1_000_000
ROUNDS = 3
BATCH = 256
NOW = child.NOW
CUTOFF = "2026-09-11T08:00:00Z"  # now - 1d: every stamp here is UTC in one format, so text order is time order
REQUEST = {"now": NOW, "batch": BATCH, "author": "bench/retention", "what": [
    {"path": "jobs.*", "match": {"status": Or(("done", "canceled"))}, "age": ".updatedAt", "after": "1d"}]}


def build_raw(path: Path, items: int) -> None:
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("CREATE TABLE docs (key TEXT PRIMARY KEY, doc TEXT NOT NULL) WITHOUT ROWID")
    db.execute("BEGIN")
    db.executemany("INSERT INTO docs (key, doc) VALUES (?, ?)",
                   ((f"jobs.j{index:07d}", json.dumps(child.job(index))) for index in range(items)))
    db.execute("COMMIT")
    db.close()


def cpu_seconds() -> float:
    """CPU time of this process and of the children it waited for (the selection's workers)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def raw_delete(path: Path) -> dict:
    """One DELETE of the expired rows in one transaction: wall and CPU seconds, rows deleted."""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA synchronous = normal")
    wall, cpu = time.perf_counter(), cpu_seconds()
    db.execute("BEGIN IMMEDIATE")
    deleted = db.execute("DELETE FROM docs WHERE json_extract(doc, '$.status') IN ('done', 'canceled') "
                         "AND json_extract(doc, '$.updatedAt') <= ?", (CUTOFF,)).rowcount
    db.execute("COMMIT")
    seconds, cpu_s = time.perf_counter() - wall, cpu_seconds() - cpu
    db.close()
    return {"seconds": seconds, "cpu_s": cpu_s, "deleted": deleted}


def the_pass(path: str, items: int) -> None:
    """In the child: run the pass over the store at ``path`` and print its figures as JSON.

    The steps are run here, as :func:`retain.logd.run_retain` runs them, so that the end of the read (the first
    step) is timed without a ``before_batch`` hook, which would build every item's path for its call."""
    with Store.open(path, settings=Settings(synchronous="normal", read_budget=items + 1)) as store:
        session = store.session(author="bench")
        base_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        steps_done: list[float] = []

        def timed(step: Step) -> Step:
            if steps_done:
                return step  # only the first step, the read, is timed
            def run() -> object:
                value = step.run()
                steps_done.append(time.perf_counter())
                return value
            return Step(run, step.writes)

        wall, cpu = time.perf_counter(), cpu_seconds()
        result = drive(child.each_step(retain_pass(session, REQUEST), timed))
        seconds, cpu_s = time.perf_counter() - wall, cpu_seconds() - cpu
        peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        worker_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # the largest selection worker
    read_select = (steps_done[0] if steps_done else wall + seconds) - wall
    print(json.dumps({"seconds": seconds, "cpu_s": cpu_s, "read_select_s": read_select, "deleted": result.deleted,
                      "commits": len(result.rules[0].commits), "skipped": result.rules[0].skipped,
                      "peak_rss_mb": peak_kb / 1024, "base_rss_mb": base_kb / 1024,
                      "worker_rss_mb": worker_kb / 1024}))


def served_pass(directory: Path, items: int) -> dict:
    """The pass over a served store while another connection writes: its wall time and every write's latency."""
    ready, stop = directory / "ready", directory / "stop"
    with child.served(__file__, str(directory / "served.sqlite3"), items) as port:
        with Client(("127.0.0.1", port)) as logd:
            logd.patch([{"set": "writes", "value": {}}])
        writer = child.start_writer(__file__, [str(port), str(ready), str(stop)], ready)
        with Client(("127.0.0.1", port), author="bench") as logd:
            started = time.monotonic()
            answer = logd.call("retain", **REQUEST)
            ended = time.monotonic()
        stop.touch()
        out, _ = writer.communicate(timeout=120)
    during = [seconds for start, seconds, _ in json.loads(out) if start < ended and start + seconds > started]
    ready.unlink()
    stop.unlink()
    return {"seconds": ended - started, "deleted": answer["deleted"], "writes": during}


def median(runs: list[dict], name: str) -> float:
    return statistics.median(run[name] for run in runs)


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def main() -> None:
    if sys.argv[1:2] == ["--pass"]:
        the_pass(sys.argv[2], int(sys.argv[3]))
        return
    if child.role(sys.argv):
        return
    if sys.argv[1:2] in (["-h"], ["--help"]):
        print(__doc__)
        return
    items = int(sys.argv[1]) if len(sys.argv) > 1 else ITEMS
    passes, raws, served = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        build_s = child.build_jobs(directory / "store.sqlite3", items, child.job)
        build_raw(directory / "raw.sqlite3", items)
        first_s, first_step_s = child.first_pass(directory / "store.sqlite3", REQUEST)
        for round_index in range(ROUNDS):  # each round on fresh copies; alternating, so drift hits both alike
            for name in ("pass", "served"):
                shutil.copyfile(directory / "store.sqlite3", directory / f"{name}.sqlite3")
            shutil.copyfile(directory / "raw.sqlite3", directory / "delete.sqlite3")
            os.sync()  # the copies written out now: the kernel's write-back of them lands on neither side's clock
            sides = [lambda: passes.append(json.loads(subprocess.run(
                         [sys.executable, "-P", __file__, "--pass", str(directory / "pass.sqlite3"), str(items)],
                         check=True, capture_output=True, text=True).stdout)),
                     lambda: raws.append(raw_delete(directory / "delete.sqlite3"))]
            for side in sides[::-1] if round_index % 2 else sides:
                side()
            served.append(served_pass(directory, items))
    deleted = {run["deleted"] for run in passes + raws + served}
    if len(deleted) != 1:
        raise SystemExit(f"the passes and the raw DELETE disagree on the rows: {sorted(deleted)}")
    pass_s, raw_s = median(passes, "seconds"), median(raws, "seconds")
    pass_cpu, raw_cpu = median(passes, "cpu_s"), median(raws, "cpu_s")
    read_s = median(passes, "read_select_s")
    delete_s = pass_s - read_s
    expired = deleted.pop()
    peak = max(run["peak_rss_mb"] for run in passes)
    base = max(run["base_rss_mb"] for run in passes)
    worker = max(run["worker_rss_mb"] for run in passes)
    writes = [latency for run in served for latency in run["writes"]]
    served_s = median(served, "seconds")
    write_p99, write_max = p99(writes) * 1000, max(writes) * 1000
    print(f"{items:,} items, {expired:,} expired (30%), batch {BATCH}; store built in {build_s:.1f}s; "
          f"median of {ROUNDS} rounds")
    print(f"{'':<34} {'wall s':>8} {'cpu s':>8} {'per item':>10}")
    print(f"{'retain pass':<34} {pass_s:>8.2f} {pass_cpu:>8.2f} {pass_s / items * 1e6:>8.2f}us"
          f"   ({passes[0]['commits']} commits, {passes[0]['skipped']} skipped)")
    print(f"{'  read + select (SQL, snapshot)':<34} {read_s:>8.2f} {'':>8} {read_s / items * 1e6:>8.2f}us")
    print(f"{'  guarded deletes':<34} {delete_s:>8.2f} {'':>8} {delete_s / expired * 1e6:>8.2f}us per deleted item")
    print(f"{'raw DELETE ... WHERE json_extract':<34} {raw_s:>8.2f} {raw_cpu:>8.2f} {raw_s / items * 1e6:>8.2f}us")
    print(f"{'retain served, a writer beside it':<34} {served_s:>8.2f} {'':>8}   "
          f"{len(writes)} single-item patches during the passes: p99 {write_p99:.1f} ms, max {write_max:.1f} ms")
    print(f"{'the first pass (builds the index)':<34} {first_s:>8.2f}            "
          f"its longest write step {first_step_s * 1000:.0f} ms")
    print(f"ratio (pass / raw DELETE) {pass_s / raw_s:.2f} wall, {pass_cpu / raw_cpu:.2f} cpu; "
          f"pass peak RSS {peak:.0f} MB (after opening the store: {base:.0f} MB; its selection worker {worker:.0f} MB)")
    print(json.dumps({"bench": "retain", "ratio": round(pass_s / raw_s, 3), "ratio_cpu": round(pass_cpu / raw_cpu, 3),
                      "peak_rss_mb": round(peak, 1), "write_p99_ms": round(write_p99, 2),
                      "write_max_ms": round(write_max, 2), "writes": len(writes), "served_pass_s": round(served_s, 3),
                      "pass_s": round(pass_s, 3), "raw_delete_s": round(raw_s, 3), "pass_cpu_s": round(pass_cpu, 3),
                      "raw_delete_cpu_s": round(raw_cpu, 3), "read_select_s": round(read_s, 3),
                      "delete_s": round(delete_s, 3), "items": items, "deleted": expired,
                      "commits": passes[0]["commits"], "base_rss_mb": round(base, 1), "worker_rss_mb": round(worker, 1), "rounds": ROUNDS,
                      "build_s": round(build_s, 1), "first_pass_s": round(first_s, 3),
                      "first_pass_step_max_ms": round(first_step_s * 1000, 1)}))


if __name__ == "__main__":
    main()
