"""No client's big document stalls another: a second client's 1-record ``get`` is
answered while one client sends a 3 MiB JSON list or a 512 KiB YAML list, or gets a 200,000-element record;
requests count at their loaded size in the byte budgets; refusals quote a short prefix of what they refuse."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from retain.logd import Client, ServerThread
from retain.wire import ByteBudget, WireLimits, load
from retain.wire.framing import END, Framer
from tests.helpers.waiting import wait_for

PROBE_BOUND = 1.0  # seconds: loose, for a shared machine (it was 3.5-9 s with the loop parsing and dumping)

pytestmark = pytest.mark.parametrize("backend_name", ["sqlite"])  # the transport's behaviour, on any store


@pytest.fixture
def big(store) -> Iterator[ServerThread]:
    """``store`` served with the default limits (16 MiB documents), on TCP and HTTP."""
    store.session().patch([{"set": "small", "value": {"n": 1}}])
    with ServerThread(store, listen=("127.0.0.1", 0), http=("127.0.0.1", 0)) as running:
        yield running


def ask(address, data: bytes) -> dict:
    """Send one framed document on a fresh connection and read its answer, loaded."""
    framer, found = Framer(1 << 25), []
    with socket.create_connection(address, timeout=120) as raw:
        raw.sendall(data)
        while not found:
            chunk = raw.recv(65536)
            assert chunk, "the server closed the connection"
            found.extend(framer.feed(chunk))
    return load(found[0], WireLimits(max_bytes=1 << 25))[0]


def longest_probe(address, attack) -> tuple[float, object]:
    """The longest 1-record ``get`` of a second client while ``attack()`` runs in a thread; and its outcome."""
    outcome: list[object] = []
    attacker = threading.Thread(target=lambda: outcome.append(attack()), daemon=True)
    longest, probes = 0.0, 0
    with Client(address, timeout=120) as probe:
        probe.get("small")  # connected and warm
        attacker.start()
        while attacker.is_alive():
            start = time.perf_counter()
            assert probe.get("small").value == {"n": 1}
            longest, probes = max(longest, time.perf_counter() - start), probes + 1
    attacker.join()
    assert probes >= 3, f"only {probes} probes while the attack ran: it did not overlap them"
    return longest, outcome[0]


def json_patch(value) -> bytes:
    document = json.dumps({"patch": {"ops": [{"set": "big", "value": value}]}}, separators=(",", ":"))
    return document.encode() + b"\n" + END


#: 3 MiB of JSON: a list of 1.6 million zeros (4-6 s to load on this machine's loop, 9 s in the issue)
JSON_3_MIB = json_patch([0] * 1_600_000)


class TestBigDocuments:
    def test_a_3_mib_json_list_does_not_stall_another_client(self, big):
        """3 MiB of JSON integers sent on a stream: the other client's get is answered in well under a second
        (9 s when the loop loaded it)."""
        assert len(JSON_3_MIB) > 3 * 1024 * 1024
        longest, answer = longest_probe(big.address, lambda: ask(big.address, JSON_3_MIB))
        assert "result" in answer, answer
        assert longest < PROBE_BOUND, f"a probe waited {longest:.2f}s behind a 3 MiB JSON list"

    def test_a_512_kib_yaml_list_does_not_stall_another_client(self, big):
        """512 KiB of a YAML list of nested lists: loaded on the pool (3.5-4.4 s in the issue), not the loop."""
        data = ("patch: {ops: [{set: big, value: [" + ",".join(["[[[[[[0]]]]]]"] * 38_000) + "]}]}\n...\n").encode()
        assert len(data) > 512 * 1024
        longest, answer = longest_probe(big.address, lambda: ask(big.address, data))
        assert "result" in answer, answer
        assert longest < PROBE_BOUND, f"a probe waited {longest:.2f}s behind a 512 KiB YAML list"

    def test_a_big_answer_does_not_stall_another_client(self, big):
        """A 21-byte get of a 200,000-element record: its 1.6 MB YAML answer is dumped off the loop and
        written in chunks (the probe waited 6-8 s)."""
        big.server.store.session().patch([{"set": "big", "value": list(range(200_000))}])
        longest, answer = longest_probe(big.address, lambda: ask(big.address, b"get: {path: big}\n...\n"))
        assert answer["result"]["get"]["value"][-1] == 199_999  # type: ignore[index]
        assert longest < PROBE_BOUND, f"a probe waited {longest:.2f}s behind a 1.6 MB answer"

    def test_a_3_mib_json_body_over_http_does_not_stall_another_client(self, big):
        """The same over HTTP: the body is loaded on the pool."""
        data = JSON_3_MIB[:-len(END)]

        def attack() -> int:
            return httpx.post(f"http://{big.server.http_address[0]}:{big.server.http_address[1]}/", content=data,
                              headers={"content-type": "application/json"}, timeout=120).status_code

        longest, status = longest_probe(big.address, attack)
        assert status == 200
        assert longest < PROBE_BOUND, f"a probe waited {longest:.2f}s behind a 3 MiB HTTP body"


class TestLoadedSizeCounts:
    def test_a_request_that_loads_past_the_connection_budget_is_refused_naming_it(self, store):
        """A 200 KiB JSON list loads to far more than 1 MiB of objects: refused unavailable, naming max_held."""
        with ServerThread(store, listen=("127.0.0.1", 0), limits=WireLimits(max_held=1024 * 1024)) as running:
            data = json_patch([{}] * 60_000)
            assert len(data) < 1024 * 1024
            answer = ask(running.address, data)
            assert answer["error"]["code"] == "unavailable"
            assert "max_held" in answer["error"]["message"], answer
            assert "result" in ask(running.address, json_patch([{}] * 10))  # the budget was given back

    def test_a_request_that_loads_past_the_process_budget_is_refused_naming_it(self, store):
        """The process's budget counts loaded size too: a body well under it that loads past it is refused."""
        budget = ByteBudget(2 * 1024 * 1024)
        with ServerThread(store, listen=("127.0.0.1", 0), budget=budget) as running:
            answer = ask(running.address, json_patch([{}] * 60_000))
            assert answer["error"]["code"] == "unavailable"
            assert "max_buffered_bytes" in answer["error"]["message"], answer
        assert budget.used == 0


