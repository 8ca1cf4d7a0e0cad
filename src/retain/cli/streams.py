"""``retain streams``: the live tier from the command line."""

from __future__ import annotations

from datetime import datetime, timezone

import click

from retain.cli._common import connect, parse_instant, redis_url_option
from retain.streams import RawKey, StreamRef, trim
from retain.streams.keys import DEFAULT_PREFIX
from retain.windows import MaxAge, MaxLen, MinId

__all__ = ["streams"]


@click.group()
def streams() -> None:
    """Bound Redis/Valkey streams to a declared window.

    \b
    Example:
        retain streams trim codemojex activity --maxlen 10000
    """


@streams.command("trim")
@click.argument("queue", required=False)
@click.argument("name", required=False)
@click.option("--key", "raw_key", help="Address a stream by its literal key instead of QUEUE NAME.")
@click.option("--maxlen", type=int, help="Keep the N newest entries.")
@click.option("--max-age", help="Keep entries younger than a duration: 30s, 90m, 1h, 7d, 1y6w.")
@click.option("--min-id", help="Keep entries minted at or after a time, e.g. 2026-09-12T08:00:00Z.")
@click.option("--exact", is_flag=True, help="Trim exactly to the edge (=) instead of whole nodes (~).")
@click.option("--prefix", default=DEFAULT_PREFIX, show_default=True, help="Key prefix of the layout.")
@redis_url_option
def trim_command(queue: str | None, name: str | None, raw_key: str | None, maxlen: int | None,
                 max_age: str | None, min_id: str | None, exact: bool, prefix: str, url: str) -> None:
    """Trim one stream to a window with a single XTRIM and print what it removed.

    The stream is emq:{QUEUE}:stream:NAME, or --key for a stream outside
    that layout. Exactly one of --maxlen, --max-age, --min-id gives the window.
    The default ~ removes whole macro-nodes only and never reaches inside the
    window; --exact removes precisely to its edge.

    \b
    Example:
        retain streams trim codemojex activity --maxlen 10000
        retain streams trim codemojex activity --max-age 7d --exact
        retain streams trim --key legacy:feed --min-id 2026-09-12T08:00:00Z
    """
    if (raw_key is None) == (queue is None or name is None) or (raw_key and (queue or name)):
        raise click.UsageError("give QUEUE NAME, or --key KEY, but not both")
    if sum(option is not None for option in (maxlen, max_age, min_id)) != 1:
        raise click.UsageError("give exactly one of --maxlen, --max-age, --min-id")
    stream = RawKey(raw_key) if raw_key else StreamRef(queue, name, prefix)  # type: ignore[arg-type]
    approx = not exact
    now = datetime.now(timezone.utc)
    if maxlen is not None:
        window = MaxLen(maxlen, approx)
    elif max_age is not None:
        window = MaxAge(max_age, approx)
    else:
        window = MinId(parse_instant(min_id, "--min-id"), approx)  # type: ignore[arg-type]
    with connect(url) as conn:
        removed = trim(conn, stream, window, now=now)
    shown = window.resolve(now) if isinstance(window, MaxAge) else window
    click.echo(f"removed {removed} entries from {stream.key} ({shown.describe()})")
