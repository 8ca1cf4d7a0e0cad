"""logd's write path and its big reads, against raw sqlite3 on the same documents, same run.

Three workloads:
- patches: PATCHES one-op patches (``set jobs.jN = {...}``), each its own commit, through
  the store; against one ``INSERT`` of the same document per transaction in a raw
  sqlite3 table with the same pragmas (WAL). Alternating rounds, median of ROUNDS; at
  ``synchronous=normal`` (the store's own work shows) and ``full`` (the default: fsync-bound);
- bulk: BULK_PATCHES patches of BULK new records each (a producer's batch: the bulk write path),
  each its own commit; against one ``executemany`` of the same documents' JSON per transaction
  into a raw table, same pragmas (WAL, synchronous=normal). Alternating rounds, median of ROUNDS;
- the same patches and bulk patches into a container the store keeps a heads index of (a retain rule's first
  pass built it): what every write pays for the rule's fast pass (docs/logd-retain.md);
- list: a container of ITEMS items (built in patches of 10,000), a tenth of them then
  updated; ``list jobs.*`` at the current commit and at the older commit before the
  updates; against ``SELECT`` + ``json.loads`` of the same ITEMS documents from a raw table.

Run: python3 dev.py bench logd_write [ITEMS]
Prints a table, then one JSON line: {"ratio": store patches/s / raw inserts/s (normal),
"ratio_bulk": store records/s in 1,000-record patches / raw executemany rows/s, "ratio_indexed",
"ratio_bulk_indexed": the same into an indexed container, ...}.
"""

from __future__ import annotations

import json
import sqlite3
import statistics
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

from retain.logd import Session, Store
from retain.logd.retain import run_retain
from retain.logd.settings import Settings

ROUNDS = 5
PATCHES = 2_000
BULK = 1_000
BULK_PATCHES = 20
ITEMS = 1_000_000
BUILD_BATCH = 10_000


def document(index: int) -> dict:
    return {"status": ("done", "running", "canceled")[index % 3],
            "updatedAt": f"2026-09-{1 + index % 28:02d}T07:00:00Z", "attempts": index % 5}


def raw_table(path: Path, synchronous: str) -> sqlite3.Connection:
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute(f"PRAGMA synchronous = {synchronous}")
    db.execute("CREATE TABLE IF NOT EXISTS docs (key TEXT PRIMARY KEY, doc TEXT NOT NULL)")
    return db


def timed(function) -> float:
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def indexed(session: Session) -> None:
    """Have the store keep its heads index of a retain rule over ``jobs`` (its first pass, over an empty
    container, builds it): from then on every version written into ``jobs`` pays the rule's test."""
    session.patch([{"set": "jobs", "value": {}}])
    run_retain(session, {"now": "2000-01-01T00:00:00Z", "what": [
        {"path": "jobs.*", "match": {"status": "done"}, "age": ".updatedAt", "after": "1d"}]})


def patches(directory: Path, synchronous: str, index: bool = False) -> tuple[float, float]:
    """Median patches/s through the store and inserts/s raw, alternating rounds; ``index``: into a container the
    store keeps a heads index of."""
    name = f"{synchronous}{'-indexed' if index else ''}"
    store = Store.open(str(directory / f"store-{name}.sqlite3"), settings=Settings(synchronous=synchronous))
    session = store.session(author="bench")
    if index:
        indexed(session)
    raw = raw_table(directory / f"raw-{name}.sqlite3", synchronous)
    times: dict[str, list[float]] = {"store": [], "raw": []}

    def through_store(offset: int) -> None:
        for index in range(offset, offset + PATCHES):
            session.patch([{"set": f"jobs.j{index}", "value": document(index)}])

    def raw_inserts(offset: int) -> None:
        for index in range(offset, offset + PATCHES):
            raw.execute("BEGIN IMMEDIATE")
            raw.execute("INSERT INTO docs (key, doc) VALUES (?, ?)", (f"jobs.j{index}", json.dumps(document(index))))
            raw.execute("COMMIT")

    for round_index in range(ROUNDS):
        sides = [("store", through_store), ("raw", raw_inserts)]
        for side, function in sides[::-1] if round_index % 2 else sides:  # drift hits both alike
            times[side].append(timed(partial(function, round_index * PATCHES)))
    store.close()
    raw.close()
    return PATCHES / statistics.median(times["store"]), PATCHES / statistics.median(times["raw"])


def bulk_patches(directory: Path, index: bool = False) -> tuple[float, float]:
    """Median records/s written in patches of BULK new records through the store, and rows/s in one raw
    executemany of the same documents' JSON per transaction; alternating rounds, synchronous=normal. ``index``:
    into a container the store keeps a heads index of."""
    name = "bulk-indexed" if index else "bulk"
    store = Store.open(str(directory / f"{name}.sqlite3"), settings=Settings(synchronous="normal"))
    session = store.session(author="bench")
    if index:
        indexed(session)
    else:
        session.patch([{"set": "jobs", "value": {}}])
    raw = raw_table(directory / f"{name}-raw.sqlite3", "normal")
    times: dict[str, list[float]] = {"store": [], "raw": []}

    def through_store(offset: int) -> None:
        for first in range(offset, offset + BULK * BULK_PATCHES, BULK):
            session.patch([{"set": f"jobs.j{index}", "value": document(index)} for index in range(first, first + BULK)])

    def raw_executemany(offset: int) -> None:
        for first in range(offset, offset + BULK * BULK_PATCHES, BULK):
            raw.execute("BEGIN IMMEDIATE")
            raw.executemany("INSERT INTO docs (key, doc) VALUES (?, ?)",
                            ((f"jobs.j{index}", json.dumps(document(index))) for index in range(first, first + BULK)))
            raw.execute("COMMIT")

    for round_index in range(ROUNDS):
        sides = [("store", through_store), ("raw", raw_executemany)]
        for side, function in sides[::-1] if round_index % 2 else sides:  # drift hits both alike
            times[side].append(timed(partial(function, round_index * BULK * BULK_PATCHES)))
    store.close()
    raw.close()
    records = BULK * BULK_PATCHES
    return records / statistics.median(times["store"]), records / statistics.median(times["raw"])


