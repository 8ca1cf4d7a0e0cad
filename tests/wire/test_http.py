"""The HTTP transport with a handler of its own: formats in kind, failures as statuses, the size bound."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import httpx
import pytest

from retain.errors import NotFound
from retain.wire import Format, WireLimits, load
from retain.wire.http import _OneWrite, http_app
from retain.wire.requests import answer_result


async def handler(request: Any, fmt: Format, headers: Mapping[str, str]) -> dict[str, Any]:
    (verb, body), = request.items()
    if verb == "missing":
        raise NotFound("nothing at missing")
    if verb == "bug":
        raise RuntimeError("boom")
    return answer_result(verb, {**body, "who": headers.get("x-who")})


def post(content: bytes | None = None, **options: Any) -> httpx.Response:
    """One POST / to the app, in process."""
    async def send() -> httpx.Response:
        transport = httpx.ASGITransport(app=http_app(handler, WireLimits(max_bytes=1024)))
        async with httpx.AsyncClient(transport=transport, base_url="http://wire") as client:
            return await client.post("/", content=content, **options)
    return asyncio.run(send())


class TestHttpApp:
    def test_answered_in_kind(self):
        """A YAML body is answered in YAML, a JSON body in JSON; the handler sees the headers."""
        yaml_answer = post(b"echo: {a: 1}", headers={"x-who": "ada"})
        assert yaml_answer.status_code == 200 and yaml_answer.headers["content-type"] == "application/yaml"
        assert load(yaml_answer.content)[0] == {"result": {"echo": {"a": 1, "who": "ada"}}}
        assert post(json={"echo": {"b": 2}}).json() == {"result": {"echo": {"b": 2, "who": None}}}

    @pytest.mark.parametrize(("body", "headers", "status", "code"), [
        (b"missing: {}", {}, 404, "not_found"),
        (b"bug: {}", {}, 500, "storage_error"),
        (b"{a: [", {}, 400, "invalid_request"),
        (b"echo: {}", {"content-type": "application/json"}, 400, "invalid_request"),
        (b"x: " + b"y" * 2000, {}, 413, "invalid_request"),
    ])
    def test_failures_are_statuses(self, body, headers, status, code):
        """A refusal or a bug is an error answer with the status of its code; too large is 413."""
        answer = post(body, headers=headers)
        assert answer.status_code == status and load(answer.content)[0]["error"]["code"] == code


class Recording:
    """A transport that records each write (what the peer's socket would see as one send)."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.writes.append(data)

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True


class TestOneWrite:
    def test_head_goes_with_the_body(self):
        """A response's head and body leave in one write (uvicorn made two sends of every answer)."""
        async def run() -> list[bytes]:
            recording = Recording()
            transport = _OneWrite(recording, asyncio.get_running_loop())
            transport.write(b"HTTP/1.1 200 \r\ncontent-length: 2\r\n\r\n")
            transport.write(b"{}")
            transport.write(b"")  # h11's end of a sized message
            await asyncio.sleep(0)
            return recording.writes

        assert asyncio.run(run()) == [b"HTTP/1.1 200 \r\ncontent-length: 2\r\n\r\n{}"]

    def test_a_head_alone_leaves_when_the_loop_turns(self):
        """A head whose body is not written at once is not held back; 100 Continue and a close are not either."""
        async def run() -> tuple[list[bytes], list[bytes], bool]:
            recording = Recording()
            transport = _OneWrite(recording, asyncio.get_running_loop())
            transport.write(b"HTTP/1.1 100 \r\n\r\n")
            transport.write(b"HTTP/1.1 200 \r\n\r\n")
            early = list(recording.writes)
            await asyncio.sleep(0)
            transport.write(b"HTTP/1.1 404 \r\n\r\n")
            transport.close()
            return early, recording.writes, recording.closed

        early, writes, closed = asyncio.run(run())
        assert early == [b"HTTP/1.1 100 \r\n\r\n"]
        assert writes == [b"HTTP/1.1 100 \r\n\r\n", b"HTTP/1.1 200 \r\n\r\n", b"HTTP/1.1 404 \r\n\r\n"] and closed
