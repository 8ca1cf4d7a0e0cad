"""A real world for docd: logd and controllers on real SQLite files and real sockets, docd in front.

- ``logd``: a logd store served by logd's own server on loopback TCP;
- ``verse.ctl``: a controller (the kit) over a store of its own on a Unix socket,
  without retain -- docs/docd.md's controller that does not implement it;
- ``ci``: a controller (the kit) over a store of its own that implements retain -- the
  runs controller -- on loopback TCP;
- ``feed``: logd's own server over a store of its own on a Unix socket: a controller
  offering every verb, watch included.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from retain.docd import Controller, DocdServer, ThreadedServer
from retain.logd import ServerThread, Store
from retain.logd.settings import Settings
from tests.helpers.docd import World
from tests.helpers.logd import FakeClock


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
