"""``retain streams``: the live tier from the command line."""

from __future__ import annotations

import json
import sys
from datetime import datetime
from typing import Any

import click

from retain._redis import TlsFiles, translate_errors
from retain.cli._common import URL_HELP, RedisTarget, connect, parse_instant, redis_url_option, tls_options
from retain.cli._ops import http_address, http_option, log_format_option, ops_tokens, ops_tokens_options
from retain.clock import utc_now
from retain.errors import InvalidPolicy
from retain.logs import configure_logging
from retain.retention import (
    PolicyFile,
    StreamPolicy,
    StreamPreview,
    SweepReport,
    daemon,
    inspect_stream,
    load_policy,
    preview,
)
from retain.retention.daemon import DaemonConfig
from retain.streams import RawKey, StreamRef, list_streams, trim
from retain.streams.keys import DEFAULT_PREFIX
from retain.windows import MaxAge, MaxLen, MinId

__all__ = ["streams"]


@click.group()
def streams() -> None:
    """Bound Redis/Valkey streams to a declared window.

    \b
    Example:
        retain streams ls --policy retain.toml
        retain streams info codemojex activity
        retain streams trim codemojex activity --maxlen 10000
        retain streams run retain.toml
    """


@streams.command("trim")
@click.argument("queue", required=False)
@click.argument("name", required=False)
@click.option("--key", "raw_key", help="Address a stream by its literal key instead of QUEUE NAME.")
@click.option("--maxlen", type=int, help="Keep the N newest entries.")
@click.option("--max-age", help="Keep entries younger than a duration: 30s, 90m, 1h, 7d, 1y6w.")
@click.option("--min-id", help="Keep entries minted at or after a time, e.g. 2026-09-12T08:00:00Z.")
@click.option("--exact", is_flag=True, help="Trim exactly to the edge (=) instead of whole nodes (~).")
@click.option("--limit", type=click.IntRange(0), default=0, show_default=True,
              help="Most entries one ~ trim removes (LIMIT n); 0: no cap, every whole node outside the window.")
@click.option("--prefix", default=DEFAULT_PREFIX, show_default=True, help="Key prefix of the layout.")
@click.option("--dry-run", is_flag=True,
              help="Print the stream's length, what the window keeps and what the trim would remove now; trim nothing.")
@redis_url_option
def trim_command(queue: str | None, name: str | None, raw_key: str | None, maxlen: int | None,
                 max_age: str | None, min_id: str | None, exact: bool, limit: int, prefix: str, dry_run: bool,
                 target: RedisTarget) -> None:
    """Trim one stream to a window with a single XTRIM; print what it removed and the length left.

    The stream is emq:{QUEUE}:stream:NAME, or --key for a stream outside
    that layout. Exactly one of --maxlen, --max-age, --min-id gives the window.
    The default ~ removes whole macro-nodes only and never reaches inside the
    window; --exact removes precisely to its edge. A ~ trim removes every whole
    node outside the window (LIMIT 0), as the retention driver does: without
    it the server caps one XTRIM at 100 nodes (10,000 entries by default);
    --limit N sets a cap of your own. --dry-run reads, never writes: it
    prints what the trim would remove now (a range for ~, which removes whole
    nodes only; without a --limit cap), as `retain streams run --dry-run` does.

    \b
    Example:
        retain streams trim codemojex activity --maxlen 10000
        retain streams trim codemojex activity --max-age 7d --exact
        retain streams trim --key legacy:feed --min-id 2026-09-12T08:00:00Z
        retain streams trim codemojex activity --maxlen 10000 --limit 5000
        retain streams trim codemojex activity --max-age 7d --dry-run
        retain streams trim codemojex activity --maxlen 10000 --cluster --url redis://10.0.0.5:7000/0
        retain streams trim codemojex activity --maxlen 10000 --url rediss://ops:PASSWORD@redis:6380/0 --tls-ca ca.pem
    """
    if (raw_key is None) == (queue is None or name is None) or (raw_key and (queue or name)):
        raise click.UsageError("give QUEUE NAME, or --key KEY, but not both")
    if sum(option is not None for option in (maxlen, max_age, min_id)) != 1:
        raise click.UsageError("give exactly one of --maxlen, --max-age, --min-id")
    stream = RawKey(raw_key) if raw_key else StreamRef(queue, name, prefix)  # type: ignore[arg-type]
    approx = not exact
    now = utc_now()
    window: MaxLen | MaxAge | MinId
    if maxlen is not None:
        window = MaxLen(maxlen, approx)
    elif max_age is not None:
        window = MaxAge(max_age, approx)
    else:
        window = MinId(parse_instant(min_id, "--min-id"), approx)  # type: ignore[arg-type]
    if dry_run:
        with connect(target) as conn:
            row, = preview(conn, [StreamPolicy(stream, window)], now=now)
        click.echo(f"dry run at {now.isoformat(timespec='seconds')}: nothing is trimmed")
        click.echo(row.describe())
        if row.error is not None:
            sys.exit(1)
        return
    with connect(target) as conn:
        removed = trim(conn, stream, window, now=now, limit=limit)
        with translate_errors(stream.key):
            left = int(conn.xlen(stream.key))
    shown = window.resolve(now) if isinstance(window, MaxAge) else window
    click.echo(f"removed {removed} entries from {stream.key} ({shown.describe()}); {left} left")


