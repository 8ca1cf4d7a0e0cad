"""The request and answer shapes, pure."""

from __future__ import annotations

import pytest

from retain.errors import InvalidRequest
from retain.wire.requests import parse_request


class TestParseRequest:
    def test_parse_request(self):
        """{verb: body}; a missing body is {}."""
        assert parse_request({"get": None}) == ("get", {})
        assert parse_request({"get": {"path": "a"}}) == ("get", {"path": "a"})

    @pytest.mark.parametrize(("value", "message"), [
        ([1], "a request is a map"), ("get", "a request is a map"), ({}, "exactly one verb"),
        ({"a": {}, "b": {}}, "exactly one verb"), ({"get": 1}, "the body of 'get' is a map"),
    ])
    def test_refused(self, value, message):
        """Anything but one verb with a map body is an invalid_request."""
        with pytest.raises(InvalidRequest, match=message):
            parse_request(value)
