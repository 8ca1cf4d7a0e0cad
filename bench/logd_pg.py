"""logd on PostgreSQL against raw psycopg on the same documents, same server, same run.

A PostgreSQL of its own is started for the run (retain.servers.PostgresServer: loopback, fsync off, so the
figures measure the work, not the disk). Four workloads:

- patches: PATCHES one-op patches (``set jobs.jN = {...}``) through the store, each its own commit; against one
  transaction per write holding an ``INSERT`` of the same document's JSON and one history row. Alternating
  rounds, median of ROUNDS -> ``ratio``;
- bulk: BULK_PATCHES patches of 1,000 new records each through the store (items/s); against one transaction per
  patch: the 1,000 documents by ``executemany`` and one history row -> ``ratio_bulk``;
- retain: a retain pass over ITEMS items through the store (a third are done, and 11 of September's 28 days are
  old enough: 13% expire), against one raw ``DELETE ... WHERE`` on the same documents in a table (jsonb operators
  on the stamp and the status). Both are built once; each of ROUNDS rounds runs the two on fresh copies (CREATE
  DATABASE ... TEMPLATE), alternating which goes first; the medians -> ``ratio_retain`` (time over time: lower is
  better, target <= 3);
- two servers: WRITERS writer processes, each PER_WRITER patches over a socket, all on one ``retain logd serve``,
  then half on each of two servers on the same database -> ``scale_two_servers`` (writes/s two ÷ one).

Run: python3 dev.py bench logd_pg [--items N] [--patches N] [--rounds N] [--per-writer N]
Prints a table, then one JSON line: {"ratio", "ratio_bulk", "ratio_retain", "scale_two_servers", ...}.
Figures on a shared machine are noisy: read them as orders of magnitude, and compare within one run.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

import psycopg

from retain.logd import Store, run_retain
from retain.servers import PostgresServer
from retain.servers._process import free_port

NOW = "2026-09-12T08:00:00Z"
RULE = {"path": "jobs.*", "match": {"status": "done"}, "age": ".updatedAt", "after": "1d"}

WRITER = """
import sys, time
from retain.logd.client import Client
port, name, count = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
with Client(("127.0.0.1", port), author=name) as client:
    sys.stdout.write("ready\\n"); sys.stdout.flush()
    sys.stdin.readline()
    for n in range(count):
        client.patch([{"set": f"jobs.{name}-{n}", "value": {"status": "done", "n": n}}])
"""


def document(index: int) -> dict:
    return {"status": ("done", "running", "canceled")[index % 3],
            "updatedAt": f"2026-09-{1 + index % 28:02d}T07:00:00Z", "attempts": index % 5}


def timed(function: Callable[[], object]) -> float:
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


class Bench:
    def __init__(self, server: PostgresServer) -> None:
        self.server = server
        self.admin = psycopg.connect(server.url, autocommit=True)
        self.made = 0

    def database(self) -> str:
        self.made += 1
        name = f"bench{self.made}"
        self.admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        self.admin.execute(f'CREATE DATABASE "{name}" TEMPLATE template0')
        return self.server.database_url(name)

    def copy(self, url: str) -> str:
        """A new database copied from the one at ``url`` (which no connection may hold)."""
        self.made += 1
        name = f"bench{self.made}"
        template = url.rsplit("/", 1)[1]
        self.admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
        return self.server.database_url(name)

    def drop(self, url: str) -> None:
        self.admin.execute(f'DROP DATABASE "{url.rsplit("/", 1)[1]}" WITH (FORCE)')

    def raw(self) -> psycopg.Connection:
        db = psycopg.connect(self.database(), autocommit=True)
        db.execute("CREATE TABLE docs (key text COLLATE \"C\" PRIMARY KEY, doc text NOT NULL)")
        db.execute("CREATE TABLE history (number bigserial PRIMARY KEY, time double precision, doc text)")
        return db

    def store(self) -> Store:
        store = Store.open(self.database())
        store.session().patch([{"set": "jobs", "value": {}}])
        return store


def patches_store(bench: Bench, count: int) -> float:
    store = bench.store()
    session = store.session(author="bench")
    seconds = timed(lambda: [session.patch([{"set": f"jobs.j{i}", "value": document(i)}]) for i in range(count)])
    store.close()
    return count / seconds


def patches_raw(bench: Bench, count: int) -> float:
    db = bench.raw()

    def run() -> None:
        for i in range(count):
            text = json.dumps(document(i))
            with db.transaction():
                db.execute("INSERT INTO docs (key, doc) VALUES (%s, %s)", (f"j{i}", text))
                db.execute("INSERT INTO history (time, doc) VALUES (%s, %s)", (time.time(), text))

    seconds = timed(run)
    db.close()
    return count / seconds


def bulk_store(bench: Bench, patches: int, size: int) -> float:
    store = bench.store()
    session = store.session(author="bench")
    batches = [[{"set": f"jobs.j{p}_{i}", "value": document(i)} for i in range(size)] for p in range(patches)]
    seconds = timed(lambda: [session.patch(batch) for batch in batches])
    store.close()
    return patches * size / seconds


def bulk_raw(bench: Bench, patches: int, size: int) -> float:
    db = bench.raw()
    batches = [[(f"j{p}_{i}", document(i)) for i in range(size)] for p in range(patches)]

    def run() -> None:
        for batch in batches:
            rows = [(key, json.dumps(doc)) for key, doc in batch]
            with db.transaction(), db.cursor() as cursor:
                cursor.executemany("INSERT INTO docs (key, doc) VALUES (%s, %s)", rows)
                cursor.execute("INSERT INTO history (time, doc) VALUES (%s, %s)",
                               (time.time(), json.dumps([{"set": key, "value": doc} for key, doc in batch])))

    seconds = timed(run)
    db.close()
    return patches * size / seconds


def built_store(bench: Bench, items: int) -> str:
    """A store database holding ITEMS jobs (a third done, stamped across September), VACUUM ANALYZE'd."""
    url = bench.database()
    with Store.open(url) as store:
        session = store.session(author="bench")
        session.patch([{"set": "jobs", "value": {}}])
        for start in range(0, items, 10_000):
            session.patch([{"set": f"jobs.j{i:07d}", "value": document(i)}
                           for i in range(start, min(items, start + 10_000))])
        store.backend.reclaim()  # VACUUM ANALYZE's work done before any clock starts, as for the raw table
    return url


