"""``retain demo``: the main job on embedded defaults, act by act.

Each act is a function ``act(server, console)`` taking a running
:class:`~retain.servers.RedisServer`; later parts of retain add acts.

Imports: any part and :mod:`retain.servers`; only :mod:`retain.cli` imports it.
"""

from __future__ import annotations

from rich.console import Console

from retain.demo.archive_feed import archive_feed
from retain.demo.bounded_feed import bounded_feed
from retain.demo.docd_routes import docd_routes
from retain.demo.logd_jobs import logd_jobs
from retain.demo.trim_modes import trim_modes
from retain.servers import RedisServer

__all__ = ["ACTS", "run"]

ACTS = [trim_modes, bounded_feed, archive_feed, logd_jobs, docd_routes]


def run(console: Console) -> None:
    """Start an embedded Redis and play every act against it."""
    with RedisServer() as server:
        console.print(f"[bold]retain demo[/] · embedded redis-server at {server.url}")
        for number, act in enumerate(ACTS, start=1):
            console.rule(f"Act {number}")
            act(server, console)