def policy_option(function: Any) -> Any:
    return click.option("--policy", "policy_path", metavar="FILE", type=click.Path(dir_okay=False),
                        help="A policy file (docs/policy.md): show the window that applies to each stream and, for "
                             "an archived one, W and the fold lag; its url is used unless --url is given.")(function)


def json_option(function: Any) -> Any:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts instead of text.")(function)


@streams.command("ls")
@click.argument("pattern", default="*")
@policy_option
@json_option
@redis_url_option
def ls_command(pattern: str, policy_path: str | None, as_json: bool, target: RedisTarget) -> None:
    """List the streams whose key matches PATTERN (a glob, default *): length, oldest and newest entry's age,
    memory, consumer groups and, with --policy, the window that applies.

    Keys are found with SCAN MATCH PATTERN TYPE stream (every master of a
    cluster): a key of another type is never listed. Reads only.

    \b
    Example:
        retain streams ls
        retain streams ls 'emq:{codemojex}:*' --policy retain.toml
        retain streams ls --json | jq '.[] | select(.length > 10000) | .key'
    """
    policy_file = load_policy(policy_path) if policy_path else None
    archive = policy_file.open_archive() if policy_file is not None else None
    now = utc_now()
    with connect(_target(target, policy_file)) as conn:
        reports = [inspect_stream(conn, key, now=now, policy=policy_file.policy if policy_file else None,
                                  archive=archive) for key in list_streams(conn, pattern)]
    if as_json:
        click.echo(json.dumps([report.as_dict() for report in reports], indent=2))
        return
    if not reports:
        click.echo(f"no stream matches {pattern}")
        return
    rows = [("KEY", "LENGTH", "OLDEST", "NEWEST", "MEMORY", "GROUPS", "WINDOW")]
    rows += [(report.info.key, str(report.info.length), _ago(report.info.first_age_s), _ago(report.info.last_age_s),
              _bytes(report.info.memory), str(len(report.info.groups)),
              report.window.describe() if report.window is not None else "-") for report in reports]
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    for row in rows:
        click.echo("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())


@streams.command("info")
@click.argument("key_or_queue", metavar="KEY|QUEUE")
@click.argument("name", required=False)
@click.option("--prefix", default=DEFAULT_PREFIX, show_default=True, help="Key prefix of the layout (QUEUE NAME).")
@policy_option
@json_option
@redis_url_option
def info_command(key_or_queue: str, name: str | None, prefix: str, policy_path: str | None, as_json: bool,
                 target: RedisTarget) -> None:
    """Show one stream: length, first and last id and their age, memory, each consumer group's pending entries
    and lag and, with --policy, the window that applies and, if archived, W and the fold lag.

    One argument is a literal key; two are QUEUE NAME (the stream
    emq:{QUEUE}:stream:NAME). A group's lag is what it has not been delivered
    yet (unknown on Redis 6.2 or after an XDEL); pending is what it was
    delivered and has not acknowledged. Reads only.

    \b
    Example:
        retain streams info codemojex activity
        retain streams info legacy:feed --policy retain.toml
        retain streams info codemojex activity --json
    """
    stream = StreamRef(key_or_queue, name, prefix) if name is not None else RawKey(key_or_queue)
    policy_file = load_policy(policy_path) if policy_path else None
    archive = policy_file.open_archive() if policy_file is not None else None
    with connect(_target(target, policy_file)) as conn:
        report = inspect_stream(conn, stream.key, now=utc_now(), policy=policy_file.policy if policy_file else None,
                                archive=archive)
    if as_json:
        click.echo(json.dumps(report.as_dict(), indent=2))
        return
    info = report.info
    click.echo(info.key)
    click.echo(f"  length    {info.length}")
    click.echo(f"  first     {info.first or '-'}  ({_ago(info.first_age_s)} ago)" if info.first else "  first     -")
    click.echo(f"  last      {info.last}  ({_ago(info.last_age_s)} ago)" if info.last else "  last      -")
    click.echo(f"  memory    {_bytes(info.memory)}")
    if policy_file is not None:
        where = "" if report.source is None else \
            (" (its [[stream]] entry)" if report.source == "entry" else f" (pattern {report.source})")
        click.echo(f"  window    {report.window.describe() if report.window is not None else 'none'}{where}")
    if report.archived:
        lag = "unknown" if report.fold_lag is None else report.fold_lag
        click.echo(f"  archived  W {report.watermark or 'none'}, fold lag {lag}")
    for group in info.groups:
        lag = "unknown" if group.lag is None else group.lag
        click.echo(f"  group {group.name}: {group.consumers} consumers, {group.pending} pending, lag {lag}, "
                   f"last delivered {group.last_delivered}")


def _target(target: RedisTarget, policy_file: PolicyFile | None) -> RedisTarget:
    """Where ls and info connect: --url if given, else the policy file's url, else $RETAIN_REDIS_URL (as run)."""
    given = click.get_current_context().get_parameter_source("url") == click.core.ParameterSource.COMMANDLINE
    if policy_file is None or policy_file.url is None or given:
        return target
    return RedisTarget(policy_file.url, target.cluster or policy_file.cluster, target.tls,
                       f"url in {policy_file.source}")


def _ago(seconds: float | None) -> str:
    """An age as people read it: 45s, 12m, 3.5h, 9.0d; - for none."""
    if seconds is None:
        return "-"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f}{unit}"
    return f"{seconds:.0f}s"


