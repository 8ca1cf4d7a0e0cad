"""The one connection loop, with conversations of its own: order, failures answered, follow-ups, pipelining."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import threading
from typing import Any

import pytest

from retain.errors import NotFound
from retain.wire import Format, ThreadedServer, WireLimits, load
from retain.wire.connection import Link, Reply
from retain.wire.serving import StreamServer
from tests.helpers.wire import exchange

LIMITS = WireLimits(max_bytes=1024)


class Echo:
    """Answers ``{echo: {...}}`` with its body, one request after another; other verbs fail in chosen ways."""

    def __init__(self, link: Link) -> None:
        self.link = link

    async def answer(self, request: Any, fmt: Format) -> Reply:
        (verb, body), = request.items()
        if verb == "missing":
            raise NotFound("nothing at missing")
        if verb == "bug":
            raise RuntimeError("boom")
        if verb == "then":
            return Reply({"result": {"then": body}}, then=lambda: self.link.send({"pushed": body}, fmt))
        return Reply({"result": {verb: body}})

    async def aclose(self) -> None:
        return None


class OutOfOrder:
    """Starts every request at once and answers none until the third arrives, then the last first.

    A loop that waited for one answer before reading the next request would never see the third.
    """

    def __init__(self, link: Link) -> None:
        self.waiting: list[tuple[int, asyncio.Future[Reply]]] = []

    def answer(self, request: Any, fmt: Format) -> asyncio.Future[Reply]:
        future: asyncio.Future[Reply] = asyncio.get_running_loop().create_future()
        self.waiting.append((request["n"], future))
        if len(self.waiting) == 3:
            for number, waiting in reversed(self.waiting):
                waiting.set_result(Reply({"result": {"n": number, "started": len(self.waiting)}}))
        return future

    async def aclose(self) -> None:
        return None


def documents(address, data: bytes, count: int) -> list[Any]:
    return [load(document)[0] for document in exchange(address, data, count)]


@pytest.fixture
def echo():
    with ThreadedServer(StreamServer(Echo, listen=("127.0.0.1", 0), limits=LIMITS)) as running:
        yield running


class TestServeConnection:
    def test_answers_in_request_order_in_each_requests_format(self, echo):
        """YAML answered in YAML, JSON in JSON, in the order sent."""
        raw = exchange(echo.address, b'{echo: {a: 1}}\n...\n{"echo": {"b": 2}}\n...\n', 2)
        assert load(raw[0]) == ({"result": {"echo": {"a": 1}}}, "yaml")
        assert json.loads(raw[1]) == {"result": {"echo": {"b": 2}}}

    def test_every_failure_is_an_answer_and_the_connection_goes_on(self, echo):
        """Too large, not YAML or JSON, a LogdError, a bug: each answered in its place; the next request is served."""
        too_large = b"x: " + b"y" * 2000 + b"\n...\n"
        sent = too_large + b"{a: [\n...\nmissing: {}\n...\nbug: {}\n...\necho: {ok: 1}\n...\n"
        answers = documents(echo.address, sent, 5)
        errors = [answer.get("error", {}) for answer in answers]
        assert errors[0]["code"] == "invalid_request" and "at most 1024" in errors[0]["message"]
        assert errors[1]["code"] == "invalid_request" and "not a YAML or JSON" in errors[1]["message"]
        assert answers[2]["error"] == {"code": "not_found", "message": "nothing at missing"}
        assert answers[3]["error"] == {"code": "storage_error", "message": "internal error: RuntimeError: boom"}
        assert answers[4] == {"result": {"echo": {"ok": 1}}}

    def test_unreadable_json_is_answered_in_json(self, echo):
        """A document that opens as JSON but is not is refused in JSON."""
        raw = exchange(echo.address, b'{"echo": \n...\n', 1)
        assert json.loads(raw[0])["error"]["code"] == "invalid_request"

    def test_a_follow_up_runs_once_the_answer_is_written(self, echo):
        """A reply's follow-up may push documents of its own: they come after its answer."""
        answers = documents(echo.address, b"then: {n: 1}\n...\n", 2)
        assert answers == [{"result": {"then": {"n": 1}}}, {"pushed": {"n": 1}}]

    def test_a_conversation_that_starts_work_at_once_pipelines(self):
        """Every request is started as it arrives; the answers still come back in request order."""
        with ThreadedServer(StreamServer(OutOfOrder, listen=("127.0.0.1", 0))) as running:
            answers = documents(running.address, b"".join(b"{n: %d}\n...\n" % n for n in range(3)), 3)
        assert [answer["result"] for answer in answers] == [{"n": n, "started": 3} for n in range(3)]

    def test_a_peer_that_leaves_ends_only_its_connection(self, echo):
        """A connection dropped mid-document does not stop the server."""
        with socket.create_connection(echo.address, timeout=60) as raw:
            raw.sendall(b"echo: {a: ")
        assert documents(echo.address, b"echo: {}\n...\n", 1) == [{"result": {"echo": {}}}]


class TestStreamServer:
    def test_needs_somewhere_to_listen(self):
        """Neither listen nor socket_path is refused before anything binds."""
        with pytest.raises(ValueError, match="serve on listen"):
            StreamServer(Echo)


class SlowToClose(Echo):
    """An Echo whose aclose (closing its own links, as docd's closes its owners') is still running when the server
    closes: it says so, then waits until cancelled."""

    closing = threading.Event()

    async def aclose(self) -> None:
        SlowToClose.closing.set()
        await asyncio.Event().wait()


class TestClosingServer:
    def test_a_connection_closing_as_the_server_closes_logs_nothing(self, caplog):
        """The server closes while a connection's conversation is still closing: no "Exception in callback"
        CancelledError traceback (docd's at the end of `retain demo --postgres`)."""
        running = ThreadedServer(StreamServer(SlowToClose, listen=("127.0.0.1", 0), limits=LIMITS)).start()
        try:
            assert documents(running.address, b"echo: {a: 1}\n...\n", 1) == [{"result": {"echo": {"a": 1}}}]
            assert SlowToClose.closing.wait(timeout=10)  # the peer left: the connection is closing its conversation
        finally:
            running.stop()
        assert [record.getMessage() for record in caplog.records if record.levelno >= logging.ERROR] == []