def built_raw(bench: Bench, items: int) -> str:
    """The same documents in a plain table ``docs(key, doc)``, VACUUM ANALYZE'd."""
    db = bench.raw()
    with db.cursor() as cursor, cursor.copy("COPY docs (key, doc) FROM STDIN") as copy:
        for i in range(items):
            copy.write_row((f"j{i:07d}", json.dumps(document(i))))
    db.execute("VACUUM ANALYZE docs")
    name = db.info.dbname
    db.close()
    return bench.server.database_url(name)


def retain_store(url: str, items: int) -> tuple[float, int]:
    """The pass over the store at ``url``: seconds, items deleted."""
    with Store.open(url) as store:
        store.settings = type(store.settings)(read_budget=items * 2 + 10)
        result: list[int] = []
        seconds = timed(lambda: result.append(run_retain(store.session(author="bench"),
                                                         {"now": NOW, "batch": 10_000, "what": [RULE]}).deleted))
    return seconds, result[0]


def retain_raw(url: str) -> tuple[float, int]:
    """One raw DELETE of the same rows on the table at ``url``: seconds, rows deleted."""
    with psycopg.connect(url, autocommit=True) as db:
        deleted: list[int] = []
        seconds = timed(lambda: deleted.append(db.execute(
            "DELETE FROM docs WHERE doc::jsonb ->> 'status' = 'done' AND doc::jsonb ->> 'updatedAt' <= %s",
            ("2026-09-11T08:00:00Z",)).rowcount))
    return seconds, deleted[0]


def retain_rounds(bench: Bench, items: int, rounds: int) -> tuple[list[float], list[float], set[int]]:
    """Each round the pass and the raw DELETE on fresh copies of one built store and one built table (CREATE
    DATABASE ... TEMPLATE), in alternating order so that drift hits both alike: their seconds, and the counts."""
    store_url, raw_url = built_store(bench, items), built_raw(bench, items)
    passes: list[float] = []
    raws: list[float] = []
    counts: set[int] = set()
    for round_index in range(rounds):
        for side in ("pass", "raw") if round_index % 2 == 0 else ("raw", "pass"):
            copy = bench.copy(store_url if side == "pass" else raw_url)
            took, deleted = retain_store(copy, items) if side == "pass" else retain_raw(copy)
            bench.drop(copy)  # a million-item copy is some hundreds of MB: one at a time on the disk
            (passes if side == "pass" else raws).append(took)
            counts.add(deleted)
    return passes, raws, counts