class TestShortRefusals:
    def test_a_refused_at_quotes_a_short_prefix(self, big):
        """An ``at`` of 4 MiB is refused with a one-line message, not echoed back (4 MiB in, 4 MiB out)."""
        data = json.dumps({"get": {"path": "small", "at": "x" * (4 * 1024 * 1024)}}).encode() + b"\n...\n"
        answer = ask(big.address, data)
        message = answer["error"]["message"]
        assert answer["error"]["code"] == "invalid_request" and len(message) < 300, message[:300]
        assert "xxxx…" in message


class TestChunkedAnswers:
    def test_deltas_pushed_during_a_big_answer_wait_for_its_end(self, big):
        """A watching connection that does not read gets 8 MB answers in chunks while commits push deltas to
        it: every delta comes whole, between answers, never inside one."""
        big.server.store.session().patch([{"set": "big", "value": "x" * 8_000_000}])
        done = threading.Event()

        def commit() -> None:
            with Client(big.address) as writer:
                n = 0
                while not done.is_set():
                    writer.patch([{"set": "w", "value": {"n": n}}])
                    n += 1

        committer = threading.Thread(target=commit, daemon=True)
        framer, loaded = Framer(1 << 25), []
        with socket.create_connection(big.address, timeout=120) as raw:
            raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)  # the answers back up: chunks wait for room
            raw.sendall(b"watch: {path: w}\n...\n")
            committer.start()
            try:
                raw.sendall(b'{"get":{"path":"big"}}\n...\n' * 3)
                head = big.server.store.head
                wait_for(lambda: big.server.store.head >= head + 100, "commits while the answers wait unread")
                while sum("result" in document for document in loaded) < 4:
                    chunk = raw.recv(65536)
                    assert chunk, "the server closed the connection"
                    loaded += [load(document, WireLimits(max_bytes=1 << 25))[0] for document in framer.feed(chunk)]
            finally:
                done.set()
                committer.join()
        answers = [document["result"] for document in loaded if "result" in document]
        assert [len(answer["get"]["value"]) for answer in answers[1:]] == [8_000_000] * 3
        assert any("delta" in document for document in loaded[1:])

    def test_an_answer_past_the_connection_budget_is_refused_naming_it(self, store):
        """An 8 MB answer is counted while it goes out: past a 4 MiB max_held it is answered unavailable."""
        store.session().patch([{"set": "big", "value": "x" * 8_000_000}, {"set": "small", "value": 1}])
        budget = ByteBudget()
        with ServerThread(store, listen=("127.0.0.1", 0), limits=WireLimits(max_held=4 * 1024 * 1024),
                          budget=budget) as running:
            answer = ask(running.address, b'{"get":{"path":"big"}}\n...\n')
            assert answer["error"]["code"] == "unavailable" and "max_held" in answer["error"]["message"], answer
            assert ask(running.address, b"get: {path: small}\n...\n")["result"]["get"]["value"] == 1
        assert budget.used == 0
