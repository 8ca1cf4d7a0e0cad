"""``retain demo``."""

from __future__ import annotations

import sys

import click
from rich.console import Console

__all__ = ["demo"]


@click.command()
def demo() -> None:
    """Run the main job on embedded defaults and show what retention does.

    Starts a redis-server of its own on a free loopback port (nothing is
    kept on disk), appends a game's activity feed, trims it and prints
    what each window and mode removed.

    \b
    Example:
        retain demo
    """
    from retain.demo import run  # the demo's dependencies load only when it runs

    try:
        run(Console())
    except KeyboardInterrupt:
        # The acts' with-blocks have stopped their servers and removed their files on the way out.
        click.echo("retain demo interrupted: its servers are stopped and their files removed", err=True)
        sys.exit(130)
