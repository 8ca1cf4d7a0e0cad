"""A backup of a served SQLite store, and what a writer waits meanwhile.

A store of RECORDS records (1,000,000 by default: jobs built through the store in patches of 10,000) served by
``retain.logd.ServerThread`` in a child process, while another process sends single-item patches one after the
other on a connection of its own and times each one.

- the backup: ``retain.logd.backup`` of the served store (SQLite's online backup API, 1,024 pages a step, inside one
  read transaction), timed; the writer's patches during it (p99 and max);
- the baselines, in the same run: a plain copy of the store's file (``shutil.copyfile`` and an fsync, what the disk
  does with no transaction around it; the store is quiet then), and the writer's patches in a window as long with no
  backup.

The copy is checked (its head is a commit the writer had acknowledged or the build's last, SQLite's quick check).

Run: python3 dev.py bench backup [--records N] [--step-pages N] [--pause S]
Prints a table, then one JSON line: {"backup_s": ..., "writer_max_ms": ... (target < 200), "writer_p99_ms": ...,
"ratio": backup time / plain file copy time, ...}.
"""

from __future__ import annotations

import argparse
import json
import os
import runpy
import shutil
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

# This file is in bench/: drop its folder from the path so that ``retain`` is the package.
sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != Path(__file__).resolve().parent]

from retain.logd import backup  # noqa: E402
from retain.logd.backup import STEP_PAGES  # noqa: E402
from retain.logd.sqlite import check_file  # noqa: E402

# What logd's benches share, run by path: the bench folder is not on sys.path.
child = SimpleNamespace(**runpy.run_path(str(Path(__file__).with_name("_logd_child.py"))))

RECORDS = 1_000_000


def job(index: int) -> dict:
    return {"status": ("done", "running", "canceled")[index % 3], "updatedAt": "2026-09-10T08:00:00Z",
            "attempts": index % 5}


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * share))] if ordered else 0.0


def main() -> None:
    if child.role(sys.argv):
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=RECORDS)
    parser.add_argument("--step-pages", type=int, default=STEP_PAGES)
    parser.add_argument("--pause", type=float, default=0.0, help="seconds between two backup steps")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        store = directory / "store.sqlite3"
        build_s = child.build_jobs(store, options.records - 1, job)  # and the container record
        started = time.perf_counter()
        shutil.copyfile(store, directory / "plain.sqlite3")
        with open(directory / "plain.sqlite3", "rb") as plain:
            os.fsync(plain.fileno())  # as the backup does its copy
        copy_s = time.perf_counter() - started
        (directory / "plain.sqlite3").unlink()
        ready, stop = directory / "ready", directory / "stop"
        with child.served(__file__, str(store), options.records) as port:
            writer = child.start_writer(__file__, [str(port), str(ready), str(stop)], ready)
            backup_from, started = time.monotonic(), time.perf_counter()
            taken = backup(str(store), directory / "backup.sqlite3", step_pages=options.step_pages,
                           pause=options.pause)
            backup_s, backup_to = time.perf_counter() - started, time.monotonic()
            time.sleep(backup_to - backup_from)  # as long a window with no backup, the writer's baseline
            quiet_to = time.monotonic()
            stop.touch()
            timed = json.loads(writer.communicate(timeout=120)[0])
        problems = check_file(taken.path, full=False)
        acked = {commit for _, _, commit in timed}
        if problems or not (taken.commit in acked or taken.commit <= options.records // child.BUILD_BATCH + 2):
            raise SystemExit(f"the backup is not a commit of the store: head {taken.commit}, {problems}")
    during = [seconds * 1000 for start, seconds, _ in timed if start < backup_to and start + seconds > backup_from]
    after = [seconds * 1000 for start, seconds, _ in timed if backup_to <= start < quiet_to]
    print(f"{options.records:,} records; store built in {build_s:.1f}s; {taken.bytes / 2**20:.0f} MiB, {taken.pages:,} "
          f"pages, copied {options.step_pages} pages a step, {options.pause:g}s between steps")
    print(f"{'':<36} {'seconds':>8} {'writes':>7} {'p99 ms':>8} {'max ms':>8}")
    print(f"{'backup, a writer beside it':<36} {backup_s:>8.2f} {len(during):>7} {percentile(during, 0.99):>8.1f} "
          f"{max(during, default=0):>8.1f}")
    print(f"{'no backup, the same writer':<36} {quiet_to - backup_to:>8.2f} {len(after):>7} "
          f"{percentile(after, 0.99):>8.1f} {max(after, default=0):>8.1f}")
    print(f"{'plain file copy (store quiet)':<36} {copy_s:>8.2f}")
    print(f"backup / plain copy {backup_s / copy_s:.2f}; the copy holds commit {taken.commit}")
    print(json.dumps({"bench": "backup", "backup_s": round(backup_s, 3), "writer_max_ms": round(max(during), 2),
                      "writer_p99_ms": round(percentile(during, 0.99), 2), "writes_during": len(during),
                      "quiet_writer_max_ms": round(max(after, default=0), 2),
                      "quiet_writer_p99_ms": round(percentile(after, 0.99), 2), "copy_s": round(copy_s, 3),
                      "ratio": round(backup_s / copy_s, 3), "bytes": taken.bytes, "records": options.records,
                      "step_pages": options.step_pages, "pause": options.pause, "build_s": round(build_s, 1)}))


if __name__ == "__main__":
    main()
