"""docd over real sockets: get, list, patch and watch reach their owner; sessions, pipelining, owners down."""

from __future__ import annotations

import socket

import pytest

from retain.docd import DocdServer, MountTable, ThreadedServer
from retain.errors import InvalidRequest, NotFound, OwnerUnavailable, PreconditionFailed, ServerUnavailable, Unsupported
from retain.logd.client import Client
from tests.helpers.wire import exchange


def seed(world):
    """A job at logd, a run at verse.ctl, a run at ci: written straight to each owner."""
    with world.client(world.logd) as logd:
        logd.patch([{"set": "jobs.j1", "value": {"status": "done"}}, {"set": "verse.notes", "value": {"n": 1}}])
    with Client(world.ctl_socket) as ctl:
        ctl.patch([{"set": "runs.r1", "value": {"at": "2026-09-01T00:00:00Z"}}])
    with Client(world.ci.address) as ci:
        ci.patch([{"set": "runs.r7", "value": {"at": "2026-09-02T00:00:00Z"}}])


class TestReads:
    def test_get_and_list_reach_the_owner(self, world, docd):
        """A read goes to the owner of its place and says who answered; paths are the caller's."""
        seed(world)
        with world.client(docd) as client:
            assert client.call("get", path="jobs.j1") == {"commit": 1, "value": {"status": "done"}, "owner": "logd"}
            assert client.call("get", path="verse.ctl.runs.r1.at") == {
                "commit": 1, "value": "2026-09-01T00:00:00Z", "owner": "verse.ctl"}
            assert client.call("list", path="ci.runs.*") == {
                "commit": 1, "items": {"r7": {"at": "2026-09-02T00:00:00Z"}}, "owner": "ci"}
            assert client.call("get", path="verse.ctl") == {
                "commit": 1, "value": {"runs": {"r1": {"at": "2026-09-01T00:00:00Z"}}}, "owner": "verse.ctl"}

    def test_nothing_is_composed_across_mounts(self, world, docd):
        """A read over a container with mounts beneath is logd's alone, and lists the mounts it did not read."""
        seed(world)
        with world.client(docd) as client:
            assert client.call("list", path="verse.*") == {"commit": 1, "items": {"notes": {"n": 1}}, "owner": "logd",
                                                           "under": ["verse.ctl"]}
            whole = client.call("get")
            assert whole["under"] == ["verse.ctl", "ci", "feed"] and "ci" not in whole["value"]

    def test_owner_errors_pass_through(self, world, docd):
        """An owner's error reaches the caller as that owner said it."""
        with world.client(docd) as client, pytest.raises(NotFound, match="runs.r9 does not exist"):
            client.call("get", path="verse.ctl.runs.r9")

    def test_docd_refusals_send_nothing(self, world, docd):
        """Requests docd cannot route are refused by docd itself, and the connection goes on."""
        with world.client(docd) as client:
            with pytest.raises(Unsupported, match="request type 'schema' \\(docd routes"):
                client.call("schema")
            with pytest.raises(InvalidRequest, match="the mount verse.ctl is the root of its controller's tree"):
                client.call("list", path="verse.ctl(*)")
            assert client.call("get", path="verse.ctl")["owner"] == "verse.ctl"


class TestPatch:
    def test_patch_lands_at_its_owner(self, world, docd):
        """A patch of a controller's paths commits there, relative to its mount; logd sees nothing of it."""
        with world.client(docd) as client:
            written = client.call("patch", ops=[{"set": "verse.ctl.runs.r2", "value": {"at": "x"}}])
            assert written == {"commit": 1, "owner": "verse.ctl"}
            assert client.call("patch", ops=[{"set": "jobs.j2", "value": 2}]) == {"commit": 1, "owner": "logd"}
        with Client(world.ctl_socket) as ctl:
            assert ctl.get("runs.r2").value == {"at": "x"}
        with world.client(world.logd) as logd:
            assert logd.get().value == {"jobs": {"j2": 2}}

    def test_precondition_paths_are_relative_too(self, world, docd):
        """A precondition on a controller's path is checked there, against its own tree."""
        seed(world)
        with world.client(docd) as client:
            with pytest.raises(PreconditionFailed, match="runs.r7"):
                client.call("patch", ops=[{"delete": "ci.runs.r7"}], if_={"ci.runs.r7": {"at": "yesterday"}})
            ok = client.call("patch", ops=[{"delete": "ci.runs.r7"}],
                             if_={"ci.runs.r7": {"at": "2026-09-02T00:00:00Z"}})
            assert ok == {"commit": 2, "owner": "ci"}

    def test_a_patch_spanning_owners_is_refused(self, world, docd):
        """One patch is one commit at one owner: spanning two is refused, nothing written anywhere."""
        with world.client(docd) as client, pytest.raises(InvalidRequest, match="spans logd .* and ci"):
            client.call("patch", ops=[{"set": "jobs.j1", "value": 1}, {"set": "ci.runs.r1", "value": 1}])
        assert world.logd_store.head == 0 and world.ci_store.head == 0


