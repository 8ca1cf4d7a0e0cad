"""The activity feed under a MaxLen with archiving: the driver folds before it trims, and nothing is lost."""

from __future__ import annotations

import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta

from rich.console import Console
from rich.table import Table

from retain.archive import Archive, StreamId, read
from retain.demo.feed import guess_events
from retain.retention import RetentionDriver, StreamPolicy, SweepReport
from retain.servers import RedisServer
from retain.streams import StreamRef
from retain.windows import MaxLen

__all__ = ["archive_feed"]

ROUNDS = 6
PER_ROUND = 1000
KEEP = 1500
SPACING = timedelta(milliseconds=600)
TICK = 0.1          # seconds between the driver's beats
ROUND_EVERY = 0.25  # seconds between the feed's rounds: a beat or two in between
SETTLE = 10.0       # the most seconds to wait for the beats after the last round


def archive_feed(server: RedisServer, console: Console) -> None:
    """Append the feed round by round while the driver beats with an archive, then prove the merge-read whole."""
    feed = StreamRef("codemojex", "activity")
    window = MaxLen(KEEP, approx=False)
    events = list(guess_events(ROUNDS * PER_ROUND, end=datetime.now(UTC), spacing=SPACING, seed=11))
    with tempfile.TemporaryDirectory(prefix="retain-demo-archive-") as directory, \
            server.client() as conn:
        archive = Archive(directory)
        # Short lines: the demo's test reads them, and a terminal must not wrap them.
        console.print(f"\nqueue codemojex: the activity feed, {ROUNDS} rounds of {PER_ROUND} events,")
        console.print(f"kept to {window.describe()} by a driver beating every {TICK}s with archive=True:")
        console.print("each beat folds what the window drops into the archive, then trims")
        console.print(f"archive: {directory}")
        beats = _Beats()
        driver = RetentionDriver(conn, [StreamPolicy(feed, window, archive=True)], archive=archive, tick=TICK,
                                 measure_lengths=True, on_report=beats.add)
        with driver:
            for round_index in range(ROUNDS):
                pipe = conn.pipeline(transaction=False)
                for entry_id, fields in events[round_index * PER_ROUND:(round_index + 1) * PER_ROUND]:
                    pipe.xadd(feed.key, fields, id=entry_id)
                pipe.execute()
                beats.appended = (round_index + 1) * PER_ROUND
                time.sleep(ROUND_EVERY)
            # Two more beats: the second one began after the last round was appended.
            beats.wait_for(len(beats) + 2, SETTLE)
        console.print(beats.table(feed.key))
        merged = list(read(conn, feed, archive))
        live = conn.xlen(feed.key)
    appended = [(entry_id.encode(), {name.encode(): value.encode() for name, value in fields.items()})
                for entry_id, fields in events]
    ids = [entry_id for entry_id, _ in merged]
    exact = merged == appended
    mark = "[green]✓[/]" if exact else "[red]✗[/]"
    console.print(f"merge-read: {len(merged)} entries for {len(appended)} appended "
                  f"({len(merged) - live} from the archive, {live} live); "
                  f"each once: {len(set(ids)) == len(ids)}; in id order: {ids == sorted(ids, key=_numeric)}; "
                  f"same ids and fields as appended: {exact} {mark}")
    if not exact:
        raise AssertionError("the merge-read lost, repeated or reordered an entry")


class _Beats:
    """The driver's reports, kept by its on_report hook with how much the feed had appended by then."""

    def __init__(self) -> None:
        self.appended = 0
        self._rows: list[tuple[SweepReport, int]] = []
        self._changed = threading.Condition()

    def add(self, report: SweepReport) -> None:
        with self._changed:
            self._rows.append((report, self.appended))
            self._changed.notify_all()

    def __len__(self) -> int:
        with self._changed:
            return len(self._rows)

    def wait_for(self, count: int, timeout: float) -> None:
        with self._changed:
            if not self._changed.wait_for(lambda: len(self._rows) >= count, timeout):
                raise AssertionError(f"the driver made {len(self._rows)} beats in {timeout}s, not {count}")

    def table(self, key: str) -> Table:
        """One row per beat that folded or trimmed something."""
        table = Table(title="the driver folds before it trims, beat by beat",
                      caption="each beat: fold what the window drops, then XTRIM MINID just past W; "
                              "a trim can only remove what is archived.")
        for column in ("beat", "appended", "folded", "W minted", "trimmed", "live", "archived"):
            table.add_column(column, justify="left" if column.startswith("W") else "right", no_wrap=True)
        archived = 0
        with self._changed:
            rows = list(self._rows)
        for number, (report, appended) in enumerate(rows, start=1):
            folded, removed = report.folded_by.get(key, 0), report.removed_by.get(key, 0)
            archived += folded
            if folded or removed or report.failures:
                table.add_row(str(number), str(appended), str(folded), _minted(report.watermarks.get(key)),
                              str(removed), str(report.lengths.get(key, "?")), str(archived))
        return table


def _minted(watermark: StreamId | None) -> str:
    if watermark is None:
        return "none"
    return f"{datetime.fromtimestamp(watermark.ms / 1000, UTC):%H:%M:%S}Z"


def _numeric(entry_id: bytes) -> tuple[int, int]:
    ms, seq = entry_id.split(b"-")
    return int(ms), int(seq)
