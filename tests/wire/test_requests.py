"""The request and answer shapes, pure."""

from __future__ import annotations

import re

import pytest

from retain.errors import InvalidRequest, StorageError
from retain.wire.requests import Request, as_answer, parse_request


class TestParseRequest:
    def test_parse_request(self):
        """{verb: body}; a missing body is {}."""
        assert parse_request({"get": None}) == ("get", {})
        assert parse_request({"get": {"path": "a"}}) == Request("get", {"path": "a"})
        assert parse_request({"get": {"path": "a"}}).to_document() == {"get": {"path": "a"}}

    @pytest.mark.parametrize(("value", "message"), [
        ([1], "a request is a map"), ("get", "a request is a map"), ({}, "exactly one verb"),
        ({"a": {}, "b": {}}, "exactly one verb"), ({"get": 1}, "the body of 'get' is a map"),
    ])
    def test_refused(self, value, message):
        """Anything but one verb with a map body is an invalid_request."""
        with pytest.raises(InvalidRequest, match=message):
            parse_request(value)


class TestAsAnswer:
    def test_the_two_kinds(self):
        """A result or an error comes back as the typed answer it is, unchanged."""
        result = {"result": {"get": {"commit": 1, "value": None}}}
        error = {"error": {"code": "not_found", "message": "no jobs.j1"}}
        assert as_answer(result) == result
        assert as_answer(error) == error

    @pytest.mark.parametrize(("value", "got"), [
        ({"error": "boom"}, "['error']"), ("not a map", "a string"), ({"result": {"get": 1}}, "['result']"),
        ({"result": {}}, "['result']"), ({"error": {"code": 7, "message": "m"}}, "['error']"),
        ({"result": {"get": {}}, "error": {"code": "c", "message": "m"}}, "['error', 'result']"),
    ])
    def test_anything_else_is_the_servers_fault(self, value, got):
        """What is not an answer is a storage_error naming what came instead (the request was not at fault)."""
        with pytest.raises(StorageError, match=r"no answer: .*\(got " + re.escape(got) + r"\)"):
            as_answer(value)