def serve(url: str) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    process = subprocess.Popen([sys.executable, "-c", "from retain.cli import main; main()", "logd", "serve",
                                "--db", url, "--listen", f"127.0.0.1:{port}"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return process, port
        except OSError:
            if time.monotonic() > deadline or process.poll() is not None:
                raise RuntimeError("logd serve did not start") from None
            time.sleep(0.05)


def writes_per_second(bench: Bench, servers: int, writers: int, per_writer: int) -> float:
    url = bench.database()
    Store.open(url).close()
    with Store.open(url) as store:
        store.session().patch([{"set": "jobs", "value": {}}])
    running = [serve(url) for _ in range(servers)]
    clients = [subprocess.Popen([sys.executable, "-c", WRITER, str(running[index % servers][1]), f"w{index}",
                                 str(per_writer)], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
               for index in range(writers)]
    try:
        for client in clients:
            assert client.stdout is not None and client.stdout.readline() == b"ready\n"
        start = time.perf_counter()
        for client in clients:
            assert client.stdin is not None
            client.stdin.write(b"go\n")
            client.stdin.flush()
        for client in clients:
            if client.wait(timeout=600) != 0:
                raise RuntimeError("a writer failed")
        seconds = time.perf_counter() - start
    finally:
        for process, _ in running:
            process.terminate()
            process.wait(timeout=30)
    return writers * per_writer / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, default=1_000_000,
                        help="items in the retain pass's container [1000000]")
    parser.add_argument("--patches", type=int, default=1_000, help="single-item patches per round [1000]")
    parser.add_argument("--bulk-patches", type=int, default=10, help="1,000-record patches per round [10]")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds, the median kept [3]")
    parser.add_argument("--writers", type=int, default=4, help="writer processes in the two-server run [4]")
    parser.add_argument("--per-writer", type=int, default=500, help="patches per writer process [500]")
    args = parser.parse_args()
    with PostgresServer() as server:
        bench = Bench(server)
        store_p, raw_p, store_b, raw_b = [], [], [], []
        for _ in range(args.rounds):
            store_p.append(patches_store(bench, args.patches))
            raw_p.append(patches_raw(bench, args.patches))
            store_b.append(bulk_store(bench, args.bulk_patches, 1_000))
            raw_b.append(bulk_raw(bench, args.bulk_patches, 1_000))
        passes, raws, deleted = retain_rounds(bench, args.items, args.rounds)
        if len(deleted) != 1:
            raise SystemExit(f"the pass and the raw DELETE disagree on the rows: {sorted(deleted)}")
        retain_s, raw_s = statistics.median(passes), statistics.median(raws)
        one = writes_per_second(bench, 1, args.writers, args.per_writer)
        two = writes_per_second(bench, 2, args.writers, args.per_writer)
        bench.admin.close()
    figures = {
        "patches_per_s": statistics.median(store_p), "raw_patches_per_s": statistics.median(raw_p),
        "bulk_items_per_s": statistics.median(store_b), "raw_bulk_items_per_s": statistics.median(raw_b),
        "retain_s": retain_s, "raw_delete_s": raw_s, "items": args.items, "retain_deleted": min(deleted),
        "one_server_writes_per_s": one, "two_servers_writes_per_s": two,
    }
    print(f"{'workload':<34}{'logd on PG':>14}{'raw psycopg':>14}{'ratio':>9}")
    print(f"{'single-item patches/s':<34}{figures['patches_per_s']:>14.0f}{figures['raw_patches_per_s']:>14.0f}"
          f"{figures['patches_per_s'] / figures['raw_patches_per_s']:>9.2f}")
    print(f"{'1,000-record patches, items/s':<34}{figures['bulk_items_per_s']:>14.0f}"
          f"{figures['raw_bulk_items_per_s']:>14.0f}{figures['bulk_items_per_s'] / figures['raw_bulk_items_per_s']:>9.2f}")
    print(f"{f'retain over {args.items} items, s':<34}{retain_s:>14.2f}{raw_s:>14.2f}{retain_s / raw_s:>9.2f}"
          f"   (both deleted {min(deleted)}; each run: {', '.join(f'{p:.2f}/{r:.2f}' for p, r in zip(passes, raws, strict=False))})")
    print(f"{'writes/s, one server':<34}{one:>14.0f}")
    print(f"{'writes/s, two servers':<34}{two:>14.0f}{'':>14}{two / one:>9.2f}")
    print(json.dumps({
        "ratio": round(figures["patches_per_s"] / figures["raw_patches_per_s"], 3),
        "ratio_bulk": round(figures["bulk_items_per_s"] / figures["raw_bulk_items_per_s"], 3),
        "ratio_retain": round(retain_s / raw_s, 3),
        "scale_two_servers": round(two / one, 3),
        **{name: round(value, 3) for name, value in figures.items()},
        "postgres": "fsync off, loopback", "cpus": os.cpu_count(),
    }))


if __name__ == "__main__":
    main()
