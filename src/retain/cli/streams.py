"""``retain streams``: the live tier from the command line."""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from dataclasses import replace
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

import click
from redis.backoff import NoBackoff
from redis.retry import Retry

from retain._redis import TlsFiles, translate_errors
from retain.clock import utc_now
from retain.daemon import Service, run_daemon
from retain.errors import InvalidPolicy, ServerUnavailable
from retain.logs import configure_logging
from retain.cli._common import (DEFAULT_REDIS_URL, URL_HELP, RedisTarget, connect, parse_instant, redis_url_option,
                                tls_options)
from retain.cli._ops import StreamsOps, http_address, http_option, log_format_option, ops_tokens, ops_tokens_options
from retain.retention import PolicyFile, Replicas, RetentionDriver, SweepReport, load_policy, preview
from retain.streams import RawKey, StreamRef, trim
from retain.streams.keys import DEFAULT_PREFIX
from retain.windows import MaxAge, MaxLen, MinId

if TYPE_CHECKING:
    from retain.archive import Archive
    from retain.wire import Tokens

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
    readers = ops_tokens(ops_tokens_file, insecure, address)
    policy_file = load_policy(policy_path)
    if replica_name is not None:
        try:
            policy_file = replace(policy_file, replicas=replace(policy_file.replicas, name=replica_name))
        except InvalidPolicy as exc:
            raise click.BadParameter(str(exc).replace("[replicas] name", "the name"), param_hint="--replica") from None
    archive = policy_file.open_archive()
    redis_url, source = _redis_url(url, policy_file)
    conn = _client(RedisTarget(redis_url, policy_file.cluster, TlsFiles(tls_ca, tls_cert, tls_key), source),
                   policy_file.tick)
    try:
        if dry_run:
            _dry_run(conn, policy_file, archive)
        elif once:
            configure_logging(log_format)  # a warning the beat logs (Redis down) is in the same format
            _once(_driver(conn, policy_file, archive, replicas=Replicas(enabled=False)), log_format)
        else:
            _daemon(conn, policy_file, archive, address, readers, log_format)
    finally:
        conn.close()


def _redis_url(option: str | None, policy_file: PolicyFile) -> tuple[str, str]:
    """The URL the daemon connects to and where it came from: --url, else the policy file's, else the
    environment's, else the default."""
    if option:
        return option, "--url"
    if policy_file.url:
        return policy_file.url, f"url in {policy_file.source}"
    from_environment = os.environ.get("RETAIN_REDIS_URL")
    if from_environment:
        return from_environment, "$RETAIN_REDIS_URL"
    return DEFAULT_REDIS_URL, "--url"


def _client(target: RedisTarget, tick: float) -> Any:
    # One retry covers a pooled connection gone stale; the driver's own backoff is the retry policy. A server
    # that stops answering (frozen, a network partition) fails a command after a few ticks instead of holding
    # the beat for ever; on a cluster, its commands alone (retain._nodes).
    timeout = max(2.0, 2 * tick)
    options: dict[str, Any] = {"retry": Retry(NoBackoff(), 1), "socket_timeout": timeout,
                               "socket_connect_timeout": timeout}
    with translate_errors():
        return connect(target, **options)


def _driver(conn: Any, policy_file: PolicyFile, archive: Archive | None, **options: Any) -> RetentionDriver:
    return RetentionDriver.from_policy_file(conn, policy_file, archive=archive, **options)


def _dry_run(conn: Any, policy_file: PolicyFile, archive: Archive | None) -> None:
    now = utc_now()
    rows = preview(conn, policy_file.policy, now=now, archive=archive, fold_min_entries=policy_file.fold_min_entries,
                   maintenance=policy_file.maintenance())
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


def _once(driver: RetentionDriver, log_format: str) -> None:
    report = driver.sweep()
    lines = [("one beat, taking no lease: every stream of the policy, whichever replica holds it", {}),
             (report.summary(), _fields_of(report))]
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
    for text, fields in lines:
        if log_format == "json":  # one JSON object per line on stdout, the daemon's fields with each
            click.echo(json.dumps({"event": text, **fields}, default=str))
        else:
            click.echo(text)
    if report.failures:
        sys.exit(1)


