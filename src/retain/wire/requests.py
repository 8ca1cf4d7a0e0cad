"""The shapes of the request language: ``{verb: {...}}`` in (:class:`Request`), ``{result: {verb: ...}}``
(:class:`ResultAnswer`) or ``{error: {code, message}}`` (:class:`ErrorAnswer`) out, and the one way a failure
becomes an answer.

The shapes are typed where the parts meet: a transport holds an :data:`Answer`, a server's verbs take a
:data:`Body` and give a :data:`Result` (each verb its own ``TypedDict``, e.g. :class:`retain.logd.answers.GetResult`).
``Any`` is left only where a value really is any document value: a body's fields before its verb checks them.

:func:`answer_failure` is what every transport answers when answering raised: a
:class:`~retain.errors.LogdError` as its code and message, anything else -- a bug --
logged and answered as ``storage_error`` ``internal error: ...``, so a bug never takes a
connection, or the server, down.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, NamedTuple, TypeAlias, TypedDict, final

from retain.errors import InvalidRequest, LogdError, StorageError

__all__ = ["Answer", "Body", "ErrorAnswer", "ErrorDetail", "Request", "Result", "ResultAnswer", "answer_error",
           "answer_failure", "answer_result", "as_answer", "parse_request"]

log = logging.getLogger(__name__)

#: a verb's body as loaded: a map of document values (any JSON, or YAML with the registered tags) that the verb
#: checks field by field
Body: TypeAlias = dict[str, Any]
#: a verb's result: the map it answers, each verb its own ``TypedDict`` (a ``TypedDict`` is a ``Mapping[str, object]``)
Result: TypeAlias = Mapping[str, object]


class ErrorDetail(TypedDict):
    """What went wrong: one of the request language's codes (``invalid_request``, ``storage_error``, ...) and a
    message that names what was wrong and what was expected."""

    code: str
    message: str


@final  # final, so that ``"error" in answer`` tells an Answer's two kinds apart
class ErrorAnswer(TypedDict):
    """``{error: {code, message}}``: the answer to a request that was refused or failed."""

    error: ErrorDetail


@final
class ResultAnswer(TypedDict):
    """``{result: {verb: result}}``: the answer to a request that was answered."""

    result: dict[str, Result]


#: what a server sends back for one request
Answer: TypeAlias = ErrorAnswer | ResultAnswer


class Request(NamedTuple):
    """One request: its verb and its body (``{verb: body}`` on the wire)."""

    verb: str
    body: Body

    def to_document(self) -> dict[str, Body]:
        """``{verb: body}``, as sent."""
        return {self.verb: self.body}


def parse_request(value: Any) -> Request:
    """``{verb: {...}}`` -> ``Request(verb, body)``; an absent body is ``{}``.

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
    return Request(str(verb), body)


def as_answer(value: Any) -> Answer:
    """A loaded document as the answer it must be: ``{result: {verb: {...}}}`` or ``{error: {code, message}}``
    (what a client or a router reads back from a server).

    Raises:
        StorageError: naming what the document is instead: the server that sent it is broken, or is no logd
            (the request was not at fault, so this is not ``invalid_request``).
    """
    if isinstance(value, dict) and len(value) == 1:
        if isinstance(result := value.get("result"), dict) and len(result) == 1 \
                and all(isinstance(body, dict) for body in result.values()):
            return ResultAnswer(result=result)
        if isinstance(error := value.get("error"), dict) and isinstance(error.get("code"), str) \
                and isinstance(error.get("message"), str):
            return ErrorAnswer(error=ErrorDetail(code=error["code"], message=error["message"]))
    shape = sorted(map(str, value)) if isinstance(value, dict) else _kind(value)
    raise StorageError(f"the server answered something that is no answer: an answer is {{result: {{VERB: {{...}}}}}} "
                       f"or {{error: {{code, message}}}} (got {shape})")


def answer_result(verb: str, result: Result) -> ResultAnswer:
    """``{result: {verb: result}}``."""
    return {"result": {verb: result}}


#: the longest error message answered: past it the message is cut, whatever value it quotes (a refusal quotes
#: at most a short prefix of a value, :func:`retain._fields.quoted`; this holds for any that does not)
MAX_MESSAGE = 1024


def answer_error(error: LogdError) -> ErrorAnswer:
    """``{error: {code, message}}`` for ``error``, its message cut to :data:`MAX_MESSAGE` characters."""
    message = str(error)
    if len(message) > MAX_MESSAGE:
        message = message[:MAX_MESSAGE] + "…"
    return {"error": {"code": error.code, "message": message}}


def answer_failure(exc: Exception) -> ErrorAnswer:
    """The answer to a request whose answering raised ``exc``: its error, or an internal error (logged)."""
    if isinstance(exc, LogdError):
        return answer_error(exc)
    log.error("request failed", exc_info=exc)
    return answer_error(StorageError(f"internal error: {type(exc).__name__}: {exc}"))


def _kind(value: Any) -> str:
    return {dict: "a map", list: "a list", str: "a string", type(None): "nothing"}.get(type(value),
                                                                                     type(value).__name__)
