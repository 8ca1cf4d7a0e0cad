"""``retain archive``: fold a stream into the archive's table, read archive and live as one, list what is
kept, query it with SQL, maintain it, migrate a format-1 archive, and verify it whole.

The archive's library (pyarrow, deltalake, obstore) is imported by the commands
that use it, so that every other ``retain`` command starts without it.
"""

from __future__ import annotations

import base64
import json
import re
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from retain.cli._common import RedisTarget, connect, parse_instant, redis_url_option
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


def _open_existing(archive_url: str, s3_endpoint: str | None, s3_region: str | None) -> Archive:
    """The archive a command only reads; a local one that is not there is refused, not made (opening makes the
    directory: a read with a mistyped --archive left an empty one behind)."""
    missing = _missing_directory(archive_url)
    if missing is not None:
        raise click.ClickException(f"no archive at {missing}: nothing has been folded there yet "
                                   "(is --archive or $RETAIN_ARCHIVE the folder the folds write to?)")
    return _open(archive_url, s3_endpoint, s3_region)


def _missing_directory(archive_url: str) -> Path | None:
    """The directory of a local archive URL when it does not exist (None: it exists, or the archive is not local)."""
    parts = urlsplit(archive_url)
    if len(parts.scheme) > 1 and parts.scheme.lower() != "file":
        return None
    directory = Path(unquote(parts.path) if parts.scheme.lower() == "file" else archive_url)
    return None if directory.exists() else directory.resolve()


def _bound(value: str | None, param_hint: str) -> str | datetime | None:
    """A stream id, ``<ms>``, or an RFC 3339 time."""
    if value is None or _ID_OR_MS.fullmatch(value):
        return value
    return parse_instant(value, param_hint)


@click.group("archive")
def archive() -> None:
    """Keep what trims remove: fold streams into a Delta Lake table, read it back with the live tail.

    \b
    Example:
        retain archive fold codemojex activity --archive /var/lib/retain/archive
        retain archive read codemojex activity --since 2026-09-12T08:00:00Z
        retain archive ls codemojex activity
        retain archive query codemojex activity "SELECT count(*) FROM entries"
        retain archive maintain --max-age 400d
        retain archive verify /var/lib/retain/archive
    """


@archive.command("fold")
@_stream_options
@click.option("--upto", help="Fold up to this stream id, <ms> or RFC 3339 time (default: the last entry now).")
@click.option("--count", default=1000, show_default=True, help="Entries read per XRANGE.")
@click.option("--segment-entries", default=100_000, show_default=True,
              help="Most entries in one data file (and one commit).")
