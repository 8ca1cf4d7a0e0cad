"""The HTTP transport with a handler of its own: formats in kind, failures as statuses, the size bound."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import httpx
import pytest

from retain.errors import NotFound
from retain.wire import Format, WireLimits, load
from retain.wire.http import http_app
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
