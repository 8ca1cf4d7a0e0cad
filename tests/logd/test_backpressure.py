"""Backpressure and timeouts: a connection that never reads stops being read
and stops feeding the writer, buffered bytes are capped process-wide, slow and idle connections are closed."""

from __future__ import annotations

import asyncio
import re
import socket
import subprocess
import sys
import threading

import httpx
import pytest

from retain.errors import ServerUnavailable, StorageError
from retain.logd import Client, ServerThread
from retain.logd.server import INLINE_READ_RECORDS
from retain.servers import free_port
from retain.wire import HttpTimeouts, StreamTimeouts, WireLimits, load
from retain.wire.framing import Framer
from retain.wire.sockets import StreamSockets
from tests.helpers.waiting import accepts, wait_for

BIG = "x" * 100_000  # a value whose answer fills socket buffers quickly


class TestFlood:
    def test_a_connection_that_never_reads_does_not_hold_the_writer(self, served):
        """1,000 pipelined (patch, get-100-KB) pairs on a connection that never reads: the server stops reading
        it once its answers back up, so another client's get is answered at once and the flood's patches stop
        being applied (without the bound all 1,000 ran first, and their answers piled up in memory)."""
        served.server.store.session().patch([{"set": "big", "value": BIG}])
        flood = socket.create_connection(served.address, timeout=60)
        flood.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        pair = b'{"patch":{"ops":[{"set":"n","value":1}]}}\n...\n{"get":{"path":"big"}}\n...\n'
        sender = threading.Thread(target=lambda: _send_quietly(flood, pair * 1000), daemon=True)
        sender.start()
        try:
            wait_for(lambda: served.server.store.head > 5, "the flood to start being applied")
            with Client(served.address, timeout=60) as other:
                assert other.get("big").value == BIG
            applied = served.server.store.head - 1
            assert applied < 400, f"{applied} of the flood's 1,000 patches ran before another client's get"
        finally:
            flood.close()
            sender.join(timeout=60)
        with Client(served.address) as after:
            assert after.get("n").value == 1


def _send_quietly(sock: socket.socket, data: bytes) -> None:
    try:
        sock.sendall(data)
    except OSError:
        pass  # closed by the test once it has seen what it needed


