"""The ``retain`` command: thin wrappers that parse, call one library function and print.

Each part of retain registers its own command group from a module of its own; what
commands share (the Redis option, time parsing, error reporting) is in ``_common``.
The daemons (``streams run``, ``logd serve``, ``logd schedule``, ``docd serve``,
``docd controller``) run through :func:`retain.daemon.run_daemon`.

Imports: any part; nothing imports it (``retain`` on the command line is :func:`main`).
"""

from __future__ import annotations

import click

from retain import __version__
from retain.cli._common import RetainGroup
from retain.cli.archive import archive
from retain.cli.demo import demo
from retain.cli.docd import docd
from retain.cli.logd import logd
from retain.cli.policy import policy
from retain.cli.server import server
from retain.cli.streams import streams

__all__ = ["main"]


@click.group(cls=RetainGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="retain")
def main() -> None:
    """Bound log-like data and keep its history.

    \b
    Example:
        retain demo
        retain server redis --port 6390
        retain streams trim codemojex activity --maxlen 10000
        retain policy check retain.toml
        retain logd serve --db logd.sqlite3
    """


main.add_command(demo)
main.add_command(streams)
main.add_command(policy)
main.add_command(logd)
main.add_command(archive)
main.add_command(docd)
main.add_command(server)