@_archive_options
@redis_url_option
def fold_command(queue: str | None, name: str | None, raw_key: str | None, prefix: str, upto: str | None,
                 count: int, segment_entries: int, archive_url: str, s3_endpoint: str | None,
                 s3_region: str | None, target: RedisTarget) -> None:
    """Fold a stream's entries after the watermark W into the archive's table, and advance W.

    Nothing is trimmed: `retain archive fold` only makes the entries durable.
    A long fold shows a progress bar on a terminal.

    \b
    Example:
        retain archive fold codemojex activity
        retain archive fold codemojex activity --upto 2026-09-12T08:00:00Z --archive s3://logs/retain \\
            --s3-endpoint http://127.0.0.1:8333 --s3-region us-east-1
        retain archive fold codemojex activity --cluster --url redis://10.0.0.5:7000/0
    """
    from retain.archive import fold

    stream = _stream(queue, name, raw_key, prefix)
    boundary = _bound(upto, "--upto")
    store = _open(archive_url, s3_endpoint, s3_region)
    console = Console(stderr=True)
    # The key goes in as the task's description: it holds braces that a format string would read.
    columns = (SpinnerColumn(), TextColumn("folding {task.description}", markup=False), BarColumn(),
               MofNCompleteColumn(), TextColumn("entries"), TimeElapsedColumn())
    with connect(target) as conn, Progress(*columns, console=console, transient=True,
                                        disable=not console.is_terminal) as progress:
        task = progress.add_task(stream.key, total=None)

        def advance(step: FoldProgress) -> None:
            progress.update(task, completed=step.entries + step.pending)

        result = fold(conn, stream, store, boundary, count=count, segment_entries=segment_entries,
                      progress=advance)
    click.echo(f"folded {result.entries} entries into {result.files} files of {result.stream}; "
               f"W = {result.watermark or 'none'} (table version {result.version})")


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
                 target: RedisTarget) -> None:
    """Print a stream's entries, archived and live, in id order as JSON lines.

    Each line is {"id": "<ms>-<seq>", "fields": {...}}; a value that is not
    UTF-8 is written {"base64": "..."}. A time bound includes its whole
    millisecond.

    \b
    Example:
        retain archive read codemojex activity --since 2026-09-12T08:00:00Z --until 2026-09-12T09:00:00Z
        retain archive read --key legacy:feed --since 1789171200000-0 | jq .fields.player
        retain archive read codemojex activity --cluster --url redis://10.0.0.5:7000/0
    """
    from retain.archive import read

    stream = _stream(queue, name, raw_key, prefix)
    start, end = _bound(since, "--since"), _bound(until, "--until")
    store = _open_existing(archive_url, s3_endpoint, s3_region)
    with connect(target) as conn:
        for entry_id, fields in read(conn, stream, store, start, end):
            click.echo(_json_line(entry_id, fields))


@archive.command("catch-up")
@_stream_options
@click.option("--group", required=True, help="The consumer group that fell behind the trim.")
@_archive_options
@redis_url_option
def catch_up_command(queue: str | None, name: str | None, raw_key: str | None, prefix: str, group: str,
                     archive_url: str, s3_endpoint: str | None, s3_region: str | None, target: RedisTarget) -> None:
    """Print what a consumer group missed to a trim, from the archive, as JSON lines; then move the group to W.

    Yields the entries after the group's last-delivered id up to the archive's
    watermark W, in id order (each line {"id": ..., "fields": {...}}, as
    `retain archive read` prints them), then sets the group's last-delivered id
    to W (XGROUP SETID), so XREADGROUP ... > continues with the live tail: no
    gap, nothing twice from the stream. Stop the group's consumers first.

    \b
    Example:
        retain archive catch-up codemojex jobs --group workers > missed.jsonl
        retain archive catch-up --key legacy:jobs --group billing | ./replay
    """
    from retain.archive import catch_up

    stream = _stream(queue, name, raw_key, prefix)
    store = _open_existing(archive_url, s3_endpoint, s3_region)
    with connect(target) as conn:
        for entry_id, fields in catch_up(conn, stream, group, store):
            click.echo(_json_line(entry_id, fields))


@archive.command("ls")
@_stream_options
@_archive_options
def ls_command(queue: str | None, name: str | None, raw_key: str | None, prefix: str, archive_url: str,
               s3_endpoint: str | None, s3_region: str | None) -> None:
    """List a stream's data files with W, entries, bytes and how far expiry reached; with no stream, every
    archived stream, and the size of the table's log.

    \b
    Example:
        retain archive ls
        retain archive ls codemojex activity --archive s3://logs/retain --s3-endpoint http://127.0.0.1:8333
    """
    missing = _missing_directory(archive_url)
    if missing is not None:  # listing must not create the archive it lists
        click.echo(f"no archive at {missing}: nothing has been folded there yet")
        return
    store = _open(archive_url, s3_endpoint, s3_region)
    console = Console()
    kind = {1: "format 1, read-only until `retain archive migrate`",
            2: "table, format 2: `retain archive migrate` makes its folders path-safe"}.get(store.format, "table")
    if queue is None and name is None and raw_key is None:
        table = Table(title=f"archive {store.url} ({kind}, version {store.version})")
        for column in ("stream", "W", "files", "entries", "bytes", "expired before"):
            table.add_column(column, justify="left" if column in ("stream", "W", "expired before") else "right",
                             overflow="fold")
        for key in store.streams():
            state = store.state(RawKey(key))
            table.add_row(key, str(state.watermark or "none"), str(len(state.files)), str(state.entries),
                          str(state.size), _expired(state.expired_before))
        if store.format >= 2:
            objects, size = store.log_size()
            table.caption = f"log: {objects} objects, {size} bytes"
        console.print(table)
        return
    stream = _stream(queue, name, raw_key, prefix)
    state = store.state(stream)
    table = Table(title=f"{stream.key} · W = {state.watermark or 'none'} · {kind}, version {state.version}",
                  caption=f"{len(state.files)} files, {state.entries} entries, {state.size} bytes; "
                          f"expired before {_expired(state.expired_before)}")
    for column in ("file", "first", "last", "entries", "bytes"):
        table.add_column(column, justify="right" if column in ("entries", "bytes") else "left", overflow="fold")
    for file in state.files:
        table.add_row(file.path.rsplit("/", 1)[-1], str(file.first), str(file.last), str(file.count),
                      str(file.size))
    console.print(table)


