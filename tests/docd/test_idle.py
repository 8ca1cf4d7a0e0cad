"""docd's links to owners survive the owners' idle timeout: a link the owner closed while idle is reopened
before anything is sent on it."""

from __future__ import annotations

from retain.docd import DocdServer, MountTable, ThreadedServer
from retain.logd import Client, ServerThread, Store
from retain.logd.settings import Settings
from retain.wire import StreamTimeouts
from tests.helpers.waiting import wait_for


class TestIdleOwnerLinks:
    def test_a_link_closed_while_idle_is_reopened(self, tmp_path):
        """logd closes docd's idle link after its idle timeout (1 s here); the caller's next request through docd
        is still answered, not 'unavailable'."""
        with Store.open(str(tmp_path / "logd.sqlite3"), settings=Settings(synchronous="normal")) as store, \
                ServerThread(store, listen=("127.0.0.1", 0), stream_timeouts=StreamTimeouts(idle=1)) as logd, \
                ThreadedServer(DocdServer(MountTable.of({}, logd=logd.address, timeout=30),
                                          listen=("127.0.0.1", 0))) as docd, \
                Client(docd.address) as caller:
            caller.patch([{"set": "jobs.j1", "value": 1}])
            connections = logd.server._stream._sockets._connections
            wait_for(lambda: not connections, "logd to close docd's idle link", timeout=60)
            assert caller.get("jobs.j1").value == 1
