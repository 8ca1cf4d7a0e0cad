"""``retain archive``: fold a stream into the archive, read archive and live as one, list what is kept.

The archive's library (pyarrow, obstore) is imported by the commands that use
it, so that every other ``retain`` command starts without it.
"""

from __future__ import annotations

import base64
import json
import re
from datetime import datetime
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from retain.cli._common import connect, parse_instant, redis_url_option
from retain.streams import RawKey, Stream, StreamRef
from retain.streams.keys import DEFAULT_PREFIX

if TYPE_CHECKING:
    from retain.archive import Archive, FoldProgress

__all__ = ["archive"]

DEFAULT_ARCHIVE = "./retain-archive"
_ID_OR_MS = re.compile(r"[0-9]+(-[0-9]+)?")


def _archive_options(function: Any) -> Any:
    for option in reversed([
        click.option("--archive", "archive_url", envvar="RETAIN_ARCHIVE", default=DEFAULT_ARCHIVE,
                     show_default=True, show_envvar=True,
                     help="Archive URL: a directory, file:///path, memory:// or s3://bucket/prefix."),
        click.option("--s3-endpoint", envvar="RETAIN_S3_ENDPOINT", show_envvar=True,
                     help="S3 endpoint of an s3:// archive, e.g. http://127.0.0.1:8333 (credentials "
                          "come from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)."),
        click.option("--s3-region", envvar="RETAIN_S3_REGION", show_envvar=True,
                     help="S3 region of an s3:// archive, e.g. us-east-1."),
    ]):
        function = option(function)
    return function


def _stream_options(function: Any) -> Any:
    function = click.argument("name", required=False)(function)
    function = click.argument("queue", required=False)(function)
    function = click.option("--key", "raw_key", help="Address a stream by its literal key instead of QUEUE NAME.")(
        function)
    return click.option("--prefix", default=DEFAULT_PREFIX, show_default=True,
                        help="Key prefix of the layout.")(function)


def _stream(queue: str | None, name: str | None, raw_key: str | None, prefix: str) -> Stream:
    if (raw_key is None) == (queue is None or name is None) or (raw_key and (queue or name)):
        raise click.UsageError("give QUEUE NAME, or --key KEY, but not both")
    return RawKey(raw_key) if raw_key else StreamRef(queue, name, prefix)  # type: ignore[arg-type]


def _open(archive_url: str, s3_endpoint: str | None, s3_region: str | None) -> Archive:
    from retain.archive import Archive

    options = {name: value for name, value in (("endpoint", s3_endpoint), ("region", s3_region)) if value}
    return Archive(archive_url, **options)


def _bound(value: str | None, param_hint: str) -> str | datetime | None:
    """A stream id, ``<ms>``, or an RFC 3339 time."""
    if value is None or _ID_OR_MS.fullmatch(value):
        return value
    return parse_instant(value, param_hint)


@click.group("archive")
def archive() -> None:
    """Keep what trims remove: fold streams into Parquet segments, read them back with the live tail.

    \b
    Example:
        retain archive fold codemojex activity --archive /var/lib/retain/archive
        retain archive read codemojex activity --since 2026-09-12T08:00:00Z
        retain archive ls codemojex activity
    """


@archive.command("fold")
@_stream_options
@click.option("--upto", help="Fold up to this stream id, <ms> or RFC 3339 time (default: the last entry now).")
@click.option("--count", default=1000, show_default=True, help="Entries read per XRANGE.")
@click.option("--segment-entries", default=100_000, show_default=True, help="Most entries in one segment.")
@_archive_options
@redis_url_option
def fold_command(queue: str | None, name: str | None, raw_key: str | None, prefix: str, upto: str | None,
                 count: int, segment_entries: int, archive_url: str, s3_endpoint: str | None,
                 s3_region: str | None, url: str) -> None:
    """Fold a stream's entries after the watermark W into the archive, and advance W.

    Nothing is trimmed: `retain archive fold` only makes the entries durable.
    A long fold shows a progress bar on a terminal.

    \b
    Example:
        retain archive fold codemojex activity
        retain archive fold codemojex activity --upto 2026-09-12T08:00:00Z --archive s3://logs/retain \\
            --s3-endpoint http://127.0.0.1:8333 --s3-region us-east-1
    """
    from retain.archive import fold

    stream = _stream(queue, name, raw_key, prefix)
    boundary = _bound(upto, "--upto")
    store = _open(archive_url, s3_endpoint, s3_region)
    console = Console(stderr=True)
    # The key goes in as the task's description: it holds braces that a format string would read.
    columns = (SpinnerColumn(), TextColumn("folding {task.description}", markup=False), BarColumn(),
               MofNCompleteColumn(), TextColumn("entries"), TimeElapsedColumn())
    with connect(url) as conn, Progress(*columns, console=console, transient=True,
                                        disable=not console.is_terminal) as progress:
        task = progress.add_task(stream.key, total=None)

        def advance(step: FoldProgress) -> None:
            progress.update(task, completed=step.entries + step.pending)

        result = fold(conn, stream, store, boundary, count=count, segment_entries=segment_entries,
                      progress=advance)
    click.echo(f"folded {result.entries} entries into {result.segments} segments of {result.stream}; "
               f"W = {result.watermark or 'none'} (manifest {result.manifest})")


