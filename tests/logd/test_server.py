"""logd over real sockets: pipelining, many clients at once, watch, HTTP, and hostile documents."""

from __future__ import annotations

import asyncio
import json
import socket
import threading

import httpx
import pytest

from retain.errors import NotFound, PreconditionFailed, ServerUnavailable
from retain.logd.client import AsyncClient, Client, parse_address
from retain.logd.server import ServerThread
from retain.logd.settings import Settings
from retain.logd.store import Written
from retain.wire import LogdKey, WireLimits, load
from retain.wire.framing import Framer
from tests.helpers.logd import LIMITS


class RawConnection:
    """Bytes in, documents out: for what a polite client would never send."""

    def __init__(self, address):
        self.sock = socket.create_connection(address, timeout=60)
        self.framer = Framer(64 * 1024 * 1024)
        self.documents = []

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def receive(self):
        while not self.documents:
            data = self.sock.recv(65536)
            assert data, "logd closed the connection"
            self.documents.extend(self.framer.feed(data))
        return load(self.documents.pop(0), WireLimits(max_depth=1000))[0]

    def close(self):
        self.sock.close()


class TestPipelining:
    def test_read_behind_a_write_sees_it(self, served):
        """A write and a read sent back to back in one packet: the read's answer shows the write."""
        raw = RawConnection(served.address)
        for index in range(50):
            raw.send(b"{patch: {ops: [{set: counter, value: %d}]}}\n...\n{get: {path: counter}}\n...\n" % index)
            assert raw.receive()["result"]["patch"]["commit"] == index + 1
            assert raw.receive()["result"]["get"] == {"commit": index + 1, "value": index}
        raw.close()

    def test_answers_come_in_request_order(self, served):
        """Many requests pipelined before any answer is read are answered in order, errors in their place."""
        with Client(served.address) as logd:
            requests = []
            for index in range(200):
                requests.append({"patch": {"ops": [{"set": f"jobs.j{index}", "value": index}]}})
                requests.append({"get": {"path": f"jobs.j{index}"}} if index % 7 else {"get": {"path": "nope"}})
            answers = logd.pipeline(requests)
        for index in range(200):
            assert answers[2 * index] == {"result": {"patch": {"commit": index + 1}}}
            read = answers[2 * index + 1]
            if index % 7:
                assert read == {"result": {"get": {"commit": index + 1, "value": index}}}
            else:
                assert read["error"]["code"] == "not_found"

    def test_async_client_twin(self, served):
        """AsyncClient pipelines and answers the same way, over the Unix socket."""
        async def run():
            async with await AsyncClient.connect(served.socket_path, author="async") as logd:
                answers = await logd.pipeline([{"patch": {"ops": [{"set": "a", "value": 1}]}},
                                               {"get": {"path": "a"}}])
                assert answers[1]["result"]["get"]["value"] == 1
                assert (await logd.get("a")).value == 1
                with pytest.raises(NotFound):
                    await logd.get("b")
                await logd.watch("a", first=1)
                return await logd.next_delta()
        assert asyncio.run(run())["author"] == "async"


class TestManyClients:
    def test_commits_gapless_and_state_is_the_replay(self, served, store, open_store):
        """Eight clients racing on one counter and their own jobs: every commit numbered without gaps, every
        precondition race resolved by exactly one winner, and the state equals the commit log replayed."""
        clients, rounds = 8, 25
        errors: list[BaseException] = []
        wins = [0] * clients

        def work(number: int) -> None:
            try:
                with Client(served.address, author=f"client-{number}") as logd:
                    for index in range(rounds):
                        logd.patch([{"set": f"jobs.c{number}.j{index}", "value": {"n": index}}])
                        try:
                            # Another client may not have made the counter yet: NotFound, like a lost race.
                            current = logd.get("counter").value if index or number else None
                            if current is None:
                                logd.patch([{"set": "counter", "value": 0}])
                            else:
                                logd.patch([{"set": "counter", "value": current + 1}],
                                           precondition={"counter": current})
                                wins[number] += 1
                        except (PreconditionFailed, NotFound):
                            pass
                        if index % 5 == 4:
                            logd.patch([{"delete": f"jobs.c{number}.j{index - 1}"}])
            except BaseException as exc:  # surfaced below
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(n,)) for n in range(clients)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        assert not errors, errors
        log = list(store.backend.commits(1, (0,)))
        assert [record.number for record in log] == list(range(1, len(log) + 1))
        with Client(served.address) as logd:
            final = logd.get().value
        assert final["counter"] == sum(wins)  # no lost update: each win moved it by exactly one
        replay = open_store("replay.sqlite3").session()
        for record in log:
            replay.patch(list(record.ops))
        assert replay.get().value == final


