"""``retain logd``: serve the record store, and send it requests."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import click

from retain.cli._limit_options import LIMIT_HELP, parse_limits
from retain.cli._ops import http_address, http_option, log_format_option, ops_tokens, ops_tokens_options
from retain.wire import HttpTimeouts, StreamTimeouts, WireLimits

if TYPE_CHECKING:
    from retain.wire import Tokens

__all__ = ["logd", "session_options"]

DEFAULT_LISTEN = "127.0.0.1:7420"


@click.group()
def logd() -> None:
    """A versioned record store for jobs, runs and events: every write is a commit.

    \b
    Example:
        retain logd serve --db logd.sqlite3 --http 127.0.0.1:7421
        echo '{get: {path: jobs}}' | retain logd request -
        retain logd retain expire.yaml
    """


@logd.command("serve")
@click.option("--db", default="logd.sqlite3", show_default=True, envvar="RETAIN_LOGD_DB", show_envvar=True,
              help="Where the store lives: a SQLite file (PATH or sqlite:PATH, made if missing) or a PostgreSQL "
                   "database (postgresql://USER@HOST:PORT/DB, tables made on first open; several servers may "
                   "share one).")
@click.option("--listen", help=f"TCP HOST:PORT for the document stream [default: {DEFAULT_LISTEN} unless --socket].")
@click.option("--socket", "socket_path", help="Unix socket PATH for the document stream, instead of --listen.")
@click.option("--http", help="Also serve HTTP on HOST:PORT: POST / takes a request (for curl); GET /healthz, "
                             "/readyz, /metrics and / (the dashboard) are the operator's.")
@click.option("--read-budget", type=int, help="storage.readBudget: the most records one read may touch [100000].")
@click.option("--synchronous", type=click.Choice(["off", "normal", "full", "extra"]),
              help="storage.synchronous: SQLite flush level [full].")
@click.option("--retain-indexes/--no-retain-indexes", default=None,
              help="storage.retainIndexes: keep a heads index per retain rule a pass ran in a SQLite store (passes "
                   "about 3x cheaper; each write into its container pays the rule's test); off drops those kept [on].")
@click.option("--cutoff", help="compaction.cutoff: commits younger than this stay readable with deltas [1h].")
@click.option("--tier", "tiers", multiple=True, help="Snapshot tier EVERY:KEEP, repeatable [1h:1d 1d:30d 30d:forever].")
@click.option("--horizon", help="compaction.horizon: no history older than this survives [none].")
@click.option("--max-document-bytes", type=int, default=WireLimits().max_bytes, show_default=True,
              help="The largest request document accepted.")
@click.option("--max-buffered-bytes", type=click.IntRange(min=1), default=256 * 1024 * 1024, show_default=True,
              help="The most bytes of unfinished requests held across all connections; past it: unavailable.")
@click.option("--limit", "limit_texts", multiple=True, metavar="NAME=VALUE", help=LIMIT_HELP)
@click.option("--tokens", "tokens_file", type=click.Path(dir_okay=False),
              help="TOML token file: who may read, write, retain, admin, and as which authors (docs/logd.md).")
@click.option("--insecure", is_flag=True, help="Serve a non-loopback address without --tokens (anyone may write), "
                                               "or take tokens on a non-loopback --listen without TLS.")
@click.option("--tls-cert", type=click.Path(dir_okay=False),
              help="PEM certificate: serve --listen and --http over TLS (with --tls-key).")
@click.option("--tls-key", type=click.Path(dir_okay=False), help="PEM private key of --tls-cert.")
@click.option("--socket-mode", default="0600", show_default=True,
              help="Permission mode (octal) of the --socket file; whatever the umask.")
@log_format_option
def serve_command(db: str, listen: str | None, socket_path: str | None, http: str | None, read_budget: int | None,
                  synchronous: str | None, retain_indexes: bool | None, cutoff: str | None, tiers: tuple[str, ...],
                  horizon: str | None, max_document_bytes: int, max_buffered_bytes: int, limit_texts: tuple[str, ...],
                  tokens_file: str | None, insecure: bool, tls_cert: str | None, tls_key: str | None, socket_mode: str,
                  log_format: str) -> None:
    """Serve a store: one writer applies every request in arrival order.

    Each connection carries a stream of YAML or JSON documents, each ended
    by a line '...', answered in order; HTTP takes one document per POST.
    SIGTERM or SIGINT (Ctrl-C) stops it once the requests under way are
    answered.

    \b
    Example:
        retain logd serve --db logd.sqlite3
        retain logd serve --socket /tmp/logd.sock --http 127.0.0.1:7421 --horizon 1y
        retain logd serve --db postgresql://logd@db.internal:5432/logd --tokens tokens.toml --listen 0.0.0.0:7420
        retain logd serve --max-buffered-bytes 67108864 --max-document-bytes 1048576
        retain logd serve --limit patchOps=2000 --limit idleSeconds=60 --limit httpBodySeconds=10
        retain logd serve --listen 0.0.0.0:7420 --tokens tokens.toml --http 0.0.0.0:7421 \\
            --tls-cert cert.pem --tls-key key.pem
        retain logd serve --db /var/lib/retain/logd.sqlite3 --http 127.0.0.1:7421 --log-format json
        retain logd serve --db jobs.sqlite3 --no-retain-indexes
    """
    from retain.logd.client import parse_address
    from retain.logd.serve_daemon import ServeConfig, serve
    from retain.logd.settings import Settings

    if listen and socket_path:
        raise click.UsageError("give --listen or --socket, not both")
    address = parse_address(listen) if listen else None
    http_address = parse_address(http) if http else None
    if isinstance(address, str) or isinstance(http_address, str):
        raise click.UsageError("--listen and --http take HOST:PORT")
    bounds = parse_limits(limit_texts)
    settings = bounds.applied(Settings.from_options(read_budget=read_budget, synchronous=synchronous, cutoff=cutoff,
                                                    tiers=tiers, horizon=horizon, retain_indexes=retain_indexes),
                              "settings")
    tokens, tls, mode = server_security(tokens_file, tls_cert, tls_key, socket_mode)
    serve(ServeConfig(db, listen=address, socket_path=socket_path, http=http_address, settings=settings,
                      limits=bounds.applied(WireLimits(max_bytes=max_document_bytes), "wire"),
                      stream_timeouts=bounds.applied(StreamTimeouts(), "stream"),
                      http_timeouts=bounds.applied(HttpTimeouts(), "http"), max_buffered_bytes=max_buffered_bytes,
                      tokens=tokens, insecure=insecure, tls=tls, socket_mode=mode, log_format=log_format))


@logd.command("check")
@click.option("--db", required=True, metavar="FILE|URL",
              help="The store to check: a SQLite file, or a postgresql:// URL.")
def check_command(db: str) -> None:
    """Check a store for damage.

    A SQLite file gets SQLite's full integrity_check (every page and index:
    slow on a big store). A PostgreSQL database gets what logd relies on: the
    head row against the commit log, no gap in the log, no record version past
    the head, every delta and value decodable (PostgreSQL guards its own pages).
    On both, every value and delta is compared with the checksum written with
    it, naming the record and commit of each that differs.
    'serve' runs the quick check at every start and refuses a damaged store.
    Both read on a snapshot and change nothing: safe beside running servers.
    Prints each problem found; exit status 1 if there is any.

    \b
    Example:
        retain logd check --db logd.sqlite3
        retain logd check --db postgresql://logd@db.internal/logd
    """
    from retain.logd.postgres import check_database, is_postgres_url, redacted
    from retain.logd.sqlite import check_file

    if is_postgres_url(db):
        shown, problems = redacted(db), check_database(db, full=True)
    elif not Path(db).is_file():
        raise click.ClickException(f"no store at {db}")
    else:
        shown, problems = db, check_file(db, full=True)
    if problems:
        for problem in problems:
            click.echo(f"{shown}: {problem}")
        raise click.ClickException(f"{shown} is damaged: {len(problems)} problem(s); restore it from a backup")
    click.echo(f"{shown}: ok")


@logd.command("backup")
@click.option("--db", required=True, envvar="RETAIN_LOGD_DB", show_envvar=True, metavar="FILE",
              help="The store to copy: a SQLite file (PATH or sqlite:PATH), served or not. A PostgreSQL store is "
                   "copied with pg_dump (docs/operating.md, 'Backup and restore').")
@click.argument("dest", metavar="DEST")
@click.option("--force", is_flag=True, help="Replace a file at DEST (else a DEST that exists is refused).")
@click.option("--step-pages", type=click.IntRange(min=1),
              help="Pages copied per step, each step a few milliseconds' work [1024: 4 MiB].")
@click.option("--pause", type=click.FloatRange(min=0), default=0.0, show_default=True,
              help="Seconds to sleep between two steps, to leave a shared disk room.")
def backup_command(db: str, dest: str, force: bool, step_pages: int | None, pause: float) -> None:
    """Copy a SQLite store to DEST as of one commit, while it serves.

    The copy is read inside one read transaction, a few pages at a step
    (SQLite's online backup API): the server goes on committing, and
    the copy holds the store as of the commit that was its head when
    the copy began. DEST is written beside and renamed into place once
    whole. Prints the copy's commit; `retain logd check --db DEST`
    checks it, `retain logd restore DEST --db FILE` puts it back.

    \b
    Example:
        retain logd backup --db /var/lib/retain/logd.sqlite3 /backups/logd-$(date +%F).sqlite3
        retain logd backup --db logd.sqlite3 logd-backup.sqlite3 --force --pause 0.01
    """
    from retain.logd.backup import STEP_PAGES, backup

    taken = backup(db, dest, force=force, step_pages=step_pages or STEP_PAGES, pause=pause)
    click.echo(f"{taken.path}: commit {taken.commit}, {taken.pages} pages, {taken.bytes} bytes in "
               f"{taken.seconds:.2f} s")


@logd.command("restore")
@click.argument("source", metavar="SRC")
@click.option("--db", required=True, envvar="RETAIN_LOGD_DB", show_envvar=True, metavar="FILE",
              help="The store to restore: a SQLite file (PATH or sqlite:PATH), made if missing. A PostgreSQL store is "
                   "restored with pg_restore (docs/operating.md, 'Backup and restore').")
@click.option("--force", is_flag=True, help="Replace the store at --db (else a store there is refused).")
def restore_command(source: str, db: str, force: bool) -> None:
    """Put the backup SRC in place as the SQLite store --db.

    SRC is checked first (SQLite's quick check, logd's tables). A store
    already at --db is replaced only with --force, and never while
    anything has it open: stop the logd serving it first. The target
    then holds either what it held or the whole backup. Watchers must
    read again: see docs/operating.md, 'Backup and restore'.

    \b
    Example:
        retain logd restore /backups/logd-2026-09-12.sqlite3 --db /var/lib/retain/logd.sqlite3 --force
        retain logd restore logd-backup.sqlite3 --db fresh.sqlite3
    """
    from retain.logd.backup import restore

    done = restore(source, db, force=force)
    click.echo(f"{done.path}: restored at commit {done.commit}" + (" (replaced the store there)" if done.replaced
                                                                     else ""))


def server_security(tokens_file: str | None, tls_cert: str | None, tls_key: str | None,
                    socket_mode: str) -> tuple[Tokens | None, tuple[str, str] | None, int]:
    """The serve options that decide who may connect, read: (tokens, TLS files, socket mode). Whether they
    may serve the addresses given is the daemon's config's to refuse."""
    from retain.wire import Tokens

    tokens = Tokens.load(tokens_file) if tokens_file else None
    if (tls_cert is None) != (tls_key is None):
        raise click.UsageError("give --tls-cert and --tls-key together")
    try:
        mode = int(socket_mode, 8)
    except ValueError:
        raise click.BadParameter(f"an octal permission mode such as 0600 (got {socket_mode!r})",
                                 param_hint="--socket-mode") from None
    if not 0 <= mode <= 0o777:
        raise click.BadParameter(f"an octal permission mode such as 0600 (got {socket_mode!r})",
                                 param_hint="--socket-mode")
    return tokens, (tls_cert, tls_key) if tls_cert and tls_key else None, mode


def session_options(function: Any) -> Any:
    """FILE, --connect, --author, --scope and --json: what every command sending documents to a logd takes."""
    for option in reversed([
        click.argument("file", type=click.File("r")),
        click.option("--connect", "address", default=DEFAULT_LISTEN, show_default=True, envvar="RETAIN_LOGD",
                     show_envvar=True, help="The logd to send to: HOST:PORT, or unix:PATH."),
        click.option("--author", help="The session's author (each request may still name its own)."),
        click.option("--scope", help="Work in this scope: reads see it over the baseline, writes land in it."),
        click.option("--json", "as_json", is_flag=True, help="Print answers as JSON, one per line, instead of YAML."),
        click.option("--token", envvar="RETAIN_TOKEN", show_envvar=True,
                     help="The secret of a token to present (a logd served with --tokens needs one)."),
        click.option("--tls-ca", type=click.Path(dir_okay=False), envvar="RETAIN_TLS_CA", show_envvar=True,
                     help="Speak TLS to --connect, trusting this CA bundle (PEM): the server's certificate when it "
                          "is self-signed."),
    ]):
        function = option(function)
    return function


@logd.command("request")
@session_options
def request_command(file: IO[str], address: str, author: str | None, scope: str | None,
                    as_json: bool, token: str | None, tls_ca: str | None) -> None:
    """Send the documents in FILE (or - for stdin) pipelined, and print each answer.

    Documents are separated by lines '---' or '...'. Every document is read
    and checked before anything is sent. Exit status 1 if any answer is an
    error.

    \b
    Example:
        retain logd request requests.yaml
        echo '{list: {path: jobs.*}}' | retain logd request - --connect 127.0.0.1:7420
        RETAIN_TOKEN=s3cret-of-16-chars retain logd request requests.yaml
        retain logd request requests.yaml --connect logd.internal:7420 --tls-ca ca.pem
    """
    from retain.logd.client import Client, parse_address
    from retain.wire import dump, load, split_documents

    requests = [load(text)[0] for text in split_documents(file.read())]
    if not requests:
        raise click.UsageError("no documents to send")
    with Client(parse_address(address), author=author, scope=scope, token=token, tls=tls_ca) as client:
        answers = client.pipeline(requests)
    for answer in answers:
        sys.stdout.write(dump(answer, "json" if as_json else "yaml").decode())
        if not as_json:
            sys.stdout.write("...\n")
    if any("error" in answer for answer in answers):
        sys.exit(1)


@logd.command("retain")
@session_options
@click.option("--now", help="Age by this RFC 3339 time instead of the file's now (or the server's clock).")
def retain_command(file: IO[str], address: str, author: str | None, scope: str | None, as_json: bool,
                   token: str | None, tls_ca: str | None, now: str | None) -> None:
    """Send the retain request in FILE (or - for stdin) and print the answer.

    FILE holds one document: {retain: {now?, batch?, author?, what: [rules]}}
    as docs/logd-retain.md writes it (the braced form is read too), or just its body.
    It is checked whole before anything is sent. The answer is printed in
    the braced shape; exit status 1 if it is an error.

    \b
    Example:
        retain logd retain expire.yaml
        retain logd retain expire.yaml --now 2026-09-12T08:00:00Z --scope trial-1
    """
    from retain.logd.client import Client, parse_address
    from retain.logd.retain_rules import parse_retain
    from retain.wire import dump, dump_braced, load

    document, _ = load(file.read())
    body = document["retain"] if isinstance(document, dict) and set(document) == {"retain"} else document
    if now is not None:
        body = {**body, "now": now} if isinstance(body, dict) else body
    parse_retain(body)  # refused here, before anything is sent
    with Client(parse_address(address), author=author, scope=scope, token=token, tls=tls_ca) as client:
        answer = client.request({"retain": body})
    sys.stdout.write(dump(answer, "json").decode() if as_json else dump_braced(answer))
    if "error" in answer:
        sys.exit(1)


@logd.command("schedule")
@click.argument("policy_path", metavar="POLICY")
@click.option("--connect", "address", envvar="RETAIN_LOGD", show_envvar=True,
              help=f"The logd to send to: HOST:PORT or unix:PATH; overrides the file's connect [{DEFAULT_LISTEN}].")
@click.option("--once", is_flag=True, help="Send one request now and exit (for cron); exit status 1 on an error.")
@click.option("--token", envvar="RETAIN_TOKEN", show_envvar=True,
              help="The secret of a token with 'retain' to present (a logd served with --tokens needs one).")
@click.option("--tls-ca", type=click.Path(dir_okay=False), envvar="RETAIN_TLS_CA", show_envvar=True,
              help="CA bundle (PEM) of a logd served over TLS (--tls-cert/--tls-key): speak TLS to it.")
@http_option
@ops_tokens_options
@log_format_option
def schedule_command(policy_path: str, address: str | None, once: bool, token: str | None, tls_ca: str | None,
                     http: str | None, ops_tokens_file: str | None, insecure: bool, log_format: str) -> None:
    """Send the retain request of a TOML schedule to a logd on its beat.

    POLICY declares the beat (every), the rules and where logd is (see
    docs/logd.md, "Retain on a schedule"); it is checked whole before
    anything connects. Each beat sends now from this machine's clock: the
    policy and the clock live here, never inside logd. SIGTERM or SIGINT
    stops it after the beat in progress.

    \b
    Example:
        retain logd schedule retain-jobs.toml
        retain logd schedule retain-jobs.toml --once --connect unix:/run/logd.sock
        retain logd schedule retain-jobs.toml --http 127.0.0.1:9466 --log-format json
        retain logd schedule retain-jobs.toml --connect logd.internal:7420 --tls-ca ca.pem
    """
    from retain.logd.schedule import load_schedule
    from retain.logd.schedule_daemon import ScheduleConfig, run_scheduled, send_once
    from retain.wire import dump, dump_braced

    if http is not None and once:
        raise click.UsageError("--http serves a running schedule: drop --once")
    ops_address = http_address(http) if http is not None else None
    config = ScheduleConfig(load_schedule(policy_path), connect=address, token=token, tls=tls_ca, http=ops_address,
                            readers=ops_tokens(ops_tokens_file, insecure, ops_address), log_format=log_format)
    if not once:
        run_scheduled(config)
        return
    answer = send_once(config)
    # The answer as the request language writes it; with --log-format json, as one JSON line (a log shipper's).
    sys.stdout.write(dump(answer, "json").decode() if log_format == "json" else dump_braced(answer))
    if "error" in answer:
        sys.exit(1)
