"""The activity feed under a MaxLen with archiving; nothing trimmed is lost."""

from __future__ import annotations

import tempfile
from datetime import datetime, timedelta, timezone

from rich.console import Console
from rich.table import Table

from retain.archive import Archive, StreamId, fold_then_trim, read
from retain.demo.feed import guess_events
from retain.servers import RedisServer
from retain.streams import StreamRef
from retain.windows import MaxLen

__all__ = ["archive_feed"]

ROUNDS = 6
PER_ROUND = 1000
KEEP = 1500
SPACING = timedelta(milliseconds=600)


def archive_feed(server: RedisServer, console: Console) -> None:
    """Append the feed round by round, fold then trim after each, and prove the merge-read whole."""
    feed = StreamRef("codemojex", "activity")
    window = MaxLen(KEEP, approx=False)
    events = list(guess_events(ROUNDS * PER_ROUND, end=datetime.now(timezone.utc), spacing=SPACING, seed=11))
    with tempfile.TemporaryDirectory(prefix="retain-demo-archive-") as directory, \
            server.client() as conn:
        archive = Archive(directory)
        console.print(f"\nqueue codemojex: the activity feed, {ROUNDS} rounds of {PER_ROUND} events, "
                      f"kept to {window.describe()}; each round folds into {directory} before it trims")
        table = Table(title="fold before trim, round by round",
                      caption="fold_then_trim: fold what the window drops, then XTRIM MINID just past W; "
                              "a trim can only remove what is archived.")
        for column in ("round", "appended", "folded", "segments", "W minted", "trimmed", "live", "archived"):
            table.add_column(column, justify="left" if column.startswith("W") else "right", no_wrap=True)
        for round_index in range(ROUNDS):
            pipe = conn.pipeline(transaction=False)
            for entry_id, fields in events[round_index * PER_ROUND:(round_index + 1) * PER_ROUND]:
                pipe.xadd(feed.key, fields, id=entry_id)
            pipe.execute()
            result = fold_then_trim(conn, feed, archive, window, segment_entries=PER_ROUND)
            manifest = archive.manifest(feed)
            table.add_row(str(round_index + 1), str((round_index + 1) * PER_ROUND), str(result.fold.entries),
                          str(len(manifest.segments)), _minted(manifest.watermark), str(result.removed),
                          str(conn.xlen(feed.key)), str(manifest.entries))
        console.print(table)
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


def _minted(watermark: StreamId | None) -> str:
    if watermark is None:
        return "none"
    return f"{datetime.fromtimestamp(watermark.ms / 1000, timezone.utc):%H:%M:%S}Z"


def _numeric(entry_id: bytes) -> tuple[int, int]:
    ms, seq = entry_id.split(b"-")
    return int(ms), int(seq)