def _expired(expired_before: int | None) -> str:
    """Where expiry reached: the instant before which rows are gone, or "none"."""
    if expired_before is None:
        return "none"
    from retain.clock import format_rfc3339

    return format_rfc3339(datetime.fromtimestamp(expired_before / 1000, UTC), timespec="milliseconds")


@archive.command("query")
@click.argument("words", nargs=-1, metavar="[QUEUE NAME] SQL")
@click.option("--key", "raw_key", help="Address a stream by its literal key instead of QUEUE NAME.")
@click.option("--prefix", default=DEFAULT_PREFIX, show_default=True, help="Key prefix of the layout.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON lines, one a row, instead of a table.")
@click.option("--as-of", "as_of", metavar="VERSION|TIME",
              help="Read the archive as it was at a table version, or an RFC 3339 time (not the log view).")
@_archive_options
@redis_url_option
def query_command(words: tuple[str, ...], raw_key: str | None, prefix: str, as_json: bool, as_of: str | None,
                  archive_url: str, s3_endpoint: str | None, s3_region: str | None, target: RedisTarget) -> None:
    """Run SQL over the archive with DuckDB and print the rows.

    Views, each with the columns stream, id, ms, seq, ts, fields and
    fields_binary: ``archive``, every stream's archived rows; ``entries``, the
    stream's archived rows (no stream column); ``log``, the whole log: per
    stream (the one named, else every archived one) the archived rows and the
    live tail after W, read from Redis (--url) at query time, each id once, in
    order. Redis is asked only by a query that names ``log``. Needs DuckDB (pip
    install 'retain[duckdb]').

    \b
    Example:
        retain archive query codemojex activity "SELECT fields['player'] AS player, count(*) FROM entries GROUP BY 1"
        retain archive query "SELECT stream, count(*), max(ts) FROM archive GROUP BY 1" --json
        retain archive query shop orders "SELECT count(*) FROM log WHERE ts >= TIMESTAMPTZ '2026-09-12 00:00:00Z'"
        retain archive query "SELECT count(*) FROM archive" --as-of 2026-09-12T00:00:00Z
    """
    from retain.archive import query

    if len(words) == 3 and raw_key is None:
        stream: Stream | None = StreamRef(words[0], words[1], prefix)
    elif len(words) == 1:
        stream = RawKey(raw_key) if raw_key else None
    else:
        raise click.UsageError('give QUEUE NAME "SQL", --key KEY "SQL", or "SQL" alone (the archive view)')
    version_or_time = _as_of(as_of)
    store = _open_existing(archive_url, s3_endpoint, s3_region)
    with ExitStack() as stack:
        conn = stack.enter_context(connect(target)) if _names_log(words[-1]) else None
        result = query(store, words[-1], stream=stream, conn=conn, as_of=version_or_time)
    rows = result.to_pylist()
    if as_json:
        for row in rows:
            click.echo(json.dumps({name: _json_value(value) for name, value in row.items()}, ensure_ascii=False))
        return
    table = Table(caption=f"{len(rows)} rows")
    for column in result.column_names:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*(_shown(value) for value in row.values()))
    Console().print(table)