class TestWatch:
    def test_deltas_in_order_with_author(self, served):
        """A watch sends the backlog from a commit, then live deltas touching the prefix, with their authors."""
        with Client(served.address, author="alice") as alice, Client(served.address, author="bob") as bob:
            alice.patch([{"set": "jobs.j1", "value": {"status": "new"}}])
            alice.patch([{"set": "other", "value": 1}])
            watcher = Client(served.address)
            assert watcher.watch("jobs", first=1) == {"path": "jobs", "from": 1, "commit": 2}
            bob.patch([{"set": "jobs.j1.status", "value": "done"}])
            bob.patch([{"set": "other", "value": 2}])
            bob.patch([{"delete": "jobs.j1"}], author="verse/retention")
            deltas = [watcher.next_delta() for _ in range(3)]
            assert [(d["commit"], d["author"]) for d in deltas] == [(1, "alice"), (3, "bob"), (5, "verse/retention")]
            assert deltas[2]["ops"] == [{"delete": "jobs.j1"}]
            assert watcher.get("jobs").value == {}  # requests still answered between deltas
            watcher.close()

    def test_scoped_watch_sees_its_scope_only(self, served):
        """A watcher in a scope sees the baseline and its scope; a baseline watcher never sees scoped writes."""
        with Client(served.address, author="a", scope="trial-1") as scoped, \
                Client(served.address, author="b") as base, Client(served.address, scope="trial-2") as other:
            scoped.watch("jobs")
            base.watch("jobs")
            other.patch([{"set": "jobs.x", "value": 1}])
            scoped.patch([{"set": "jobs.y", "value": 2}])
            base.patch([{"set": "jobs.z", "value": 3}])
            assert [scoped.next_delta()["commit"] for _ in range(2)] == [2, 3]
            assert base.next_delta()["commit"] == 3
            assert base.get("jobs").value == {"z": 3} and not base.deltas

    def test_watch_from_before_history_is_told_to_reread(self, served, store, clock):
        """A watch from a compacted commit answers `compacted`."""
        from datetime import timedelta
        with Client(served.address) as logd:
            for index in range(3):
                logd.patch([{"set": "a", "value": index}])
            clock.advance(timedelta(days=2))
            logd.patch([{"set": "a", "value": 9}])
            assert logd.call("compact")["boundary"] == 4
            answer = logd.request({"watch": {"path": "a", "from": 1}})
            assert answer["error"]["code"] == "compacted"


class TestVerbs:
    def test_sessions_scopes_schema(self, served):
        """session switches author and scope; scopes lists; drop drops; schema sets and reads back."""
        with Client(served.address) as logd:
            assert logd.call("session", author="ops", scope="trial-1") == {"author": "ops", "scope": "trial-1"}
            logd.patch([{"set": "x", "value": 1}])
            assert logd.call("scopes") == {"scopes": [{"name": "trial-1", "created": 0}]}
            logd.call("session", scope=None)
            with pytest.raises(NotFound):
                logd.get("x")
            assert logd.call("drop", scope="trial-1") == {"scope": "trial-1"}
            assert logd.call("scopes") == {"scopes": []}
            logd.call("schema", set={"events": {"!logd-key": "id"}})
            assert logd.call("schema")["schema"] == {"events": {"array": LogdKey("id")}}

    @pytest.mark.parametrize(("request_", "code", "message"), [
        ({"get": {"path": "a", "when": 1}}, "invalid_request", "get: unknown field 'when': expected one of path, at"),
        ({"list": {}}, "invalid_request", "path is required"),
        ({"patch": {}}, "invalid_request", "patch needs ops"),
        ({"patch": {"ops": [{"set": "a", "value": {"!or": [1]}}]}}, "invalid_request", "tags such as !or"),
        ({"drop": {}}, "invalid_request", "drop needs the scope"),
        ({"drop": {"scope": "nope"}}, "not_found", "no scope named 'nope'"),
        ({"compact": {"now": "yesterday"}}, "invalid_request", "now must be an RFC 3339 time"),
        ({"get": {"at": 5}}, "invalid_request", "at must be a commit number"),
        ({"retain": {}}, "invalid_retain", "retain: what is a non-empty list of rules"),
        ({"frobnicate": {}}, "unsupported", "unsupported operation: request type 'frobnicate'"),
        ({"get": [1]}, "invalid_request", "the body of 'get' is a map"),
        ({"get": {}, "list": {}}, "invalid_request", "exactly one verb"),
    ])
    def test_refusals(self, served, request_, code, message):
        """Bad requests are answered with their code and a message naming what was wrong."""
        with Client(served.address) as logd:
            answer = logd.request(request_)
        assert answer["error"]["code"] == code and message in answer["error"]["message"]


