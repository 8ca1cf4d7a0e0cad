"""docd with tokens: it enforces its callers' permissions itself and reaches logd with a
token of its own."""

from __future__ import annotations

import pytest

from retain.docd import DocdServer, MountTable, ThreadedServer
from retain.errors import Forbidden, InvalidInput, Unauthenticated
from retain.logd import Client, ServerThread, Store
from retain.logd.settings import Settings
from retain.wire import Tokens
from tests.helpers.auth import SECRETS, token_file
from tests.helpers.logd import FakeClock


@pytest.fixture
def guarded_pair(tmp_path):
    """A logd with tokens, and docd in front of it with the same token file, presenting the docd token."""
    tokens = Tokens.load(token_file(tmp_path))
    with Store.open(str(tmp_path / "logd.sqlite3"), settings=Settings(synchronous="normal"),
                    clock=FakeClock()) as store, \
            ServerThread(store, listen=("127.0.0.1", 0), tokens=tokens) as logd, \
            ThreadedServer(DocdServer(MountTable.of({}, logd=logd.address, timeout=30), listen=("127.0.0.1", 0),
                                      tokens=tokens, owner_token=SECRETS["docd"])) as docd:
        yield store, docd, logd


class TestDocdTokens:
    def test_no_token_is_refused(self, guarded_pair):
        """A caller without a token is refused at connect; nothing reaches logd."""
        store, docd, logd = guarded_pair
        with pytest.raises(Unauthenticated):
            Client(docd.address).get("jobs")
        assert store.head == 0

    def test_docd_enforces_the_callers_permissions(self, guarded_pair):
        """docd's own token may write, but a reader calling through docd still cannot patch or retain; a writer
        can, as itself or a verse/* author, never as admin/root."""
        store, docd, logd = guarded_pair
        with Client(docd.address, token=SECRETS["reader"]) as reader:
            with pytest.raises(Forbidden, match="'reader' may not patch"):
                reader.patch([{"set": "jobs.j1", "value": 1}])
            with pytest.raises(Forbidden, match="needs 'retain'"):
                reader.call("retain", now="2026-09-12T08:00:00Z",
                            what=[{"path": "jobs.*", "age": "updatedAt", "after": "1d"}])
        assert store.head == 0
        with Client(docd.address, token=SECRETS["writer"]) as writer:
            writer.patch([{"set": "jobs.j1", "value": 1}])
            writer.patch([{"set": "jobs.j2", "value": 1}], author="verse/ops")
            with pytest.raises(Forbidden, match="admin/root"):
                writer.patch([{"set": "jobs.j3", "value": 1}], author="admin/root")
            with pytest.raises(Forbidden, match="admin/root"):
                writer.call("session", author="admin/root")
        with Client(docd.address, token=SECRETS["reader"]) as reader:
            assert reader.get("jobs").value == {"j1": 1, "j2": 1}
        with Client(logd.address, token=SECRETS["admin"]) as admin:
            admin.watch("jobs", first=1)
            assert [admin.next_delta()["author"] for _ in range(2)] == ["writer", "verse/ops"]

    def test_an_open_docd_stays_on_loopback(self):
        """docd without tokens on 0.0.0.0 refuses to start unless insecure."""
        with pytest.raises(InvalidInput, match="without tokens"):
            DocdServer(MountTable.of({}, logd=("127.0.0.1", 1)), listen=("0.0.0.0", 0))


class TestControllerTokens:
    def test_a_controller_with_tokens_checks_its_callers(self, tmp_path):
        """A controller with tokens refuses a caller without one and a reader's patch; docd's owner token
        reaches it."""
        from retain.docd import Controller

        tokens = Tokens.load(token_file(tmp_path))
        with Store.open(str(tmp_path / "ctl.sqlite3")) as store, \
                ThreadedServer(Controller(store, listen=("127.0.0.1", 0), tokens=tokens)) as ctl:
            with pytest.raises(Unauthenticated):
                Client(ctl.address).get("runs")
            with Client(ctl.address, token=SECRETS["reader"]) as reader, pytest.raises(Forbidden):
                reader.patch([{"set": "runs.r1", "value": 1}])
            with Client(ctl.address, token=SECRETS["docd"]) as docd:
                docd.patch([{"set": "runs.r1", "value": 1}])
            assert store.head == 1
