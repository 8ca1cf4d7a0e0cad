"""The shapes of the request language: ``{verb: {...}}`` in, ``{result: {verb: ...}}`` or
``{error: {code, message}}`` out, and the one way a failure becomes an answer.

:func:`answer_failure` is what every transport answers when answering raised: a
:class:`~retain.errors.LogdError` as its code and message, anything else -- a bug --
logged and answered as ``storage_error`` ``internal error: ...``, so a bug never takes a
connection, or the server, down.
"""

from __future__ import annotations

import logging
from typing import Any

from retain.errors import InvalidRequest, LogdError, StorageError

__all__ = ["answer_error", "answer_failure", "answer_result", "parse_request"]

log = logging.getLogger(__name__)


def parse_request(value: Any) -> tuple[str, dict[str, Any]]:
    """``{verb: {...}}`` -> ``(verb, body)``; an absent body is ``{}``.

    Raises:
        InvalidRequest: ``value`` is not a map of exactly one verb to a map (or nothing).
    """
    if not isinstance(value, dict):
        raise InvalidRequest(f"a request is a map {{verb: {{...}}}} (got {_kind(value)})")
    if len(value) != 1:
        raise InvalidRequest(f"a request holds exactly one verb (got {sorted(map(str, value)) or 'none'})")
    (verb, body), = value.items()
    if body is None:
        body = {}
    if not isinstance(body, dict):
        raise InvalidRequest(f"the body of {verb!r} is a map (got {_kind(body)})")
    return str(verb), body


def answer_result(verb: str, result: dict[str, Any]) -> dict[str, Any]:
    """``{result: {verb: result}}``."""
    return {"result": {verb: result}}


#: the longest error message answered: past it the message is cut, whatever value it quotes (a refusal quotes
#: at most a short prefix of a value, :func:`retain._fields.quoted`; this holds for any that does not)
MAX_MESSAGE = 1024


def answer_error(error: LogdError) -> dict[str, Any]:
    """``{error: {code, message}}`` for ``error``, its message cut to :data:`MAX_MESSAGE` characters."""
    message = str(error)
    if len(message) > MAX_MESSAGE:
        message = message[:MAX_MESSAGE] + "…"
    return {"error": {"code": error.code, "message": message}}


def answer_failure(exc: Exception) -> dict[str, Any]:
    """The answer to a request whose answering raised ``exc``: its error, or an internal error (logged)."""
    if isinstance(exc, LogdError):
        return answer_error(exc)
    log.error("request failed", exc_info=exc)
    return answer_error(StorageError(f"internal error: {type(exc).__name__}: {exc}"))


def _kind(value: Any) -> str:
    return {dict: "a map", list: "a list", str: "a string", type(None): "nothing"}.get(type(value),
                                                                                     type(value).__name__)