def _as_of(value: str | None) -> int | datetime | None:
    """--as-of: a table version, or an RFC 3339 time."""
    if value is None or not value.isdigit():
        return parse_instant(value, "--as-of") if value is not None else None
    return int(value)


def _names_log(sql: str) -> bool:
    """Whether ``sql`` reads the log view (so Redis is connected to only then)."""
    try:
        import duckdb

        return "log" in {name.lower() for name in duckdb.get_table_names(sql)}
    except Exception:  # no DuckDB, or SQL it cannot parse: the query itself says so
        return False


def _json_value(value: Any) -> Any:
    """A value of a query's row as JSON: text as it is, other bytes as {"base64": ...}, a map as an object."""
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return {"base64": base64.b64encode(value).decode()}
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, list):  # a map comes as a list of (key, value) pairs
        if value and all(isinstance(pair, tuple) and len(pair) == 2 for pair in value):
            return {str(name): _json_value(item) for name, item in value}
        return [_json_value(item) for item in value]
    if isinstance(value, dict):
        return {str(name): _json_value(item) for name, item in value.items()}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def _shown(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, (list, bytes, datetime)):
        shown = _json_value(value)
        return json.dumps(shown, ensure_ascii=False) if not isinstance(shown, str) else shown
    return str(value)


@archive.command("maintain")
@click.option("--max-age", help="Expire rows older than this from every stream, e.g. 400d (default: none expire).")
@click.option("--log-retention", default="5m", show_default=True,
              help="Keep each commit in the log this long, then clean it up once checkpointed.")
@click.option("--vacuum-retention", default="1m", show_default=True,
              help="Delete a file compacted away or expired this long after (files never committed: after 1h).")
@click.option("--target-file-entries", default=1_000_000, show_default=True, type=click.IntRange(min=1),
              help="Compaction merges consecutive files into files of at most this many entries.")
@click.option("--dry-run", is_flag=True, help="Say what would be expired, compacted and vacuumed; change nothing.")
@_archive_options
def maintain_command(max_age: str | None, log_retention: str, vacuum_retention: str, target_file_entries: int,
                     dry_run: bool, archive_url: str, s3_endpoint: str | None, s3_region: str | None) -> None:
    """Maintain the archive now: expire, compact, checkpoint, clean the log, vacuum.

    The retention daemon does this on its own every maintain_every (the
    policy file's [archive] settings); this is the same, by hand.

    \b
    Example:
        retain archive maintain --archive /var/lib/retain/archive
        retain archive maintain --max-age 400d --dry-run
    """
    from retain.archive import MaintenanceSettings, maintain
    from retain.clock import utc_now

    settings = MaintenanceSettings(every=None, max_age=_duration(max_age, "--max-age") if max_age else None,
                                   log_retention=_duration(log_retention, "--log-retention"),
                                   vacuum_retention=_duration(vacuum_retention, "--vacuum-retention"),
                                   target_file_entries=target_file_entries)
    store = _open(archive_url, s3_endpoint, s3_region)
    report = maintain(store, settings, now=utc_now(), dry_run=dry_run)
    click.echo(report.summary())
    for stream in report.streams:
        if stream.conflict is not None:
            click.echo(f"{stream.stream}  left to another maintainer: {stream.conflict}")
        elif stream.expired or stream.compacted:
            would = "would have " if dry_run else ""
            click.echo(f"{stream.stream}  {would}expired {stream.expired} entries ({stream.expired_files} whole "
                       f"files), {would}compacted {stream.compacted} files into {stream.compacted_into}")


def _duration(value: str, param_hint: str) -> timedelta:
    from retain import durations
    from retain.errors import InvalidDuration

    try:
        return durations.parse(value)
    except InvalidDuration as exc:
        raise click.BadParameter(str(exc), param_hint=param_hint) from exc


