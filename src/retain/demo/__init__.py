"""``retain demo``: the main job on embedded defaults, act by act.

Each act is a function ``act(server, console)`` taking a running
:class:`~retain.servers.RedisServer`; later parts of retain add acts. With
``postgres``, the logd act keeps its store in a database on an embedded
PostgreSQL (:class:`~retain.servers.PostgresServer`) rather than a SQLite file.

Imports: any part and :mod:`retain.servers`; only :mod:`retain.cli` imports it.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console

from retain.demo.archive_feed import archive_feed
from retain.demo.bounded_feed import bounded_feed
from retain.demo.docd_routes import docd_routes
from retain.demo.logd_jobs import logd_jobs
from retain.demo.trim_modes import trim_modes
from retain.servers import PostgresServer, RedisServer

__all__ = ["ACTS", "run"]

ACTS = [trim_modes, bounded_feed, archive_feed, logd_jobs, docd_routes]


def run(console: Console, *, postgres: bool = False) -> None:
    """Start an embedded Redis (and with ``postgres`` an embedded PostgreSQL) and play every act against it."""
    with RedisServer() as server, _logd_database(postgres) as url:
        console.print(f"[bold]retain demo[/] · embedded redis-server at {server.url}")
        acts = [functools.partial(logd_jobs, store_url=url) if act is logd_jobs else act for act in ACTS]
        for number, act in enumerate(acts, start=1):
            console.rule(f"Act {number}")
            act(server, console)


@contextmanager
def _logd_database(postgres: bool) -> Iterator[str | None]:
    """The URL of a database on an embedded PostgreSQL for the logd act, stopped and removed after; None: SQLite."""
    if not postgres:
        yield None
        return
    with PostgresServer() as server:
        yield server.create_database("logd")
