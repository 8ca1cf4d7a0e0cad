"""The controller kit: a store served as a controller, offering the verbs it is given and no others."""

from __future__ import annotations

import pytest

from retain.docd import UNSUPPORTED, Controller, ThreadedServer, controller_verbs
from retain.errors import InvalidInput, NotFound, Unsupported
from retain.logd import Store
from retain.logd.client import Client
from retain.logd.settings import Settings
from retain.logd.verbs import VERBS
from tests.helpers.wire import exchange


@pytest.fixture
def store(tmp_path):
    with Store.open(str(tmp_path / "runs.sqlite3"), settings=Settings(synchronous="normal")) as store:
        yield store


@pytest.fixture
def controller(store):
    with ThreadedServer(Controller(store, without=("compact",), listen=("127.0.0.1", 0))) as running:
        yield running


class TestVerbs:
    def test_default_is_every_logd_verb_but_watch(self):
        """A controller offers what logd offers, less watch (which needs logd's own server)."""
        assert controller_verbs() == tuple(verb for verb in VERBS if verb != "watch")

    def test_without(self):
        """without= takes verbs away."""
        assert "compact" not in controller_verbs(["compact"]) and "get" in controller_verbs(["compact"])

    @pytest.mark.parametrize(("without", "message"), [
        (["frobnicate"], "'frobnicate' is not a logd verb; a controller may go without compact"),
        (["session"], "a controller cannot go without session"),
    ])
    def test_refusals(self, without, message):
        """An unknown verb, or session, is refused before anything is served."""
        with pytest.raises(InvalidInput, match=message):
            controller_verbs(without)


class TestServing:
    def test_serves_logds_verbs(self, controller):
        """Writes, reads and errors behave as logd's own, pipelined and answered in order."""
        with Client(controller.address, author="verse/ctl") as client:
            answers = client.pipeline([{"patch": {"ops": [{"set": "runs.r1", "value": {"at": "x"}}]}},
                                       {"get": {"path": "runs.r1.at"}}, {"get": {"path": "runs.r2"}},
                                       {"list": {"path": "runs.*"}}])
            assert answers[:2] == [{"result": {"patch": {"commit": 1}}},
                                   {"result": {"get": {"commit": 1, "value": "x"}}}]
            assert answers[2]["error"]["code"] == "not_found"
            assert answers[3] == {"result": {"list": {"commit": 1, "items": {"r1": {"at": "x"}}}}}
            with pytest.raises(NotFound):
                client.get("runs.r9")

    @pytest.mark.parametrize("verb", ["compact", "watch", "frobnicate"])
    def test_a_verb_it_lacks_is_unsupported(self, controller, verb):
        """A verb it does not offer is answered with docs/docd.md's words, exactly."""
        with Client(controller.address) as client:
            assert client.request({verb: {}}) == {"error": {"code": "unsupported", "message": UNSUPPORTED}}
            with pytest.raises(Unsupported):
                client.call(verb)
        assert UNSUPPORTED == "unsupported operation: request type"

    def test_each_connection_is_a_session(self, controller, store):
        """A session on one connection names the author of its commits, and no other connection's."""
        with Client(controller.address, author="verse/ops") as ops, Client(controller.address) as anonymous:
            ops.patch([{"set": "a", "value": 1}])
            anonymous.patch([{"set": "b", "value": 1}])
        assert [delta.author for delta in store.session().deltas(first=1)] == ["verse/ops", "anonymous"]

    def test_json_in_json_out(self, controller):
        """A JSON request is answered in JSON, a YAML one in YAML, as logd does."""
        first, second = exchange(controller.address, b'{"compact": {}}\n...\n{compact: {}}\n...\n', 2)
        assert first == b'{"error":{"code":"unsupported","message":"unsupported operation: request type"}}\n'
        assert second == b"error:\n  code: unsupported\n  message: 'unsupported operation: request type'\n"