HOSTILE = [
    ("alias bomb", b"a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
                   b"c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n",
     "anchors are refused"),
    ("bare alias", b"{get: *x}", "aliases are refused"),
    ("deep yaml", b"[" * 10_000 + b"]" * 10_000, "nests deeper than 64"),
    ("deep json", b'{"get": ' + b"[" * 10_000 + b"]" * 10_000 + b"}", "nests deeper than 64"),
    ("deep block yaml", b"".join(b" " * i + b"k:\n" for i in range(1_000)), "nests deeper than 64"),
    ("python tag", b"{get: !!python/object/apply:os.system [echo pwned]}", "unknown tag !!python/object/apply"),
    ("unknown tag", b"{get: !frobnicate {path: a}}", "unknown tag !frobnicate"),
    ("binary tag", b"{get: !!binary aGVsbG8=}", "unknown tag !!binary"),
    ("non-map", b"[get, list]", "a request is a map"),
    ("scalar", b"hello", "a request is a map"),
    ("empty", b"   \n", "empty document"),
    ("not utf-8", b"{get: \xff\xfe}", "not UTF-8"),
    ("syntax", b"{get: [1, 2}", "not a YAML or JSON document"),
    ("two documents", b"a: 1\n---\nb: 2\n", "one document per request"),
    ("NaN", b'{"patch": {"ops": [{"set": "a", "value": NaN}]}}', "NaN is not JSON"),
]


class TestHostileDocuments:
    @pytest.mark.parametrize(("name", "document", "message"), HOSTILE, ids=[case[0] for case in HOSTILE])
    def test_answered_and_still_serving(self, served, name, document, message):
        """Each hostile document gets an invalid_request naming the fault; the connection and server go on."""
        raw = RawConnection(served.address)
        raw.send(document + b"\n...\n{patch: {ops: [{set: alive, value: true}]}}\n...\n")
        answer = raw.receive()
        assert answer["error"]["code"] == "invalid_request" and message in answer["error"]["message"], answer
        assert raw.receive()["result"]["patch"]["commit"] >= 1
        raw.close()
        with Client(served.address) as logd:
            assert logd.get("alive").value is True

    def test_a_100_mb_document(self, served):
        """A 100 MB document is dropped as it streams in (memory stays bounded) and answered with an error."""
        raw = RawConnection(served.address)
        chunk = b"- " + b"x" * (1024 * 1024 - 3) + b"\n"
        raw.send(b"{patch: {ops: [{set: before, value: 1}]}}\n...\n")
        for _ in range(100):
            raw.send(chunk)
        raw.send(b"...\n{get: {path: before}}\n...\n")
        assert raw.receive()["result"]["patch"]["commit"] == 1
        answer = raw.receive()
        assert answer["error"]["code"] == "invalid_request"
        assert f"at most {LIMITS.max_bytes}" in answer["error"]["message"]
        assert raw.receive()["result"]["get"]["value"] == 1
        raw.close()

    def test_over_http(self, served):
        """The same documents over HTTP POST are answered with an error status; the server keeps serving."""
        with httpx.Client(timeout=60) as http:
            for _, document, message in HOSTILE:
                answer = http.post(served.http_url, content=document)
                assert answer.status_code == 400 and message in answer.text
            big = http.post(served.http_url, content=b"x" * (LIMITS.max_bytes + 10))
            assert big.status_code == 413 and f"at most {LIMITS.max_bytes}" in big.text
            ok = http.post(served.http_url, json={"patch": {"ops": [{"set": "a", "value": 1}]}},
                           headers={"logd-author": "curl/user"})
            assert ok.status_code == 200 and ok.json() == {"result": {"patch": {"commit": 1}}}


