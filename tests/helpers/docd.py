"""Helpers for docd's tests: the world of owners the ``world`` fixture starts, and raw exchanges."""

from __future__ import annotations

import socket
from dataclasses import dataclass
from pathlib import Path

from retain.docd import MountTable, ThreadedServer
from retain.logd import Client, ServerThread, Store
from retain.wire import Framer
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


def exchange(address, data: bytes, answers: int) -> list[bytes]:
    """Send raw bytes to a stream server and return the first ``answers`` documents it sends back, unparsed."""
    framer, found = Framer(1 << 24), []
    with socket.create_connection(address, timeout=60) as raw:
        raw.sendall(data)
        while len(found) < answers:
            chunk = raw.recv(65536)
            assert chunk, "the server closed the connection"
            found.extend(framer.feed(chunk))
    return found[:answers]