def _json_line(entry_id: bytes, fields: dict[bytes, bytes]) -> str:
    shown: dict[str, Any] = {}
    for name, value in fields.items():
        try:
            shown[name.decode("utf-8", "backslashreplace")] = value.decode("utf-8")
        except UnicodeDecodeError:
            shown[name.decode("utf-8", "backslashreplace")] = {"base64": base64.b64encode(value).decode()}
    return json.dumps({"id": entry_id.decode(), "fields": shown}, ensure_ascii=False)


@archive.command("read")
@_stream_options
@click.option("--since", help="First stream id, <ms> or RFC 3339 time to include (default: the first).")
@click.option("--until", help="Last stream id, <ms> or RFC 3339 time to include (default: the last).")
@_archive_options
@redis_url_option
def read_command(queue: str | None, name: str | None, raw_key: str | None, prefix: str, since: str | None,
                 until: str | None, archive_url: str, s3_endpoint: str | None, s3_region: str | None,
                 url: str) -> None:
    """Print a stream's entries, archived and live, in id order as JSON lines.

    Each line is {"id": "<ms>-<seq>", "fields": {...}}; a value that is not
    UTF-8 is written {"base64": "..."}. A time bound includes its whole
    millisecond.

    \b
    Example:
        retain archive read codemojex activity --since 2026-09-12T08:00:00Z --until 2026-09-12T09:00:00Z
        retain archive read --key legacy:feed --since 1789171200000-0 | jq .fields.player
    """
    from retain.archive import read

    stream = _stream(queue, name, raw_key, prefix)
    start, end = _bound(since, "--since"), _bound(until, "--until")
    store = _open(archive_url, s3_endpoint, s3_region)
    with connect(url) as conn:
        for entry_id, fields in read(conn, stream, store, start, end):
            click.echo(_json_line(entry_id, fields))


@archive.command("ls")
@_stream_options
@_archive_options
def ls_command(queue: str | None, name: str | None, raw_key: str | None, prefix: str, archive_url: str,
               s3_endpoint: str | None, s3_region: str | None) -> None:
    """List a stream's segments with W, entries and bytes; with no stream, every archived stream.

    \b
    Example:
        retain archive ls
        retain archive ls codemojex activity --archive s3://logs/retain --s3-endpoint http://127.0.0.1:8333
    """
    store = _open(archive_url, s3_endpoint, s3_region)
    console = Console()
    if queue is None and name is None and raw_key is None:
        table = Table(title=f"archive {store.url}")
        for column in ("stream", "W", "manifest", "segments", "entries", "bytes"):
            table.add_column(column, justify="left" if column in ("stream", "W") else "right")
        for key in store.streams():
            manifest = store.manifest(RawKey(key))
            table.add_row(key, str(manifest.watermark or "none"), str(manifest.number), str(len(manifest.segments)),
                          str(manifest.entries), str(manifest.size))
        console.print(table)
        return
    stream = _stream(queue, name, raw_key, prefix)
    manifest = store.manifest(stream)
    table = Table(title=f"{stream.key} · W = {manifest.watermark or 'none'} · manifest {manifest.number}",
                  caption=f"{len(manifest.segments)} segments, {manifest.entries} entries, {manifest.size} bytes")
    for column in ("segment", "first", "last", "entries", "bytes"):
        table.add_column(column, justify="right" if column in ("entries", "bytes") else "left",
                         overflow="fold")
    for segment in manifest.segments:
        table.add_row(segment.name, str(segment.first), str(segment.last), str(segment.count), str(segment.size))
    console.print(table)
