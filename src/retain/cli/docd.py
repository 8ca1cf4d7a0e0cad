"""``retain docd``: route requests across logd and mounted controllers; serve a store as a controller."""

from __future__ import annotations

from typing import Any

import click

from retain.cli._ops import http_address, http_option, log_format_option
from retain.daemon import stop_signals_held
from retain.wire import WireLimits

__all__ = ["docd"]

DEFAULT_LISTEN = "127.0.0.1:7410"


@click.group()
def docd() -> None:
    """Route retain, get, list, patch and watch to the owner of each path.

    logd owns every base path; controllers own the paths a TOML mount file
    gives them.

    \b
    Example:
        retain docd serve --mounts mounts.toml --logd 127.0.0.1:7420
        retain docd controller --db runs.sqlite3 --socket /tmp/runs.sock
    """


def _stream_address(listen: str | None, socket_path: str | None, default: str | None) -> dict[str, Any]:
    """``--listen`` / ``--socket`` as the server's ``listen`` and ``socket_path`` options."""
    from retain.logd.client import parse_address

    if listen and socket_path:
        raise click.UsageError("give --listen or --socket, not both")
    if not listen and not socket_path and default is None:
        raise click.UsageError("give --listen HOST:PORT or --socket PATH")
    if socket_path:
        return {"socket_path": socket_path}
    address = parse_address(listen or default)  # type: ignore[arg-type]
    if isinstance(address, str):
        raise click.UsageError("--listen takes HOST:PORT; use --socket for a Unix socket")
    return {"listen": address}


def _where(server: Any, socket_path: str | None) -> str:
    return f"{server.address[0]}:{server.address[1]}" if server.address else f"unix:{socket_path}"


@docd.command("serve")
@click.option("--mounts", "mounts_file", required=True, type=click.Path(dir_okay=False),
              help="The TOML mount file: which controller owns which path.")
@click.option("--logd", "logd_address", help="Where logd is: HOST:PORT or unix:PATH [the file's, else 127.0.0.1:7420].")
@click.option("--listen", help=f"TCP HOST:PORT to serve on [default: {DEFAULT_LISTEN} unless --socket].")
@click.option("--socket", "socket_path", help="Unix socket PATH to serve on, instead of --listen.")
@click.option("--max-document-bytes", type=int, default=WireLimits().max_bytes, show_default=True,
              help="The largest request document accepted.")
@click.option("--tokens", "tokens_file", type=click.Path(dir_okay=False),
              help="TOML token file of the callers docd accepts (docs/docd.md); docd enforces their permissions.")
@click.option("--owner-token", envvar="RETAIN_OWNER_TOKEN", show_envvar=True,
              help="The secret docd presents to logd and every controller.")
@click.option("--owner-tls-ca", type=click.Path(dir_okay=False), envvar="RETAIN_OWNER_TLS_CA", show_envvar=True,
              help="CA bundle (PEM) of owners served over TLS (a logd given --tls-cert/--tls-key): docd then "
                   "speaks TLS to every owner at a TCP address.")
@click.option("--insecure", is_flag=True, help="Serve a non-loopback address without --tokens (anyone may write).")
@click.option("--socket-mode", default="0600", show_default=True,
              help="Permission mode (octal) of the --socket file; whatever the umask.")
@http_option
@log_format_option
def serve_command(mounts_file: str, logd_address: str | None, listen: str | None, socket_path: str | None,
                  max_document_bytes: int, tokens_file: str | None, owner_token: str | None,
                  owner_tls_ca: str | None, insecure: bool, socket_mode: str, http: str | None,
                  log_format: str) -> None:
    """Serve docd: each request goes to the owner of its path.

    A retain request is split by owner, sent to every owner at once with one
    now, and answered rule by rule in the order sent. The mount file is
    checked before anything connects. SIGTERM or SIGINT (Ctrl-C) stops it
    once the requests under way are answered.

    \b
    Example:
        retain docd serve --mounts mounts.toml
        retain docd serve --mounts mounts.toml --logd unix:/tmp/logd.sock --socket /tmp/docd.sock
        retain docd serve --mounts mounts.toml --tokens callers.toml --owner-token "$DOCD_SECRET"
        retain docd serve --mounts mounts.toml --logd logd.internal:7420 --owner-tls-ca ca.pem
        retain docd serve --mounts mounts.toml --http 127.0.0.1:9467 --log-format json
    """
    from retain.cli.logd import server_security
    from retain.docd.daemon import DocdConfig, serve
    from retain.docd.mounts import load_mounts

    ops_address = http_address(http) if http is not None else None
    table = load_mounts(mounts_file).with_logd(logd_address)
    where = _stream_address(listen, socket_path, DEFAULT_LISTEN)
    tokens, _, mode = server_security(tokens_file, None, None, socket_mode)
    serve(DocdConfig(table, listen=where.get("listen"), socket_path=socket_path, max_document_bytes=max_document_bytes,
                     tokens=tokens, owner_token=owner_token, owner_tls=owner_tls_ca, insecure=insecure,
                     socket_mode=mode, http=ops_address, log_format=log_format))


@docd.command("controller")
@click.option("--db", required=True, help="SQLite file holding the controller's store (made if missing).")
@click.option("--listen", help="TCP HOST:PORT to serve on.")
@click.option("--socket", "socket_path", help="Unix socket PATH to serve on, instead of --listen.")
@click.option("--without", multiple=True, help="A verb not to offer (answered unsupported), repeatable: retain.")
@click.option("--tokens", "tokens_file", type=click.Path(dir_okay=False),
              help="TOML token file of the callers it accepts (docd's --owner-token among them); docs/logd.md.")
@click.option("--insecure", is_flag=True, help="Serve a non-loopback address without --tokens (anyone may write).")
@stop_signals_held()  # Store.open makes the store's threads: they must not take the stop signals
def controller_command(db: str, listen: str | None, socket_path: str | None, without: tuple[str, ...],
                       tokens_file: str | None, insecure: bool) -> None:
    """Serve a store as a controller: its subtree, paths relative to its mount.

    It offers every logd verb but watch (serve with 'retain logd serve' for
    watch), less those given with --without. SIGTERM or SIGINT (Ctrl-C)
    stops it once the requests under way are answered.

    \b
    Example:
        retain docd controller --db runs.sqlite3 --socket /tmp/runs.sock
        retain docd controller --db ctl.sqlite3 --listen 127.0.0.1:7501 --without retain
        retain docd controller --db ctl.sqlite3 --listen 0.0.0.0:7501 --tokens owners.toml
    """
    from retain.cli.logd import server_security
    from retain.daemon import run_daemon
    from retain.docd.controller import Controller, controller_verbs
    from retain.logd import Store
    from retain.wire import ThreadedServer, refuse_open

    where = _stream_address(listen, socket_path, None)
    verbs = controller_verbs(without)
    tokens, _, _ = server_security(tokens_file, None, None, "0600")
    refuse_open([where["listen"][0] if "listen" in where else None], tokens, insecure)
    with Store.open(db) as store:
        running = ThreadedServer(Controller(store, without=without, tokens=tokens, insecure=insecure, **where))
        run_daemon(running, name="controller", finishing="the requests under way", started=lambda: f"controller serving {db} on "
                   f"{_where(running.server, socket_path)}; verbs: {', '.join(verbs)}")
