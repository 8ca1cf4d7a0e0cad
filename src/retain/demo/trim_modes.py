"""One feed, four copies, trimmed by length and by age, approximate and exact."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from rich.console import Console
from rich.table import Table

from retain.demo.feed import guess_events
from retain.servers import RedisServer
from retain.streams import StreamRef, trim
from retain.windows import MaxAge, MaxLen, Window

__all__ = ["trim_modes"]

EVENTS = 5000
SPACING = timedelta(milliseconds=1440)  # 5000 events over the last two hours


def trim_modes(server: RedisServer, console: Console) -> None:
    """Append the feed to four streams, trim each with one window and tabulate what went."""
    now = datetime.now(UTC)
    cases: list[tuple[StreamRef, Window]] = [
        (StreamRef("codemojex", "feed.len.approx"), MaxLen(1250)),
        (StreamRef("codemojex", "feed.len.exact"), MaxLen(1250, approx=False)),
        (StreamRef("codemojex", "feed.age.approx"), MaxAge("30m")),
        (StreamRef("codemojex", "feed.age.exact"), MaxAge("30m", approx=False)),
    ]
    with server.client(decode_responses=True) as conn:
        pipe = conn.pipeline(transaction=False)
        for entry_id, fields in guess_events(EVENTS, end=now, spacing=SPACING):
            for stream, _ in cases:
                pipe.xadd(stream.key, fields, id=entry_id)
        pipe.execute()
        node = conn.config_get("stream-node-max-entries")["stream-node-max-entries"]

        console.print(f"queue codemojex: {EVENTS} guess events over two hours, four copies; now = {now:%H:%M:%S}Z")
        table = Table(title="one XTRIM per stream",
                      caption=f"~ removes whole macro-nodes (stream-node-max-entries {node}) and may keep "
                              "a few extra; = cuts exactly at the edge. Neither reaches inside the window.")
        for column in ("stream", "window", "before", "after", "removed", "oldest kept"):
            table.add_column(column, justify="right" if column in ("before", "after", "removed") else "left")
        for stream, window in cases:
            before = conn.xlen(stream.key)
            removed = trim(conn, stream, window, now=now)
            after = conn.xlen(stream.key)
            oldest = conn.xrange(stream.key, count=1)[0][0]
            oldest_at = datetime.fromtimestamp(int(oldest.split("-")[0]) / 1000, UTC)
            table.add_row(stream.name, window.describe(), str(before), str(after), str(removed),
                          f"{oldest_at:%H:%M:%S}Z")
    console.print(table)
