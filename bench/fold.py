"""Fold throughput against a raw redis-py XRANGE loop over the same entries, same run.

One stream of ENTRIES activity-feed entries (four fields each). Timed in
alternating rounds (median of ROUNDS):
- raw: ``conn.xrange(key, low, "+", count=COUNT)`` in a loop until the stream is read;
- fold: ``retain.archive.fold`` of the whole stream into a fresh local-directory
  archive (the default store): the same XRANGE chunks, plus the table's columns,
  Parquet encoding and the Delta commits (one per 100,000-entry file).
A fold into ``memory://`` (a temporary directory) is timed too, and the fold
without each of its speed measures (:mod:`retain.archive._pipeline`): the
cyclic GC paused, the next XRANGE written to the connection ahead of its use,
the row groups encoded on a thread; and without all three.

The limit is timed in the same rounds: the same XRANGE chunks (their low ids
and reply sizes found before timing) sent over one raw socket, each reply
read as bytes only, no parsing: what one Redis core sends one client.

Run: python3 dev.py bench fold   (--rounds 3 for a quicker look)
Prints a table, then one JSON line: {"ratio": fold entries/s / raw XRANGE entries/s (target >= 0.75),
"ratio_limit": fold entries/s / the limit's entries/s (target >= 0.5),
"entries_per_s": fold entries/s (the moonshot: 1M), "speedup_<measure>": fold entries/s / fold entries/s
without it, ...}.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import socket
import statistics
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from datetime import UTC, datetime, timedelta

import hiredis

from retain.archive import Archive, StreamId, fold
from retain.archive._pipeline import LazyExecutor, paused_gc
from retain.demo.feed import guess_events
from retain.servers import RedisServer
from retain.streams import StreamRef

ROUNDS = 7
ENTRIES = 200_000
COUNT = 1_000
SEGMENT_ENTRIES = 100_000


def fill(conn, stream: StreamRef) -> None:
    pipe = conn.pipeline(transaction=False)
    end = datetime(2026, 9, 12, tzinfo=UTC)
    for index, (entry_id, fields) in enumerate(guess_events(ENTRIES, end=end, spacing=timedelta(milliseconds=5))):
        pipe.xadd(stream.key, fields, id=entry_id)
        if index % 10_000 == 9_999:
            pipe.execute()
    pipe.execute()


def raw_xrange(conn, key: str) -> int:
    read, low = 0, "-"
    while True:
        chunk = conn.xrange(key, low, "+", count=COUNT)
        read += len(chunk)
        if len(chunk) < COUNT:
            return read
        low = str(StreamId.parse(chunk[-1][0]).successor())


def resp(*parts: str | int) -> bytes:
    """A command as RESP bytes, as a client writes it."""
    encoded = [str(part).encode() for part in parts]
    return b"*%d\r\n" % len(encoded) + b"".join(b"$%d\r\n%s\r\n" % (len(part), part) for part in encoded)


def limit_plan(conn, key: str) -> list[tuple[bytes, int]]:
    """The commands of the raw XRANGE loop, each with the size of its reply in bytes (untimed)."""
    host, port = conn.connection_pool.connection_kwargs["host"], conn.connection_pool.connection_kwargs["port"]
    plan: list[tuple[bytes, int]] = []
    with socket.create_connection((host, port)) as sock:
        low = "-"
        while True:
            command = resp("XRANGE", key, low, "+", "COUNT", COUNT)
            sock.sendall(command)
            reader, size, reply = hiredis.Reader(), 0, False
            while reply is False:
                data = sock.recv(1 << 20)
                size += len(data)
                reader.feed(data)
                reply = reader.gets()
            plan.append((command, size))
            if len(reply) < COUNT:
                return plan
            low = str(StreamId.parse(reply[-1][0]).successor())


def limit(address: tuple[str, int], plan: list[tuple[bytes, int]]) -> int:
    """The same chunks over one raw socket, each reply read as bytes only: what Redis sends, unparsed."""
    buffer = bytearray(1 << 20)  # each read overwrites the last: the bytes are only counted
    with socket.create_connection(address) as sock:
        for command, size in plan:
            sock.sendall(command)
            got = 0
            while got < size:
                got += sock.recv_into(buffer)
    return ENTRIES


MEASURES = ("gc_pause", "prefetch", "encoder")
fold_module = importlib.import_module("retain.archive.fold")  # the module (the package's name is the function)


@contextmanager
def without(*measures: str) -> Iterator[None]:
    """Folds inside the block leave ``measures`` out (the bench's view into the fold's workers)."""
    original = fold_module.Workers

    class Fewer:
        def __init__(self, stack) -> None:
            stack.enter_context(nullcontext() if "gc_pause" in measures else paused_gc())
            self.prefetch = "prefetch" not in measures
            self.encoder = None if "encoder" in measures else stack.enter_context(LazyExecutor("bench-encode"))
            self.putter = stack.enter_context(LazyExecutor("bench-put"))

    fold_module.Workers = Fewer  # type: ignore[misc, assignment]
    try:
        yield
    finally:
        fold_module.Workers = original  # type: ignore[misc]


def timed(function) -> tuple[float, int]:
    gc.collect()  # neither side pays for the other's garbage
    start = time.perf_counter()
    entries = function()
    return time.perf_counter() - start, entries


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="alternating rounds (the median is reported)")
    rounds = parser.parse_args().rounds
    stream = StreamRef("bench", "feed")
    variants = {f"no_{measure}": (measure,) for measure in MEASURES} | {"no_speed_work": MEASURES}
    results: dict[str, list[float]] = {name: [] for name in ("limit", "raw", "fold", "fold_memory", *variants)}
    with RedisServer() as server, tempfile.TemporaryDirectory(prefix="retain-bench-fold-") as directory:
        conn = server.client()
        fill(conn, stream)
        plan = limit_plan(conn, stream.key)
        kwargs = conn.connection_pool.connection_kwargs
        address = (kwargs["host"], kwargs["port"])

        def fold_local(round_index: int) -> int:
            archive = Archive(f"{directory}/round{round_index}")
            return fold(conn, stream, archive, count=COUNT, segment_entries=SEGMENT_ENTRIES).entries

        def fold_memory() -> int:
            return fold(conn, stream, Archive("memory://"), count=COUNT, segment_entries=SEGMENT_ENTRIES).entries

        def fold_without(measures: tuple[str, ...]) -> int:
            with without(*measures):
                return fold_memory()

        for round_index in range(rounds):
            sides = [("limit", lambda: limit(address, plan)),
                     ("raw", lambda: raw_xrange(conn, stream.key)),
                     ("fold", lambda round_index=round_index: fold_local(round_index)),
                     ("fold_memory", fold_memory),
                     *((name, lambda measures=measures: fold_without(measures)) for name, measures in variants.items())]
            # Alternate which side goes first so drift on a shared machine hits both alike.
            for name, function in (sides if round_index % 2 == 0 else sides[::-1]):
                seconds, entries = timed(function)
                assert entries == ENTRIES, (name, entries)
                results[name].append(seconds)
        conn.close()

    median = {name: statistics.median(times) for name, times in results.items()}
    rate = {name: ENTRIES / seconds for name, seconds in median.items()}
    ratio = rate["fold"] / rate["raw"]
    labels = {"limit": "limit: bytes, one socket", "raw": "raw XRANGE loop", "fold": "fold -> local dir",
              "fold_memory": "fold -> memory://",
              "no_gc_pause": "  ...without GC pause", "no_prefetch": "  ...without prefetch",
              "no_encoder": "  ...without encoder", "no_speed_work": "  ...without all three"}
    print(f"{'side':<24} {'seconds':>8} {'entries/s':>12} {'ratio':>7}   ({ENTRIES} entries, COUNT {COUNT}, "
          f"median of {rounds}; the 'without' folds into memory://)")
    for name, label in labels.items():
        print(f"{label:<24} {median[name]:>8.3f} {rate[name]:>12,.0f} {rate[name] / rate['raw']:>7.3f}")
    speedups = {f"speedup_{name[3:]}": round(rate["fold_memory"] / rate[name], 4) for name in variants}
    print(json.dumps({"bench": "fold", "ratio": round(ratio, 4), "ratio_limit": round(rate["fold"] / rate["limit"], 4),
                      "entries_per_s": round(rate["fold"]), "limit_entries_per_s": round(rate["limit"]),
                      "ratio_memory": round(rate["fold_memory"] / rate["raw"], 4), **speedups,
                      "raw_entries_per_s": round(rate["raw"]), "entries": ENTRIES, "count": COUNT}))


if __name__ == "__main__":
    main()
