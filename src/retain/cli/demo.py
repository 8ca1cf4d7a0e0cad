"""``retain demo``."""

from __future__ import annotations

import sys

import click
from rich.console import Console

__all__ = ["demo"]


@click.command()
@click.option("--postgres", is_flag=True,
              help="Keep the logd act's store on an embedded PostgreSQL (started for the demo on a free loopback "
                   "port, removed after) rather than a SQLite file.")
def demo(postgres: bool) -> None:
    """Run the main job on embedded defaults and show what retention does.

    Starts a redis-server of its own on a free loopback port (nothing is
    kept on disk), appends a game's activity feed, trims it and prints
    what each window and mode removed; then archives, and runs logd and
    docd on stores of their own.

    \b
    Example:
        retain demo
        retain demo --postgres
    """
    from retain.demo import run  # the demo's dependencies load only when it runs

    try:
        run(Console(), postgres=postgres)
    except KeyboardInterrupt:
        # The acts' with-blocks have stopped their servers and removed their files on the way out.
        click.echo("retain demo interrupted: its servers are stopped and their files removed", err=True)
        sys.exit(130)
