"""Helpers for docd's tests: the world of owners the ``world`` fixture starts."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from retain.docd import MountTable, ThreadedServer
from retain.logd import Client, ServerThread, Store
from tests.helpers.logd import FakeClock


@dataclass
class World:
    """Every owner, running, and how to reach it; ``docd(table)`` starts a docd in front of them."""

    directory: Path
    clock: FakeClock
    logd_store: Store
    ctl_store: Store
    ci_store: Store
    feed_store: Store
    logd: ServerThread
    ctl: ThreadedServer
    ci: ThreadedServer
    feed: ServerThread

    @property
    def ctl_socket(self) -> str:
        return str(self.directory / "verse-ctl.sock")

    @property
    def ci_address(self) -> str:
        return "{}:{}".format(*self.ci.address)

    @property
    def feed_socket(self) -> str:
        return str(self.directory / "feed.sock")

    def table(self, **mounts: str) -> MountTable:
        """The table over these owners: ``verse.ctl``, ``ci``, ``feed`` unless told otherwise ('_' reads '.')."""
        mounts = mounts or {"verse_ctl": "unix:" + self.ctl_socket, "ci": self.ci_address,
                            "feed": "unix:" + self.feed_socket}
        return MountTable.of({name.replace("_", "."): address for name, address in mounts.items()},
                             logd=self.logd.address, timeout=60)

    def client(self, server: ThreadedServer | ServerThread, **options) -> Client:
        return Client(server.address, **options)