def _bytes(count: int | None) -> str:
    if count is None:
        return "-"
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= size:
            return f"{count / size:.1f} {unit}"
    return f"{count} B"


@streams.command("run")
@click.argument("policy_path", metavar="POLICY")
@click.option("--once", is_flag=True, help="Apply one beat and exit (for cron); exit status 1 if a stream failed.")
@click.option("--dry-run", is_flag=True,
              help="Print per stream its length, what the window keeps and what a trim would remove now "
                   "(for an archived stream, what a fold would archive first, and what the archive's "
                   "maintenance would expire and compact); fold and trim nothing.")
@http_option
@click.option("--metrics-port", type=click.IntRange(1, 65535),
              help="The same as --http METRICS-ADDR:PORT (kept for older unit files).")
@click.option("--metrics-addr", default="127.0.0.1", show_default=True,
              help="Address --metrics-port listens on (0.0.0.0 for every interface).")
@ops_tokens_options
@log_format_option
@click.option("--url", help=URL_HELP + " Overrides the policy file's url, which overrides $RETAIN_REDIS_URL, "
                            "else redis://localhost:6379/0.")
@click.option("--replica", "replica_name", metavar="NAME",
              help="This replica's name in logs, metrics and the dashboard (overrides [replicas] name; default: "
                   "host-pid). Several daemons on one policy share its streams (docs/operating.md).")