class TestWatch:
    def test_watch_a_controller(self, world, docd):
        """A watch through docd streams the owner's deltas with the caller's paths, whoever wrote them."""
        with world.client(docd, author="verse/ops") as client:
            answer = client.call("watch", path="feed.runs")
            assert answer == {"path": "feed.runs", "from": 1, "commit": 0, "owner": "feed"}
            client.call("patch", ops=[{"set": "feed.runs.r1", "value": {"at": "a"}}])
            with Client(world.feed_socket, author="feed/direct") as feed:
                feed.patch([{"delete": "runs.r1"}, {"set": "other", "value": 1}])
            first, second = client.next_delta(), client.next_delta()
            assert (first["commit"], first["author"], first["ops"], first["owner"]) == (
                1, "verse/ops", [{"set": "feed.runs.r1", "value": {"at": "a"}}], "feed")
            assert (second["commit"], second["author"], second["ops"], second["owner"]) == (
                2, "feed/direct", [{"delete": "feed.runs.r1"}], "feed")

    def test_watch_logd_and_a_controller_on_one_connection(self, world, docd):
        """Two watches on one connection, at two owners: each delta says whose it is; answers stay in order."""
        with world.client(docd) as client:
            assert client.call("watch", path="jobs")["owner"] == "logd"
            assert client.call("watch", path="feed")["owner"] == "feed"
            assert client.call("patch", ops=[{"set": "jobs.j1", "value": 1}])["commit"] == 1
            assert client.call("patch", ops=[{"set": "feed.x", "value": 1}])["commit"] == 1
            deltas = sorted((delta["owner"], delta["ops"][0]["set"]) for delta in
                            (client.next_delta(), client.next_delta()))
            assert deltas == [("feed", "feed.x"), ("logd", "jobs.j1")]

    def test_a_controller_without_watch_says_so(self, world, docd):
        """The kit controller offers no watch: the caller hears its unsupported."""
        with world.client(docd) as client, pytest.raises(Unsupported, match="^unsupported operation: request type$"):
            client.call("watch", path="verse.ctl.runs")

    def test_owner_gone_closes_the_watchers_connection(self, world, tmp_path):
        """When a watched owner goes away, docd closes its caller's connection, as the owner itself would."""
        from retain.logd import ServerThread, Store

        with Store.open(str(tmp_path / "gone.sqlite3")) as store:
            gone = ServerThread(store, socket_path=str(tmp_path / "gone.sock"))
            gone.__enter__()
            table = world.table(gone="unix:" + str(tmp_path / "gone.sock"))
            with ThreadedServer(DocdServer(table, listen=("127.0.0.1", 0))) as docd, world.client(docd) as client:
                client.call("watch", path="gone")
                gone.__exit__(None, None, None)
                with pytest.raises(ServerUnavailable):
                    client.next_delta()