def _check_credentials(conn: Any, log: logging.Logger) -> None:
    """Refuse to start with credentials Redis refuses (AuthenticationError: one line, exit 1); a Redis that is
    down is only a warning: the driver backs off and reaches it when it comes back."""
    try:
        with translate_errors():
            conn.ping()
    except ServerUnavailable as exc:
        log.warning("%s; the driver starts anyway and backs off until it answers", exc)


class _BeatLevel:
    """The level a beat's log line takes: INFO when it changed something, else DEBUG but for one INFO line a
    minute (``every`` seconds), so that a quiet daemon's log still shows it beats without a line per tick."""

    def __init__(self, every: float = 60.0) -> None:
        self.every = every
        self._last_info: float | None = None

    def of(self, report: SweepReport, now: float) -> int:
        """The level for ``report``, logged at monotonic instant ``now``."""
        if report.idle and self._last_info is not None and now - self._last_info < self.every:
            return logging.DEBUG
        self._last_info = now
        return logging.INFO


def _daemon(conn: Any, policy_file: PolicyFile, archive: Archive | None, address: tuple[str, int] | None,
            readers: Tokens | None, log_format: str) -> None:
    configure_logging(log_format)  # before the first line (the credentials check's), not only in run_daemon
    log = logging.getLogger("retain.daemon")
    ops = StreamsOps(conn, policy_file, archive) if address is not None else None
    level = _BeatLevel()

    def on_report(report: SweepReport) -> None:
        log.log(level.of(report, time.monotonic()), report.summary(), extra=_fields_of(report))
        if ops is not None:
            ops.on_report(report)

    driver = _driver(conn, policy_file, archive, measure_lengths=ops is not None, on_report=on_report)
    if ops is not None:
        ops.attach(driver)
    _check_credentials(conn, log)
    services: list[Service] = [driver]
    if ops is not None and address is not None:
        services[:0] = ops.services(address, readers)
    folding = f" ({len(policy_file.policy.archived)} folded into {archive.url})" if archive is not None else ""

    def where() -> str:
        if ops is None:
            return ""
        host, port = services[0].address  # type: ignore[attr-defined]
        return f"; health, metrics and dashboard at http://{host}:{port}/"

    run_daemon(*services, name="retention driver", log=log, log_format=log_format,
               finishing="the beat in progress and its archive work",
               stopped=lambda: f"after {driver.beats} beats",
               started=lambda: f"retention driver started: {len(policy_file.policy)} streams{folding} from "
                               f"{policy_file.source}, tick {policy_file.tick:g}s{sharing(driver)}{where()}")


def sharing(driver: RetentionDriver) -> str:
    """How the start line says the driver shares its policy: as which replica, in how many shards."""
    replicas = driver.replicas
    if not replicas.enabled:
        return "; no replicas: this daemon trims every stream"
    return (f"; replica {driver.leases.name} of group {driver.leases.shards.group} ({replicas.shards} shards, "
            f"{replicas.lease_seconds:g} s leases)")


def _fields_of(report: SweepReport) -> dict[str, Any]:
    """What a JSON log line of a beat carries besides its text: removed, folded, failures by stream, W."""
    fields: dict[str, Any] = {"removed": report.removed, "trims": report.calls, "elapsed_s": round(report.elapsed, 6)}
    if report.folded_by:
        fields["folded"] = report.folded
        fields["watermarks"] = {key: str(w) if w is not None else None for key, w in report.watermarks.items()}
    if report.failures:
        fields["failures"] = {key: {"error": type(error).__name__, "message": str(error)}
                              for key, error in report.failures.items()}
    if report.replica is not None:
        fields["shards"] = len(report.replica.held)
        takeovers = [takeover.shard for takeover in report.replica.changes.takeovers if takeover.expired]
        if takeovers:
            fields["takeovers"] = takeovers
    if report.races_lost:
        fields["races_lost"] = dict(report.races_lost)
    return fields