class TestBufferCap:
    def test_rss_stays_under_the_cap_while_30_connections_send_15_mib_each(self, tmp_path):
        """30 connections each sending 15 MiB without an end line added ~450 MB to logd; with the process-wide
        cap (--max-buffered-bytes 32 MiB) the peak RSS stays under 250 MiB, and the documents dropped for want
        of room are answered unavailable."""
        port = free_port()
        server = subprocess.Popen([sys.executable, "-c", "from retain.cli import main; main()", "logd", "serve",
                                   "--db", str(tmp_path / "l.db"), "--listen", f"127.0.0.1:{port}", "--max-buffered-bytes", str(32 * 2**20)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            wait_for(lambda: accepts(port), "logd to listen", child=server)
            answers: list[dict] = []
            lock = threading.Lock()

            def send() -> None:
                with socket.create_connection(("127.0.0.1", port), timeout=120) as sock:
                    chunk = b"#" * 2**20
                    for _ in range(15):
                        sock.sendall(chunk)
                    sock.sendall(b"\n...\n")
                    answer = _read_answer(sock)
                    with lock:
                        answers.append(answer)

            threads = [threading.Thread(target=send) for _ in range(30)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(timeout=300)
            assert len(answers) == 30
            peak = _peak_rss_mib(server.pid)
            assert peak < 250, f"peak RSS {peak:.0f} MiB"
            codes = sorted(answer["error"]["code"] for answer in answers)
            assert "unavailable" in codes, codes
        finally:
            server.terminate()
            server.wait(timeout=60)


def _read_answer(sock: socket.socket) -> dict:
    framer = Framer(1 << 20)
    while True:
        data = sock.recv(65536)
        assert data, "logd closed the connection without answering"
        found = framer.feed(data)
        if found:
            return load(found[0])[0]


def _peak_rss_mib(pid: int) -> float:
    status = open(f"/proc/{pid}/status").read()
    return int(re.search(r"VmHWM:\s+(\d+) kB", status).group(1)) / 1024


class TestTimeouts:
    @pytest.fixture
    def quick(self, store, tmp_path):
        """logd with one-second timeouts on both transports."""
        with ServerThread(store, listen=("127.0.0.1", 0), http=("127.0.0.1", 0),
                          http_timeouts=HttpTimeouts(idle=1, headers=1, body=1),
                          stream_timeouts=StreamTimeouts(idle=1, document=1)) as running:
            yield running

    def test_slowloris_headers_are_closed(self, quick):
        """Headers that never finish: uvicorn kept 1,000 such connections open; now each is closed."""
        with socket.create_connection(quick.server.http_address, timeout=60) as sock:
            sock.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            assert sock.recv(65536) == b""

    def test_a_slow_body_is_answered_408_and_closed(self, quick):
        """A body that stops arriving is answered 408 and the connection closed."""
        with socket.create_connection(quick.server.http_address, timeout=60) as sock:
            sock.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n"
                         b"\r\n{\"get\":")
            received = b""
            while chunk := sock.recv(65536):
                received += chunk
            assert received.startswith(b"HTTP/1.1 408")

    def test_an_unfinished_stream_document_is_refused_and_closed(self, quick):
        """A document that never ends on a stream is refused naming the timeout, then the connection closes."""
        with socket.create_connection(quick.address, timeout=60) as sock:
            sock.sendall(b'{"get": {"path": ')
            received = b""
            while chunk := sock.recv(65536):
                received += chunk
            assert b"within 1s" in received

    def test_an_idle_stream_connection_is_closed(self, quick):
        """A connection that sends nothing and owes nothing is closed after the idle timeout."""
        with socket.create_connection(quick.address, timeout=60) as sock:
            assert sock.recv(65536) == b""

    def test_a_watch_is_not_idle(self, quick):
        """A watching connection is quiet but kept: a commit made after the idle timeout still reaches it."""
        with Client(quick.address) as watcher, Client(quick.address) as writer:
            watcher.watch("jobs")
            # The writer's own connection idles past the timeout between requests: reconnect to write.
            with pytest.raises(ServerUnavailable, match="closed the connection"):
                _wait_closed(writer)
            with Client(quick.address) as late:
                late.patch([{"set": "jobs.j1", "value": 1}])
            assert watcher.next_delta()["ops"] == [{"set": "jobs.j1", "value": 1}]


class TestHeaderBound:
    @staticmethod
    def _post_with_header(address, size: int) -> bytes:
        """POST a get whose request carries one header of ``size`` bytes, sent whole; the server's reply."""
        body = b'{"get": {}}'
        request = (b"POST / HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Pad: " + b"p" * size
                   + b"\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        with socket.create_connection(address, timeout=30) as sock:
            sock.sendall(request)
            received = b""
            while chunk := sock.recv(65536):
                received += chunk
        return received

    def test_headers_past_64_kib_are_refused(self, served):
        """A request whose headers pass the documented 64 KiB is refused (400), even sent in one piece: 100 KiB
        was answered 200 (h11 bounds only a head still incomplete); 60 KiB is still answered."""
        assert self._post_with_header(served.server.http_address, 60 * 1024).startswith(b"HTTP/1.1 200")
        assert self._post_with_header(served.server.http_address, 100 * 1024).startswith(b"HTTP/1.1 400")


def _wait_closed(client: Client) -> None:
    """Block until the server closes ``client``'s idle connection (raises then)."""
    client.sock.settimeout(60)
    client.receive()


class TestNoDelay:
    def test_http_connections_turn_nagle_off(self, served):
        """The HTTP socket was made with proto 0, so asyncio left Nagle on: every keep-alive request paid ~44 ms
        (the response's second write waiting for the client's delayed ACK). Each accepted connection now has
        TCP_NODELAY."""
        with httpx.Client() as client:
            assert client.post(served.http_url, json={"get": {}}).status_code in (200, 404)
            connections = served.server._http._server.server_state.connections
            assert connections
            for connection in connections:
                sock = connection.transport.get_extra_info("socket")
                assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)

    def test_stream_connections_turn_nagle_off(self, store):
        """Every accepted stream connection has TCP_NODELAY."""
        seen = []

        async def handler(reader, writer):
            seen.append(writer.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        async def run():
            sockets = StreamSockets(handler)
            await sockets.bind(("127.0.0.1", 0), None)
            reader, writer = await asyncio.open_connection(*sockets.address)
            await reader.read()
            writer.close()
            await sockets.close()

        asyncio.run(run())
        assert seen and all(seen)


class TestReadsBesideTheWriter:
    def test_gets_are_answered_while_the_writer_is_busy(self, served):
        """With the writer held by a long job, a get and a list (HTTP and stream) are still answered: they read
        a WAL snapshot on a reader thread instead of queueing behind the writer; a patch waits its turn."""
        served.server.store.session().patch([{"set": "jobs.j1", "value": {"status": "done"}}])
        release = threading.Event()
        busy = served.server.writer.submit(release.wait, 120)
        try:
            answer = httpx.post(served.http_url, json={"get": {"path": "jobs.j1"}}, timeout=60)
            assert answer.json() == {"result": {"get": {"commit": 1, "value": {"status": "done"}}}}
            with Client(served.address, timeout=60) as client:
                assert client.list("jobs.*").items == {"j1": {"status": "done"}}
                client.send({"patch": {"ops": [{"set": "jobs.j2", "value": 1}]}})
                client.send({"get": {"path": "jobs.j2"}})  # behind the patch: waits for it, then sees it
                release.set()
                assert client.receive() == {"result": {"patch": {"commit": 2}}}
                assert client.receive() == {"result": {"get": {"commit": 2, "value": 1}}}
        finally:
            release.set()
            busy.result(timeout=60)


class TestSmallReadsOnTheLoop:
    """On SQLite a read of at most INLINE_READ_RECORDS records is answered on the event loop; a larger one
    goes to a reader thread with the whole read budget; on PostgreSQL every read goes to a reader thread."""

    @staticmethod
    def _hold_the_readers(served) -> tuple[threading.Event, list]:
        release = threading.Event()
        held = [served.server.readers.submit(release.wait, 120) for _ in range(8)]  # every reader, and a queue
        return release, held

    def test_small_reads_answer_while_every_reader_is_busy(self, served, backend_name):
        """Every reader thread held: a one-record get and list are answered on SQLite (over HTTP and the
        stream); a read of more records than the loop takes waits for a reader, then gets its whole value --
        not a budget error from the loop's smaller budget."""
        session = served.server.store.session()
        session.patch([{"set": "jobs", "value": {f"j{n:03d}": {"n": n} for n in range(INLINE_READ_RECORDS + 44)}}])
        release, held = self._hold_the_readers(served)
        try:
            with Client(served.address, timeout=60) as client:
                if backend_name == "sqlite":
                    answer = httpx.post(served.http_url, json={"get": {"path": "jobs.j007"}}, timeout=60)
                    assert answer.json() == {"result": {"get": {"commit": 1, "value": {"n": 7}}}}
                    assert client.get("jobs.j008.n").value == 8
                client.send({"list": {"path": "jobs.*"}})  # too large for the loop: it waits for a reader
                release.set()
                assert len(client.receive()["result"]["list"]["items"]) == INLINE_READ_RECORDS + 44
            answer = httpx.post(served.http_url, json={"get": {"path": "jobs"}}, timeout=60)
            assert len(answer.json()["result"]["get"]["value"]) == INLINE_READ_RECORDS + 44
        finally:
            release.set()
            for future in held:
                future.result(timeout=60)

    def test_the_read_budget_still_bounds_every_read(self, open_store, tmp_path):
        """A read past the store's own budget is refused whichever way it is answered; a budget below the
        loop's bounds the loop's reads too."""
        store = open_store(read_budget=20)
        store.session().patch([{"set": "jobs", "value": {f"j{n}": {"n": n} for n in range(30)}}])
        with ServerThread(store, listen=("127.0.0.1", 0)) as running, Client(running.address) as client:
            with pytest.raises(StorageError, match=r"touches more than 20 records \(storage.readBudget = 20\)"):
                client.list("jobs.*")
            assert client.get("jobs.j3.n").value == 3


class TestUnreadDeltas:
    def test_a_watcher_that_never_reads_is_closed_not_buffered(self, store):
        """A watch's deltas are pushed without waiting for the watcher; one that never reads used to make the
        server buffer every delta for ever. Past max_unsent bytes left unread its connection is closed (its
        watch dropped); other clients go on."""
        with ServerThread(store, listen=("127.0.0.1", 0), limits=WireLimits(max_unsent=256 * 1024)) as running:
            watcher = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            watcher.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)  # before connecting: a small window
            watcher.settimeout(60)
            watcher.connect(running.address)
            watcher.sendall(b'{"watch":{"path":"jobs"}}\n...\n')
            hub = running.server._hub
            wait_for(lambda: bool(hub.subscriptions), "the watch to be subscribed")
            try:
                with Client(running.address) as writer:
                    for index in range(300):
                        writer.patch([{"set": f"jobs.j{index}", "value": {"v": "v" * 100_000}}])
                        if not hub.subscriptions:
                            break
                    wait_for(lambda: not hub.subscriptions, "the unread watcher to be dropped", timeout=60)
                    assert writer.get("jobs.j0.v").value == "v" * 100_000
            finally:
                watcher.close()