def listing(directory: Path, items: int) -> dict[str, float]:
    store = Store.open(str(directory / "list.sqlite3"), settings=Settings(synchronous="off", read_budget=2 * items + 1))
    session = store.session(author="bench")
    build = timed(lambda: [session.patch([{"set": f"jobs.j{index:07d}", "value": document(index)}
                                          for index in range(first, min(first + BUILD_BATCH, items))])
                           for first in range(0, items, BUILD_BATCH)])
    older = store.head
    for first in range(0, items, BUILD_BATCH * 10):  # a tenth of the items get a newer version
        session.patch([{"set": f"jobs.j{index:07d}.status", "value": "archived"}
                       for index in range(first, min(first + BUILD_BATCH, items))])
    current_s = timed(lambda: session.list("jobs.*"))
    older_s = timed(lambda: session.list("jobs.*", at=older))
    assert len(session.list("jobs.*", at=older).items) == items
    store.close()
    raw = raw_table(directory / "list-raw.sqlite3", "off")
    raw.execute("BEGIN")
    raw.executemany("INSERT INTO docs (key, doc) VALUES (?, ?)",
                    ((f"jobs.j{index:07d}", json.dumps(document(index))) for index in range(items)))
    raw.execute("COMMIT")
    raw_s = timed(lambda: {key: json.loads(doc) for key, doc in raw.execute("SELECT key, doc FROM docs ORDER BY key")})
    raw.close()
    return {"build_items_per_s": items / build, "current_s": current_s, "older_s": older_s, "raw_s": raw_s}


def main() -> None:
    items = int(sys.argv[1]) if len(sys.argv) > 1 else ITEMS
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        store_normal, raw_normal = patches(directory, "normal")
        store_full, raw_full = patches(directory, "full")
        store_bulk, raw_bulk = bulk_patches(directory)
        store_indexed, raw_indexed = patches(directory, "normal", index=True)
        store_bulk_indexed, raw_bulk_indexed = bulk_patches(directory, index=True)
        listed = listing(directory, items)
    ratio, ratio_full, ratio_bulk = store_normal / raw_normal, store_full / raw_full, store_bulk / raw_bulk
    ratio_indexed, ratio_bulk_indexed = store_indexed / raw_indexed, store_bulk_indexed / raw_bulk_indexed
    print(f"{'workload':<28} {'store':>14} {'raw sqlite3':>14} {'ratio':>7}")
    print(f"{'patches, synchronous=normal':<28} {store_normal:>12.0f}/s {raw_normal:>12.0f}/s {ratio:>7.3f}"
          f"   ({PATCHES} one-op commits, median of {ROUNDS})")
    print(f"{'patches, synchronous=full':<28} {store_full:>12.0f}/s {raw_full:>12.0f}/s {ratio_full:>7.3f}")
    print(f"{'1,000-record patches':<28} {store_bulk:>12.0f}/s {raw_bulk:>12.0f}/s {ratio_bulk:>7.3f}"
          f"   (records/s; raw: one executemany per transaction)")
    print(f"{'patches, a heads index kept':<28} {store_indexed:>12.0f}/s {raw_indexed:>12.0f}/s {ratio_indexed:>7.3f}"
          "   (synchronous=normal; into a container a retain rule's index covers)")
    print(f"{'1,000-record, index kept':<28} {store_bulk_indexed:>12.0f}/s {raw_bulk_indexed:>12.0f}/s "
          f"{ratio_bulk_indexed:>7.3f}")
    print(f"{'list ' + format(items, ',') + ' items, current':<28} {listed['current_s']:>13.2f}s "
          f"{listed['raw_s']:>13.2f}s {listed['current_s'] / listed['raw_s']:>7.3f}   (raw: SELECT + json.loads)")
    print(f"{'list, older commit':<28} {listed['older_s']:>13.2f}s {listed['raw_s']:>13.2f}s "
          f"{listed['older_s'] / listed['raw_s']:>7.3f}")
    print(f"{'build (10,000-op patches)':<28} {listed['build_items_per_s']:>12.0f}/s")
    print(json.dumps({"bench": "logd_write", "ratio": round(ratio, 4), "ratio_bulk": round(ratio_bulk, 4),
                      "ratio_full": round(ratio_full, 4), "ratio_indexed": round(ratio_indexed, 4),
                      "ratio_bulk_indexed": round(ratio_bulk_indexed, 4), "store_bulk_records_per_s": round(store_bulk),
                      "store_bulk_indexed_records_per_s": round(store_bulk_indexed),
                      "raw_executemany_rows_per_s": round(raw_bulk),
                      "store_patches_per_s": round(store_normal), "raw_inserts_per_s": round(raw_normal),
                      "store_patches_per_s_full": round(store_full), "raw_inserts_per_s_full": round(raw_full),
                      "list_items": items, "list_current_s": round(listed["current_s"], 3),
                      "list_older_s": round(listed["older_s"], 3), "list_raw_s": round(listed["raw_s"], 3),
                      "build_items_per_s": round(listed["build_items_per_s"])}))


if __name__ == "__main__":
    main()
