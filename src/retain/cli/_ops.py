"""What the daemons' commands share on the operator's side: ``--http``, its ``--tokens`` and ``--log-format``.

Each daemon's endpoints are its part's (:mod:`retain.retention.endpoints`,
:mod:`retain.logd.endpoints`, :mod:`retain.docd.daemon`), assembled by its library entry.
"""

from __future__ import annotations

from typing import Any

import click

from retain.logs import LOG_FORMATS
from retain.wire import Tokens, refuse_open

__all__ = ["http_address", "http_option", "log_format_option", "ops_tokens", "ops_tokens_options"]


def http_option(function: Any) -> Any:
    return click.option("--http", "http", metavar="HOST:PORT",
                        help="Serve /healthz, /readyz, /metrics and the dashboard (/) on HOST:PORT.")(function)


def ops_tokens_options(function: Any) -> Any:
    """--tokens and --insecure for a daemon whose only listening address is --http."""
    function = click.option("--insecure", is_flag=True,
                            help="Serve a non-loopback --http without --tokens (anyone may read the metrics).")(function)
    return click.option("--tokens", "ops_tokens_file", type=click.Path(dir_okay=False),
                        help="TOML token file: /metrics and the dashboard then need a bearer token that may read "
                             "(docs/operating.md).")(function)


def ops_tokens(tokens_file: str | None, insecure: bool, address: tuple[str, int] | None) -> Tokens | None:
    """The tokens guarding the ops address; a non-loopback address without them is refused unless ``insecure``."""
    tokens = Tokens.load(tokens_file) if tokens_file else None
    if tokens is not None and address is None:
        raise click.UsageError("--tokens guards the --http address: give --http too")
    refuse_open([address[0] if address else None], tokens, insecure)
    return tokens


def log_format_option(function: Any) -> Any:
    return click.option("--log-format", type=click.Choice(LOG_FORMATS), default="text", show_default=True,
                        help="How the daemon logs to stderr: text lines, or one JSON object per line (what "
                             "--once or --dry-run print to stdout, too).")(function)


def http_address(text: str, option: str = "--http") -> tuple[str, int]:
    """``HOST:PORT`` (``:9464``: loopback) as an address to bind; anything else is a usage error naming ``option``."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) < 65536:
        raise click.BadParameter(f"expected HOST:PORT such as 127.0.0.1:9464 (got {text!r})", param_hint=option)
    return host.strip("[]") or "127.0.0.1", int(port)
