"""Replicas as real processes: ``retain streams run`` daemons to kill and restart, producers that keep what Redis
acknowledged, and a sampler of the streams' lengths."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

from retain.archive import Archive
from retain.archive.files import open_parquet
from tests.helpers.streams import ms_of

__all__ = ["Lengths", "Producers", "ReplicaSet", "rows_stored"]

RUN = "from retain.cli import main; main()"


class ReplicaSet:
    """``count`` daemons of one policy file, each a process of its own; :meth:`kill` SIGKILLs one and starts a
    new one in its place (a host that died and came back)."""

    def __init__(self, policy: Path, count: int, logs: Path, name: str) -> None:
        self.policy, self.logs, self.name = policy, logs, name
        self.processes: list[subprocess.Popen[bytes]] = []
        self.started = 0
        #: the number of each log, in the order the processes were started (kill's replacements last)
        self._numbers: list[int] = []
        for _ in range(count):
            self.processes.append(self._start())

    def _start(self) -> subprocess.Popen[bytes]:
        self.started += 1
        self._numbers.append(self.started)
        log = self.logs / f"{self.name}-{self.started}.log"
        with log.open("w") as stderr:
            return subprocess.Popen([sys.executable, "-c", RUN, "streams", "run", str(self.policy),
                                     "--log-format", "json"], stdout=subprocess.DEVNULL, stderr=stderr)

    def kill(self, index: int) -> None:
        """SIGKILL replica ``index`` (no lease given back) and start a new process in its place."""
        victim = self.processes[index]
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        self.processes[index] = self._start()
        self._numbers[index] = self._numbers.pop()

    def wait_started(self) -> None:
        """Wait until every replica has logged its start (a process that is still importing dies of SIGTERM)."""
        from tests.helpers.waiting import wait_for

        for number, process in enumerate(self.processes):
            log = self.logs / f"{self.name}-{self._numbers[number]}.log"
            wait_for(lambda log=log: "retention driver started" in log.read_text(), f"replica {number} to start",
                     timeout=60, child=process)

    def alive(self) -> bool:
        return all(process.poll() is None for process in self.processes)

    def stop(self) -> list[int]:
        """SIGTERM every replica; their exit statuses (0: a clean stop)."""
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        statuses = []
        for process in self.processes:
            try:
                statuses.append(process.wait(timeout=30))
            except subprocess.TimeoutExpired:
                process.kill()
                statuses.append(process.wait())
        return statuses

    def log_text(self) -> str:
        return "\n".join(path.read_text() for path in sorted(self.logs.glob(f"{self.name}-*.log")))


@dataclass
class Producers:
    """Threads appending ``batch`` entries to every stream, ``rate`` batches a second each; each id Redis
    acknowledged is kept, in order. ``client()`` makes each thread's connection."""

    client: Callable[[], Any]
    keys: Sequence[str]
    threads: int = 2
    batch: int = 10
    rate: float = 10.0
    acknowledged: dict[str, list[bytes]] = field(default_factory=dict)
    failures: list[BaseException] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.acknowledged = {key: [] for key in self.keys}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._workers = [threading.Thread(target=self._run, args=(number,), daemon=True)
                         for number in range(self.threads)]

    def __enter__(self) -> Producers:
        for worker in self._workers:
            worker.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for worker in self._workers:
            worker.join(30)

    def _run(self, number: int) -> None:
        conn = self.client()
        try:
            while not self._stop.wait(1 / self.rate):
                for key in self.keys[number::self.threads]:
                    pipe = conn.pipeline(transaction=False)
                    for index in range(self.batch):
                        pipe.xadd(key, {"p": str(number), "i": str(index)})
                    try:
                        ids = pipe.execute()
                    except redis.RedisError as exc:  # a fault the test made: this batch is not acknowledged
                        self.failures.append(exc)
                        continue
                    with self._lock:
                        self.acknowledged[key] += ids
        finally:
            conn.close()

    def count(self, key: str) -> int:
        with self._lock:
            return len(self.acknowledged[key])

    def appended_per_second(self, key: str) -> float:
        """What each stream receives a second, as configured (the batch of the one thread that writes it)."""
        return self.batch * self.rate

    def ids(self, key: str) -> list[bytes]:
        with self._lock:
            return sorted(self.acknowledged[key], key=ms_of)


class Lengths:
    """A thread reading every stream's length every ``every`` seconds: the lowest once it first reached
    ``filled``, and the highest, per stream; ``paused`` streams are left out while set."""

    def __init__(self, client: Callable[[], Any], keys: Sequence[str], filled: int, every: float = 0.02) -> None:
        self.client, self.keys, self.filled, self.every = client, list(keys), filled, every
        self.low: dict[str, int] = {}
        self.high: dict[str, int] = {key: 0 for key in keys}
        self.samples = 0
        self.ignored: set[str] = set()
        self._reached: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Lengths:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        conn = self.client()
        try:
            while not self._stop.wait(self.every):
                pipe = conn.pipeline(transaction=False)
                keys = [key for key in self.keys if key not in self.ignored]
                for key in keys:
                    pipe.xlen(key)
                try:
                    lengths = pipe.execute(raise_on_error=False)
                except Exception:  # noqa: BLE001 - a node frozen by the test: sample again
                    continue
                self.samples += 1
                for key, length in zip(keys, lengths, strict=True):
                    if not isinstance(length, int):
                        continue
                    self.high[key] = max(self.high[key], length)
                    if length >= self.filled:
                        self._reached.add(key)
                    if key in self._reached:
                        self.low[key] = min(self.low.get(key, length), length)
        finally:
            conn.close()


def rows_stored(archive: Archive) -> int:
    """Rows in every data file in the archive's store, listed by a commit or not (a lost race's, a killed
    fold's): what was written, to compare with what the table lists."""
    rows = 0
    for item in archive.location.listing():
        path = str(item["path"])
        if path.endswith(".parquet") and "_delta_log" not in path:
            parquet = open_parquet(archive.location.source(path, int(item["size"])), path)
            rows += parquet.metadata.num_rows
            parquet.close(force=True)
    return rows
