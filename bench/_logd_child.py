"""What logd's benches share: a store of jobs built through the store (and its retain rule's first pass), the store
served in a child process, and a writer process started beside it.

Loaded by path (``load()`` in each bench): the bench folder is never on ``sys.path``, where ``bench/retain.py``
would shadow the ``retain`` package.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from retain.logd import Client, ServerThread, Store
from retain.logd.retain import Pass, Step, drive, retain_pass
from retain.logd.settings import Settings

BUILD_BATCH = 10_000
NOW = "2026-09-12T08:00:00Z"
OLD, YOUNG = "2026-09-10T08:00:00Z", "2026-09-12T07:00:00Z"  # two days before NOW, and an hour


FIRST_NOW = "2026-01-01T00:00:00Z"  # before every stamp: a pass at it deletes nothing


def each_step(steps: Pass, wrap: Callable[[Step], Step]) -> Pass:
    """The pass ``steps``, each step handed to its driver as ``wrap`` makes it (a step timed, say)."""
    value = None
    while True:
        try:
            step = steps.send(value)
        except StopIteration as stop:
            return stop.value
        value = yield wrap(step)


def first_pass(path: Path, request: dict[str, Any]) -> tuple[float, float]:
    """The request's first pass over the store at ``path``, at :data:`FIRST_NOW` (nothing expires): a SQLite store
    builds its heads index for each rule (docs/logd-retain.md), which every pass after it selects from, in short
    write steps. Its wall seconds, and the longest write step's (what a writer beside it may wait)."""
    longest = 0.0

    def timed(step: Step) -> Step:
        def run() -> object:
            nonlocal longest
            started = time.perf_counter()
            value = step.run()
            if step.writes:
                longest = max(longest, time.perf_counter() - started)
            return value
        return Step(run, step.writes)

    started = time.perf_counter()
    with Store.open(str(path), settings=Settings(synchronous="normal", read_budget=10 ** 9)) as store:
        result = drive(each_step(retain_pass(store.session(author="bench"), {**request, "now": FIRST_NOW}), timed))
    if result.deleted:
        raise SystemExit(f"the first pass deleted {result.deleted} items")
    return time.perf_counter() - started, longest


def job(index: int) -> dict[str, Any]:
    """30% expired at NOW after a day (done or canceled, and old), 35% running and old, 35% done and young."""
    kind = index % 20
    if kind < 6:
        return {"status": ("done", "canceled")[kind % 2], "updatedAt": OLD, "attempts": index % 5}
    if kind < 13:
        return {"status": "running", "updatedAt": OLD, "attempts": index % 5}
    return {"status": "done", "updatedAt": YOUNG, "attempts": index % 5}


def build_jobs(path: Path, items: int, job: Callable[[int], dict[str, Any]]) -> float:
    """A store at ``path`` holding ``jobs.j0000000`` ... as ``job(index)`` makes them, in patches of 10,000 through
    the store; the seconds it took."""
    with Store.open(str(path), settings=Settings(synchronous="normal")) as store:
        session = store.session(author="bench")
        started = time.perf_counter()
        session.patch([{"set": "jobs", "value": {}}])
        for first in range(0, items, BUILD_BATCH):
            session.patch([{"set": f"jobs.j{index:07d}", "value": job(index)}
                           for index in range(first, min(first + BUILD_BATCH, items))])
        return time.perf_counter() - started


def serve(path: str, items: int) -> None:
    """In a child: serve the store at ``path`` (a read budget past ``items``) on a free loopback port, printed,
    until stdin closes."""
    with Store.open(path, settings=Settings(synchronous="normal", read_budget=items + 1)) as store, \
            ServerThread(store, listen=("127.0.0.1", 0)) as served:
        print(served.server.address[1], flush=True)
        sys.stdin.read()


@contextmanager
def served(script: str, path: str, items: int) -> Iterator[int]:
    """``script --serve path items`` in a child process (its ``main`` calls :func:`serve`); its port while inside."""
    server = subprocess.Popen([sys.executable, "-P", script, "--serve", path, str(items)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        yield int(server.stdout.readline())  # type: ignore[union-attr]
    finally:
        server.stdin.close()  # type: ignore[union-attr]
        server.wait(timeout=120)


def write_timed(port: int, ready: str, stop: str) -> None:
    """In a child: single-item patches one after the other until ``stop`` exists (``ready`` touched after the tenth);
    prints each one's [start on the system-wide monotonic clock, seconds, commit] as JSON."""
    timed = []
    with Client(("127.0.0.1", port), author="bench/writer") as logd:
        while not os.path.exists(stop):
            start = time.monotonic()
            commit = logd.patch([{"set": f"writes.w{len(timed)}", "value": {"n": len(timed), "at": NOW}}]).commit
            timed.append((start, time.monotonic() - start, commit))
            if len(timed) == 10:
                Path(ready).touch()
    print(json.dumps(timed))


def role(argv: list[str]) -> bool:
    """Run the role a bench started its own script in -- ``--serve PATH ITEMS`` (:func:`serve`) or ``--write-timed
    PORT READY STOP`` (:func:`write_timed`) -- and say so; False when the script runs as the bench itself."""
    if argv[1:2] == ["--serve"]:
        serve(argv[2], int(argv[3]))
    elif argv[1:2] == ["--write-timed"]:
        write_timed(int(argv[2]), argv[3], argv[4])
    else:
        return False
    return True


def start_writer(script: str, arguments: list[str], ready: Path, how: str = "--write-timed") -> subprocess.Popen[str]:
    """``script HOW ARGUMENTS`` in a child process (:func:`write_timed` by default), once it has touched ``ready``."""
    writer = subprocess.Popen([sys.executable, "-P", script, how, *arguments], stdout=subprocess.PIPE, text=True)
    while not ready.exists():
        if writer.poll() is not None:
            raise SystemExit("the writer died before it was ready")
        time.sleep(0.01)
    return writer
