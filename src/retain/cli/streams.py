"""``retain streams``: the live tier from the command line."""

from __future__ import annotations

import sys
from datetime import datetime

import click

from retain._redis import TlsFiles, translate_errors
from retain.clock import utc_now
from retain.errors import InvalidPolicy
from retain.cli._common import URL_HELP, RedisTarget, connect, parse_instant, redis_url_option, tls_options
from retain.cli._ops import http_address, http_option, log_format_option, ops_tokens, ops_tokens_options
from retain.retention import PolicyFile, StreamPreview, SweepReport, daemon, load_policy
from retain.retention.daemon import DaemonConfig
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
@redis_url_option
def trim_command(queue: str | None, name: str | None, raw_key: str | None, maxlen: int | None,
                 max_age: str | None, min_id: str | None, exact: bool, limit: int, prefix: str,
                 target: RedisTarget) -> None:
    """Trim one stream to a window with a single XTRIM; print what it removed and the length left.

    The stream is emq:{QUEUE}:stream:NAME, or --key for a stream outside
    that layout. Exactly one of --maxlen, --max-age, --min-id gives the window.
    The default ~ removes whole macro-nodes only and never reaches inside the
    window; --exact removes precisely to its edge. A ~ trim removes every whole
    node outside the window (LIMIT 0), as the retention driver does: without
    it the server caps one XTRIM at 100 nodes (10,000 entries by default);
    --limit N sets a cap of your own.

    \b
    Example:
        retain streams trim codemojex activity --maxlen 10000
        retain streams trim codemojex activity --max-age 7d --exact
        retain streams trim --key legacy:feed --min-id 2026-09-12T08:00:00Z
        retain streams trim codemojex activity --maxlen 10000 --limit 5000
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
    with connect(target) as conn:
        removed = trim(conn, stream, window, now=now, limit=limit)
        with translate_errors(stream.key):
            left = int(conn.xlen(stream.key))
    shown = window.resolve(now) if isinstance(window, MaxAge) else window
    click.echo(f"removed {removed} entries from {stream.key} ({shown.describe()}); {left} left")


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
                              log_format=log_format)
    except InvalidPolicy as exc:
        raise click.BadParameter(str(exc).replace("[replicas] name", "the name"), param_hint="--replica") from None
    if dry_run:
        _print_dry_run(policy_file, *daemon.dry_run(config))
    elif once:
        _print_once(daemon.run_once(config))
    else:
        daemon.run(config)


def _print_dry_run(policy_file: PolicyFile, now: datetime, rows: list[StreamPreview]) -> None:
    click.echo(f"dry run at {now.isoformat(timespec='seconds')}: nothing is folded or trimmed, no lease is taken "
               "(every stream of the policy, whichever replica holds it)")
    for pattern in policy_file.policy.patterns:
        matched = [row.key for row in rows if row.pattern == pattern.pattern]
        click.echo(f"pattern {pattern.pattern} matched {len(matched)} streams{': ' if matched else ''}"
                   f"{', '.join(matched)}")
    for row in rows:
        click.echo(row.describe())
    if any(row.error for row in rows):
        sys.exit(1)


def _print_once(report: SweepReport) -> None:
    click.echo("one beat, taking no lease: every stream of the policy, whichever replica holds it")
    click.echo(report.summary())
    for key, removed in report.removed_by.items():
        if key in report.folded_by:
            click.echo(f"{key}  folded {report.folded_by[key]}, W = {report.watermarks[key] or 'none'}, "
                       f"removed {removed}")
        else:
            click.echo(f"{key}  removed {removed}")
    for key, error in report.failures.items():
        click.echo(f"{key}  {'fold failed, not trimmed' if key in report.fold_failures else 'failed'}: {error}")
    if report.failures:
        sys.exit(1)