class TestHttp:
    def test_yaml_and_json_in_kind(self, served, store):
        """A YAML body is answered in YAML, a JSON body in JSON; headers set author and scope."""
        with httpx.Client(timeout=30) as http:
            done = http.post(served.http_url, content=b"{patch: {ops: [{set: jobs.j1, value: {status: done}}]}}",
                             headers={"logd-author": "curl/ada", "content-type": "application/yaml"})
            assert done.status_code == 200 and done.headers["content-type"] == "application/yaml"
            assert load(done.content)[0] == {"result": {"patch": {"commit": 1}}}
            read = http.post(served.http_url, json={"get": {"path": "jobs.j1"}})
            assert read.json() == {"result": {"get": {"commit": 1, "value": {"status": "done"}}}}
            scoped = http.post(served.http_url, json={"patch": {"ops": [{"delete": "jobs.j1"}]}},
                               headers={"logd-scope": "trial-1"})
            assert scoped.status_code == 200
            missing = http.post(served.http_url, json={"get": {"path": "jobs.j1"}}, headers={"logd-scope": "trial-1"})
            assert missing.status_code == 404
            watch = http.post(served.http_url, json={"watch": {}})
            assert watch.status_code == 501 and "stream transport" in watch.json()["error"]["message"]
            not_json = http.post(served.http_url, content=b"{get: {}}", headers={"content-type": "application/json"})
            assert not_json.status_code == 400
        assert [c.author for c in store.backend.commits(1, (0, 1))] == ["curl/ada", "anonymous"]


class TestClient:
    def test_unreachable(self, tmp_path):
        """A client that cannot connect says where it tried."""
        with pytest.raises(ServerUnavailable, match="cannot reach logd"):
            Client(str(tmp_path / "none.sock"))

    @pytest.mark.parametrize(("text", "address"), [
        ("127.0.0.1:7420", ("127.0.0.1", 7420)), (":7420", ("127.0.0.1", 7420)),
        ("unix:/run/logd.sock", "/run/logd.sock"), ("./logd.sock", "./logd.sock"),
    ])
    def test_parse_address(self, text, address):
        """HOST:PORT or a socket path."""
        assert parse_address(text) == address

    def test_patch_returns_what_a_session_returns(self, served, store):
        """Client.patch and AsyncClient.patch return a Written, as Session.patch does."""
        async def twin():
            async with await AsyncClient.connect(served.address) as logd:
                return await logd.patch([{"set": "b", "value": 2}])

        with Client(served.address) as logd:
            assert logd.patch([{"set": "a", "value": 1}]) == Written(1)
        assert asyncio.run(twin()) == Written(2)
        assert store.session().patch([{"set": "c", "value": 3}]) == Written(3)

    def test_yaml_wire(self, served):
        """The client can speak YAML too; answers decode the same."""
        with Client(served.address, fmt="yaml") as logd:
            logd.patch([{"set": "t", "value": "2026-09-11T07:00:00Z"}])
            assert logd.get("t").value == "2026-09-11T07:00:00Z"


def test_settings_reach_the_server(open_store):
    """The read budget applies to reads over the wire as storage_error."""
    store = open_store("budget.sqlite3", read_budget=3)
    with ServerThread(store, listen=("127.0.0.1", 0)) as running, Client(running.address) as logd:
        logd.patch([{"set": f"j.x{i}", "value": {"a": i}} for i in range(5)])
        answer = logd.request({"list": {"path": "j.*"}})
        assert answer["error"]["code"] == "storage_error" and "storage.readBudget = 3" in answer["error"]["message"]
    assert json.dumps(Settings().read_budget)