@archive.command("migrate")
@click.option("--file-entries", default=1_000_000, show_default=True, type=click.IntRange(min=1),
              help="Most entries in one data file of the table.")
@_archive_options
def migrate_command(file_entries: int, archive_url: str, s3_endpoint: str | None, s3_region: str | None) -> None:
    """Bring an archive to the current format (3), checking every id once.

    A format-1 archive (manifests and segments) becomes the table: one
    commit moves every stream, or none; stop the daemons that fold into it
    first. A format-2 table (folders named by the escaped stream key, which
    Polars and DuckDB's hive reading show as the stream's name) is rewritten
    in place: every file again with the key in it, under a path-safe folder,
    in one commit; the daemons may keep folding meanwhile, readers of the old
    files keep them until the next vacuum. Running it again changes nothing.

    \b
    Example:
        retain archive migrate --archive /var/lib/retain/archive
    """
    from retain.archive import migrate
    from retain.archive.relayout import relayout

    store = _open(archive_url, s3_endpoint, s3_region)
    if store.format == 2:
        rewritten = relayout(store)
        click.echo(f"rewrote {rewritten.files} files ({rewritten.entries} entries) of {rewritten.streams} streams "
                   f"as format 3 in one commit (table version {rewritten.version}), every id checked once, in "
                   f"{rewritten.elapsed:.1f} s; the format-2 files go with the next vacuum")
        return
    report = migrate(store, file_entries=file_entries)
    for stream in report.streams:
        done = "already in the table" if stream.skipped else f"{stream.files} files"
        click.echo(f"{stream.stream}  {stream.entries} entries from {stream.segments} segments: {done}; "
                   f"W = {stream.watermark or 'none'}")
    click.echo(f"migrated {report.entries} entries of {len(report.streams)} streams, every id checked once "
               f"(table version {report.version}), in {report.elapsed:.1f} s")


@archive.command("verify")
@click.argument("location", metavar="[URL]", required=False)
@click.option("--url", "redis_url", metavar="REDIS_URL",
              help="Also check each stream against its live stream on this Redis: entries trimmed past W "
                   "(or a W the archive lost) are a gap.")
@_archive_options
def verify_command(location: str | None, redis_url: str | None, archive_url: str, s3_endpoint: str | None,
                   s3_region: str | None) -> None:
    """Check a whole archive: every data file readable, every page checksum, W consistent with the data.

    URL (or --archive) names the archive. Every file the table's log lists is
    read in full; each damaged object (a missing or damaged data file, an
    unreadable log, a stream whose W the data does not match) is printed on a
    line of its own, and the command exits 1. Nothing is repaired. Exits 0
    when the archive is whole. With --url, a stream whose live side cannot be
    checked (Redis before 7, or an XDEL above W on a stream trimmed past it)
    is printed as UNVERIFIABLE with the reason; that alone is no failure.

    \b
    Example:
        retain archive verify /var/lib/retain/archive
        retain archive verify s3://logs/retain --s3-endpoint http://127.0.0.1:8333 --url redis://127.0.0.1:6379/0
    """
    from retain.archive.verify import verify

    store = _open_existing(location or archive_url, s3_endpoint, s3_region)
    conn = connect(RedisTarget(redis_url)) if redis_url is not None else None
    try:
        report = verify(store, conn)
    finally:
        if conn is not None:
            conn.close()
    for damage in report.damage:
        click.echo(f"DAMAGED {damage}")
    for key, reason in report.unverifiable.items():
        click.echo(f"UNVERIFIABLE stream {key}: {reason}")
    verdict = "whole" if report.ok else f"DAMAGED: {len(report.damage)} problems"
    unknown = f"; {len(report.unverifiable)} streams' live side unverifiable" if report.unverifiable else ""
    click.echo(f"{report.url}: {verdict}; {report.streams} streams, {report.files} files, {report.rows} rows "
               f"read and checksummed (table version {report.version}){unknown}")
    if not report.ok:
        raise SystemExit(1)
