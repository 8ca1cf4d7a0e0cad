"""Producers keep filling a feed nobody reads, and the driver keeps it bounded on its own beat."""

from __future__ import annotations

import threading
import time

from rich.console import Console
from rich.table import Table

from retain.demo.feed import PLAYERS
from retain.retention import RetentionDriver
from retain.servers import RedisServer
from retain.streams import StreamRef
from retain.windows import MaxLen

__all__ = ["bounded_feed"]

WINDOW = 1_000
TICK = 0.1          # seconds between beats
PRODUCE_FOR = 2.0   # seconds the producer appends
SAMPLES = 8
BATCH = 25          # entries per producer round trip
PAUSE = 0.005       # between round trips: about 5,000 entries a second, readable numbers


def bounded_feed(server: RedisServer, console: Console) -> None:
    """Run a producer against one stream under MaxLen ~ WINDOW while the driver beats; sample its length."""
    feed = StreamRef("codemojex", "live")
    appended = [0]
    done = threading.Event()

    def produce() -> None:
        with server.client() as conn:
            while not done.is_set():
                pipe = conn.pipeline(transaction=False)
                for index in range(BATCH):
                    pipe.xadd(feed.key, {"player": PLAYERS[index % len(PLAYERS)], "guess": "🍎", "outcome": "miss"})
                pipe.execute()
                appended[0] += BATCH
                done.wait(PAUSE)

    table = Table(title=f"the driver bounds a feed nobody reads (MAXLEN ~ {WINDOW}, a beat every {TICK}s)")
    for column in ("t", "appended", "length now", "beats", "removed"):
        table.add_column(column, justify="right")
    with server.client() as conn:
        node = int(conn.config_get("stream-node-max-entries")["stream-node-max-entries"])
        removed = [0]
        driver = RetentionDriver(conn, [(feed, MaxLen(WINDOW))], tick=TICK,
                                 on_report=lambda report: removed.__setitem__(0, removed[0] + report.removed))
        producer = threading.Thread(target=produce, name="demo-producer")
        started = time.monotonic()
        peak = 0
        with driver:
            try:
                producer.start()
                for _ in range(SAMPLES):
                    time.sleep(PRODUCE_FOR / SAMPLES)
                    length = conn.xlen(feed.key)
                    peak = max(peak, length)
                    table.add_row(f"{time.monotonic() - started:.2f}s", f"{appended[0]:,}", f"{length:,}",
                                  str(driver.beats), f"{removed[0]:,}")
            finally:
                # Also on Ctrl-C: the producer stops before the server it appends to goes away.
                done.set()
                if producer.ident is not None:  # it started
                    producer.join()
        groups = conn.xinfo_stream(feed.key)["groups"]
    elapsed = time.monotonic() - started
    rate = appended[0] / elapsed
    bound = WINDOW + rate * TICK + node
    console.print(table)
    # Short lines: the demo's test reads them, and a terminal must not wrap them.
    console.print(f"no consumer read the feed (consumer groups: {groups}); the beat alone bounds it")
    console.print(f"appended {appended[0]:,} in {elapsed:.1f}s; the driver removed {removed[0]:,} in {driver.beats} beats")
    console.print(f"longest sample {peak:,} entries; window + rate x tick + one node")
    console.print(f"  = {WINDOW:,} + {rate * TICK:,.0f} + {node} = {bound:,.0f}")
