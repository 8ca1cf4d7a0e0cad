"""``retain demo``: the main job on embedded defaults, act by act.

Each act is a function ``act(server, console)`` taking a running
:class:`~retain.servers.RedisServer`; later parts of retain add acts.
"""

from __future__ import annotations

from rich.console import Console

from retain.demo.archive_feed import archive_feed
from retain.demo.trim_modes import trim_modes
from retain.servers import RedisServer

__all__ = ["ACTS", "run"]

ACTS = [trim_modes, archive_feed]


def run(console: Console) -> None:
    """Start an embedded Redis and play every act against it."""
    with RedisServer() as server:
        console.print(f"[bold]retain demo[/] · embedded redis-server at {server.url}")
        for act in ACTS:
            act(server, console)
