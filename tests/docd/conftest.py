"""A real world for docd: logd and controllers on real SQLite files and real sockets, docd in front.

- ``logd``: a logd store served by logd's own server on loopback TCP;
- ``verse.ctl``: a controller (the kit) over a store of its own on a Unix socket,
  without retain -- the seed's controller that does not implement it;
- ``ci``: a controller (the kit) over a store of its own that implements retain -- the
  runs controller -- on loopback TCP;
- ``feed``: logd's own server over a store of its own on a Unix socket: a controller
  offering every verb, watch included.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from retain.docd import Controller, DocdServer, MountTable, ThreadedServer
from retain.logd import ServerThread, Store
from retain.logd.client import Client
from retain.logd.settings import Settings
from tests.logd.conftest import FakeClock


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


@pytest.fixture
def world(tmp_path) -> Iterator[World]:
    clock = FakeClock()
    settings = Settings(synchronous="normal")
    with Store.open(str(tmp_path / "logd.sqlite3"), settings=settings, clock=clock) as logd_store, \
            Store.open(str(tmp_path / "ctl.sqlite3"), settings=settings, clock=clock) as ctl_store, \
            Store.open(str(tmp_path / "ci.sqlite3"), settings=settings, clock=clock) as ci_store, \
            Store.open(str(tmp_path / "feed.sqlite3"), settings=settings, clock=clock) as feed_store, \
            ServerThread(logd_store, listen=("127.0.0.1", 0)) as logd, \
            ThreadedServer(Controller(ctl_store, without=("retain",),
                                      socket_path=str(tmp_path / "verse-ctl.sock"))) as ctl, \
            ThreadedServer(Controller(ci_store, listen=("127.0.0.1", 0))) as ci, \
            ServerThread(feed_store, socket_path=str(tmp_path / "feed.sock")) as feed:
        yield World(tmp_path, clock, logd_store, ctl_store, ci_store, feed_store, logd, ctl, ci, feed)


@pytest.fixture
def docd(world) -> Iterator[ThreadedServer]:
    """docd over the world's owners, its clock the world's."""
    with ThreadedServer(DocdServer(world.table(), listen=("127.0.0.1", 0), clock=world.clock)) as running:
        yield running


def exchange(address, data: bytes, answers: int) -> list[bytes]:
    """Send raw bytes to a stream server and return the first ``answers`` documents it sends back, unparsed."""
    import socket

    from retain.wire.documents import Framer

    framer, found = Framer(1 << 24), []
    with socket.create_connection(address, timeout=60) as raw:
        raw.sendall(data)
        while len(found) < answers:
            chunk = raw.recv(65536)
            assert chunk, "the server closed the connection"
            found.extend(framer.feed(chunk))
    return found[:answers]