class TestSessions:
    def test_author_reaches_every_owner(self, world, docd):
        """A session's author is the author of every commit docd makes for the connection, at every owner."""
        with world.client(docd) as client:
            assert client.call("session", author="verse/ops") == {"author": "verse/ops", "scope": None}
            client.call("patch", ops=[{"set": "jobs.j1", "value": 1}])
            client.call("patch", ops=[{"set": "ci.runs.r1", "value": 1}])
        for store in (world.logd_store, world.ci_store):
            assert [delta.author for delta in store.session().deltas(first=1)] == ["verse/ops"]

    def test_scope_reaches_the_owner(self, world, docd):
        """In a scope, writes through docd land in the owner's scope; its baseline keeps its records."""
        seed(world)
        with world.client(docd) as client:
            client.call("session", scope="trial-1")
            client.call("patch", ops=[{"delete": "ci.runs.r7"}])
            with pytest.raises(NotFound):
                client.call("get", path="ci.runs.r7")
            client.call("session")  # back to the baseline
            assert client.call("get", path="ci.runs.r7")["value"] == {"at": "2026-09-02T00:00:00Z"}
        assert [scope.name for scope in world.ci_store.scopes()] == ["trial-1"]

    def test_a_bad_session_is_refused(self, world, docd):
        """docd checks a session before handing it on."""
        with world.client(docd) as client, pytest.raises(InvalidRequest, match="scope name 'a b'"):
            client.call("session", scope="a b")


class TestPipelining:
    def test_answers_in_order_across_owners(self, world, docd):
        """Requests pipelined to several owners are answered in the order sent; a read behind a write sees it."""
        requests = []
        for index in range(20):
            owner = ("jobs", "verse.ctl.runs", "ci.runs")[index % 3]
            requests.append({"patch": {"ops": [{"set": f"{owner}.r{index}", "value": index}]}})
            requests.append({"get": {"path": f"{owner}.r{index}"}})
        with world.client(docd) as client:
            answers = client.pipeline(requests)
        for index in range(20):
            assert answers[2 * index + 1]["result"]["get"]["value"] == index
            assert answers[2 * index]["result"]["patch"]["commit"] == answers[2 * index + 1]["result"]["get"]["commit"]

    def test_hostile_documents_are_refused(self, world, docd):
        """A document docd cannot load is answered with an error; the connection goes on."""
        first, second = exchange(docd.address, b"{get: !nope x}\n...\n{get: {path: jobs}}\n...\n", 2)
        assert b"unknown tag !nope" in first and b"not_found" in second


class TestOwnersDown:
    def test_an_owner_down_is_unavailable_and_the_rest_go_on(self, world, tmp_path):
        """A mount whose controller is not there: its requests answer unavailable naming it; others are served."""
        table = world.table(verse_ctl="unix:" + world.ctl_socket, gone="unix:" + str(tmp_path / "nobody.sock"))
        with ThreadedServer(DocdServer(table, listen=("127.0.0.1", 0))) as docd, world.client(docd) as client:
            with pytest.raises(OwnerUnavailable, match=f"gone at unix:{tmp_path}/nobody.sock is unavailable"):
                client.call("get", path="gone.x")
            assert client.call("patch", ops=[{"set": "verse.ctl.a", "value": 1}])["owner"] == "verse.ctl"

    def test_an_owner_that_never_answers_times_out(self, world):
        """An owner that takes the connection but never answers is unavailable once the table's timeout passes."""
        with socket.socket() as silent:
            silent.bind(("127.0.0.1", 0))
            silent.listen()  # connections complete in the backlog; nothing is ever read or answered
            table = MountTable.of({"silent": "{}:{}".format(*silent.getsockname())}, logd=world.logd.address,
                                  timeout=0.5)
            with ThreadedServer(DocdServer(table, listen=("127.0.0.1", 0))) as docd, world.client(docd) as client:
                with pytest.raises(OwnerUnavailable, match="silent at 127.0.0.1:[0-9]+ is unavailable: no answer "
                                                           "within 0.5s"):
                    client.call("get", path="silent.x")
                assert client.call("patch", ops=[{"set": "jobs.j1", "value": 1}])["owner"] == "logd"

    def test_an_owner_back_is_reached_again(self, world, tmp_path):
        """docd reconnects to an owner that went away and came back."""
        from retain.logd import ServerThread, Store

        path = str(tmp_path / "back.sock")
        with Store.open(str(tmp_path / "back.sqlite3")) as store:
            table = world.table(back="unix:" + path)
            with ThreadedServer(DocdServer(table, listen=("127.0.0.1", 0))) as docd, world.client(docd) as client:
                with ServerThread(store, socket_path=path):
                    assert client.call("patch", ops=[{"set": "back.x", "value": 1}])["commit"] == 1
                with pytest.raises(OwnerUnavailable):
                    client.call("get", path="back.x")
                with ServerThread(store, socket_path=path):
                    assert client.call("get", path="back.x")["value"] == 1
