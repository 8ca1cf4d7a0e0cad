"""``retain policy``: the policy file the retention daemon runs, checked without running it."""

from __future__ import annotations

import sys

import click

from retain import _toml
from retain.errors import InvalidPolicy
from retain.retention import check_policy

__all__ = ["policy"]


@click.group()
def policy() -> None:
    """Check the TOML policy files `retain streams run` takes (docs/policy.md).

    \b
    Example:
        retain policy check retain.toml
    """


@policy.command("check")
@click.argument("path", metavar="FILE")
def check_command(path: str) -> None:
    """Check a policy FILE whole, connecting to nothing: print every problem and exit 1, or say it is good.

    Every field of every [[stream]] entry, the archive, the replicas and
    what holds across entries are checked as `retain streams run` checks them
    before it starts, but each problem is listed, not only the first (as
    nginx -t or promtool check config do). No Redis is reached and no
    archive opened: a server that refuses the URL or a store that refuses
    its credentials shows only when the daemon starts.

    \b
    Example:
        retain policy check retain.toml
        retain policy check retain.toml && systemctl reload retain
    """
    try:
        text = _toml.read(path, "policy", InvalidPolicy)
    except InvalidPolicy as exc:
        raise click.ClickException(str(exc)) from exc
    problems = check_policy(text, source=path)
    for problem in problems:
        click.echo(problem, err=True)
    if problems:
        click.echo(f"{path}: {len(problems)} problem{'s' if len(problems) > 1 else ''}", err=True)
        sys.exit(1)
    click.echo(f"{path}: the policy is good")