@tls_options
def run_command(policy_path: str, once: bool, dry_run: bool, http: str | None, metrics_port: int | None,
                metrics_addr: str, ops_tokens_file: str | None, insecure: bool, log_format: str, url: str | None,
                replica_name: str | None, tls_ca: str | None, tls_cert: str | None, tls_key: str | None) -> None:
    """Run the retention daemon: re-apply the POLICY file's windows on its own beat.

    POLICY is a TOML file naming the streams and their windows (see
    docs/policy.md); it is checked whole, and its archive opened, before
    anything connects. A stream with archive = true is folded into the file's
    archive before each trim, and trimmed only past what is archived. The
    daemon logs each beat's outcome to stderr. SIGTERM or SIGINT finishes the
    beat in progress and exits 0. A [[stream]] with pattern = "..." applies to
    every stream whose key matches, found again every rescan. It never writes
    to a consumer group: it reads them to report what a trim took from each.
    Several daemons on one policy file share its streams through leases in
    Redis ([replicas] in the file; each stream trimmed by one at a time, a dead
    one's streams taken over within its lease); --once and --dry-run take no
    lease and cover every stream.

    \b
    Example:
        retain streams run retain.toml
        retain streams run retain.toml --once
        retain streams run retain.toml --dry-run
        retain streams run retain.toml --http 127.0.0.1:9464 --log-format json
        retain streams run retain.toml --replica host-a-1
    """
    if (metrics_port is not None or http is not None) and (once or dry_run):
        raise click.UsageError("--http and --metrics-port serve a running daemon: drop --once and --dry-run")
    if http is not None and metrics_port is not None:
        raise click.UsageError("give --http or --metrics-port, not both")
    address = http_address(http) if http is not None else None
    if metrics_port is not None:
        address = http_address(f"{metrics_addr}:{metrics_port}", "--metrics-addr")
    policy_file = load_policy(policy_path)
    try:
        config = DaemonConfig(policy_file, url=url, tls=TlsFiles(tls_ca, tls_cert, tls_key), replica=replica_name,
                              http=address, readers=ops_tokens(ops_tokens_file, insecure, address),
                              insecure=insecure, log_format=log_format)
    except InvalidPolicy as exc:
        raise click.BadParameter(str(exc).replace("[replicas] name", "the name"), param_hint="--replica") from None
    if dry_run:
        _print_dry_run(policy_file, *daemon.dry_run(config), log_format)
    elif once:
        configure_logging(log_format)  # a warning the beat logs (Redis down) is in the same format
        _print_once(daemon.run_once(config), log_format)
    else:
        daemon.run(config)


def _print_dry_run(policy_file: PolicyFile, now: datetime, rows: list[StreamPreview], log_format: str) -> None:
    lines: list[tuple[str, dict[str, Any]]] = [
        (f"dry run at {now.isoformat(timespec='seconds')}: nothing is folded or trimmed, no lease is taken "
         "(every stream of the policy, whichever replica holds it)", {"now": now.isoformat(timespec="seconds")})]
    for pattern in policy_file.policy.patterns:
        matched = [row.key for row in rows if row.pattern == pattern.pattern]
        lines.append((f"pattern {pattern.pattern} matched {len(matched)} streams{': ' if matched else ''}"
                      f"{', '.join(matched)}", {"pattern": pattern.pattern, "matched": matched}))
    lines += [(row.describe(), row.log_fields()) for row in rows]
    _print_lines(lines, log_format)
    if any(row.error for row in rows):
        sys.exit(1)


def _print_once(report: SweepReport, log_format: str) -> None:
    lines: list[tuple[str, dict[str, Any]]] = [
        ("one beat, taking no lease: every stream of the policy, whichever replica holds it", {}),
        (report.summary(), report.log_fields())]
    for key, removed in report.removed_by.items():
        if key in report.folded_by:
            lines.append((f"{key}  folded {report.folded_by[key]}, W = {report.watermarks[key] or 'none'}, "
                          f"removed {removed}", {"stream": key, "folded": report.folded_by[key], "removed": removed,
                                                 "watermark": report.watermarks[key]}))
        else:
            lines.append((f"{key}  removed {removed}", {"stream": key, "removed": removed}))
    for key, error in report.failures.items():
        lines.append((f"{key}  {'fold failed, not trimmed' if key in report.fold_failures else 'failed'}: {error}",
                      {"stream": key, "error": type(error).__name__}))
    _print_lines(lines, log_format)
    if report.failures:
        sys.exit(1)


def _print_lines(lines: list[tuple[str, dict[str, Any]]], log_format: str) -> None:
    """Each line's text; with ``json``, one JSON object per line on stdout instead: the text as ``event``, the
    line's fields beside it (the daemon's log lines' shape)."""
    for text, fields in lines:
        if log_format == "json":
            click.echo(json.dumps({"event": text, **fields}, default=str))
        else:
            click.echo(text)
