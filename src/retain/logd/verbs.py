"""The verbs: one handler per request type, looked up in :data:`VERBS`; the transports share them.

A handler takes the connection's :class:`Context` and the request body (a map) and
returns the result body, or raises a :class:`~retain.errors.LogdError`, which the
transport answers as ``{error: {code, message}}`` (:func:`retain.wire.requests.answer_failure`).
Bodies are checked field by field: an unknown field is an ``invalid_request``, never
silently ignored.

Where the server has tokens, the connection's :class:`Context` carries the caller's
:class:`~retain.wire.Token` and :func:`authorize` runs before any handler: the verb needs its
permission (:data:`PERMISSION`; ``schema`` with ``set`` needs ``admin``, reading it ``read``)
and an ``author`` the request names must match one of the token's patterns. A ``session`` that
makes a new scope needs ``write`` too (:meth:`~retain.logd.Store.session`).

``retain`` (:mod:`retain.logd.retain`) and ``compact`` are answered in steps
(:data:`STAGED`, :mod:`retain.logd.steps`): a retain's read, then one commit per batch; a
compaction's new boundary, then its pruning a range of records at a time. :func:`handle` runs
them in place, one after the other; logd's server runs them itself (:func:`staged`,
:func:`steps`), reads beside its writer and each unit of writing on the writer behind whatever
other clients sent meanwhile -- while the connection's own later requests wait for the answer,
so a read pipelined behind it sees all it did.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass
from typing import Any

from retain import _fields as fields
from retain._fields import Where
from retain.clock import parse_rfc3339
from retain.errors import InvalidRequest, Unsupported
from retain.logd.answers import (
    CommitResult,
    CompactResult,
    DeltaDocument,
    DropResult,
    GetResult,
    ListResult,
    RetainPassResult,
    SchemaResult,
    ScopesResult,
    SessionResult,
    WatchResult,
)
from retain.logd.paths import ROOT, Path, parse
from retain.logd.request_bounds import check_request
from retain.logd.retain import retain_pass
from retain.logd.steps import Step, drive
from retain.logd.store import Delta, Session, Store
from retain.wire import Format, Token
from retain.wire.requests import Body, Result, ResultAnswer, answer_result, parse_request

__all__ = ["GROUPED", "PERMISSION", "READS", "authorize", "grouped", "reads_only", "STAGED", "VERBS", "Context", "Handler", "Staged", "Steps", "Subscribe", "delta_document", "handle",
           "staged", "steps"]

#: ``subscribe(session, prefix, backlog)``: a stream transport starts sending deltas after ``backlog``.
Subscribe = Callable[[Session, Path, list[Delta]], None]


@dataclass
class Context:
    """One connection's state: the store, its current session, and how it can stream deltas."""

    store: Store
    session: Session
    subscribe: Subscribe | None = None  # None on transports that cannot stream (HTTP)
    format: Format = "yaml"  # the format of the request being answered; deltas of a watch follow it
    grant: Token | None = None  # the caller's token; None on an open server (everything permitted)


Handler = Callable[[Context, Body], Result]
#: A request answered in steps: each :class:`~retain.logd.retain.Step` is run by the caller and sent back its
#: value; the generator's return value is the answer.
Steps = Generator[Step, Any, ResultAnswer]
Staged = Callable[[Context, Body], Generator[Step, Any, Result]]


def handle(context: Context, request: Any) -> ResultAnswer:
    """Answer one loaded request document: ``{result: {verb: ...}}``.

    Raises:
        LogdError: the request is refused or fails; the transport answers it
            (:func:`retain.wire.requests.answer_failure`), as it answers a bug.
    """
    verb, body = parse_request(request)
    handler = VERBS.get(verb)
    if handler is None:
        raise Unsupported(f"unsupported operation: request type {verb!r} (this logd serves "
                          f"{', '.join(sorted(VERBS))})")
    authorize(context.grant, verb, body)
    check_request(context.store.settings, verb, body)
    return answer_result(verb, handler(context, body))


#: verb -> the permission a token needs for it (``schema`` that sets one needs ``admin``).
PERMISSION = {"session": "read", "get": "read", "list": "read", "watch": "read", "schema": "read",
              "patch": "write", "retain": "retain", "scopes": "admin", "drop": "admin", "compact": "admin"}


def authorize(grant: Token | None, verb: str, body: Body) -> None:
    """Refuse what ``grant`` does not permit: the verb's permission, and the author the body names.

    Raises:
        Forbidden: naming the token and what it lacks.
    """
    if grant is None:
        return
    permission = "admin" if verb == "schema" and "set" in body else PERMISSION.get(verb, "admin")
    grant.require(permission, f"{verb}{' (set)' if verb == 'schema' and 'set' in body else ''}")
    if "author" in body:
        grant.author(body["author"])


#: the verbs that only read: a server may answer them on a snapshot beside the writer (:func:`reads_only`).
READS = ("get", "list")


def reads_only(request: Any) -> bool:
    """Whether ``request`` only reads (a get or list); pure, so a transport may ask as it arrives."""
    return isinstance(request, dict) and len(request) == 1 and next(iter(request)) in READS


#: the verbs that make at most one commit and change nothing else: a server may commit several together
#: (:func:`grouped`, :mod:`retain.logd.writer`).
GROUPED = ("patch",)


def grouped(request: Any) -> bool:
    """Whether ``request`` is a patch, which a server's writer may commit in one transaction with the patches
    queued beside it; pure, so a transport may ask as it arrives."""
    return isinstance(request, dict) and len(request) == 1 and next(iter(request)) in GROUPED


def staged(request: Any) -> bool:
    """Whether ``request`` is answered in steps (:data:`STAGED`); pure, so a transport may ask as it arrives."""
    return isinstance(request, dict) and len(request) == 1 and next(iter(request)) in STAGED


def steps(context: Context, request: Any) -> Steps:
    """A staged request's steps; the generator's return value is the whole answer ``{result: {verb: ...}}``.
    The request is checked when the first step is asked for (raises as :func:`handle` would)."""
    verb, body = parse_request(request)
    authorize(context.grant, verb, body)
    check_request(context.store.settings, verb, body)
    result = yield from STAGED[verb](context, body)
    return answer_result(verb, result)


def delta_document(delta: Delta) -> DeltaDocument:
    return {"delta": {"commit": delta.commit, "author": delta.author, "time": delta.time, "ops": list(delta.ops)}}


def _fields(verb: str, body: Body, allowed: Iterable[str]) -> None:
    fields.refuse_unknown(body, allowed, Where(verb, InvalidRequest))


def _path(body: Body, *, required: bool) -> Path | None:
    if "path" not in body:
        if required:
            raise InvalidRequest("path is required")
        return None
    return parse(body["path"])


def _session(context: Context, body: Body) -> SessionResult:
    _fields("session", body, ("author", "scope"))
    author = body.get("author", context.session.author)
    context.session = context.store.session(author=author, scope=body.get("scope"), maker=context.grant)
    return {"author": context.session.author, "scope": context.session.scope}


def _schema(context: Context, body: Body) -> SchemaResult | CommitResult:
    _fields("schema", body, ("set", "author"))
    if "set" not in body:
        return {"commit": context.store.head, "schema": context.store.schema.to_document()}
    return {"commit": context.session.set_schema(body["set"], author=body.get("author")).commit}


def _patch(context: Context, body: Body) -> CommitResult:
    _fields("patch", body, ("ops", "if", "author"))
    if "ops" not in body:
        raise InvalidRequest("patch needs ops: a list of {set: PATH, value: V}, {delete: PATH}, "
                             "{append: PATH, value: V}")
    written = context.session.patch(body["ops"], precondition=body.get("if"), author=body.get("author"))
    return {"commit": written.commit}


def _get(context: Context, body: Body) -> GetResult:
    _fields("get", body, ("path", "at"))
    read = context.session.get(_path(body, required=False), at=body.get("at"))
    return {"commit": read.commit, "value": read.value}


def _list(context: Context, body: Body) -> ListResult:
    _fields("list", body, ("path", "at"))
    listing = context.session.list(_path(body, required=True), at=body.get("at"))  # type: ignore[arg-type]
    return {"commit": listing.commit, "items": listing.items}


def _watch(context: Context, body: Body) -> WatchResult:
    _fields("watch", body, ("path", "from"))
    if context.subscribe is None:
        raise Unsupported("unsupported operation: watch needs a stream transport (a TCP or Unix socket)")
    prefix = _path(body, required=False) or ROOT
    head = context.store.head
    first = body.get("from", head + 1)
    if type(first) is int and first > head + 1:
        # Numbers past the next commit are no commit yet. A watcher that holds one saw commits a restore from an
        # older backup took back, and new commits will take their numbers again: it must read afresh.
        raise InvalidRequest(f"watch from {first} is past the next commit {head + 1} (the head is {head}; a store "
                             "restored from a backup restarts there): read at the head and watch from the next commit")
    # One writer thread runs this: no commit lands between reading the backlog and subscribing.
    backlog = list(context.session.deltas(prefix, first=first))
    context.subscribe(context.session, prefix, backlog)
    return {"path": str(prefix), "from": first, "commit": head}


def _scopes(context: Context, body: Body) -> ScopesResult:
    _fields("scopes", body, ())
    return {"scopes": [{"name": scope.name, "created": scope.created} for scope in context.store.scopes()]}


def _drop(context: Context, body: Body) -> DropResult:
    _fields("drop", body, ("scope",))
    if "scope" not in body:
        raise InvalidRequest("drop needs the scope to drop: {drop: {scope: NAME}}")
    context.store.drop_scope(body["scope"])
    return {"scope": body["scope"]}


def _compact_steps(context: Context, body: Body) -> Generator[Step, Any, CompactResult]:
    _fields("compact", body, ("now",))
    now = None
    if "now" in body:
        now = parse_rfc3339(body["now"])
        if now is None:
            raise InvalidRequest(f"now must be an RFC 3339 time with a zone, such as 2026-09-12T08:00:00Z "
                                 f"(got {body['now']!r})")
    done = yield from context.store.compaction(now)
    return {"boundary": done.boundary, "snapshots": list(done.snapshots), "removed": done.removed}


def _compact(context: Context, body: Body) -> CompactResult:
    return drive(_compact_steps(context, body))  # in place: every step here, one after the other


def _retain_steps(context: Context, body: Body) -> Generator[Step, Any, RetainPassResult]:
    # Checked whole before any rule runs; without now, the store's clock is read once, inside.
    result = yield from retain_pass(context.session, body)
    return result.to_document()


def _retain(context: Context, body: Body) -> RetainPassResult:
    return drive(_retain_steps(context, body))  # in place: every step here, one after the other


#: verb -> its steps, for the verbs a server runs in steps of its own.
STAGED: dict[str, Staged] = {"retain": _retain_steps, "compact": _compact_steps}


#: verb -> handler.
VERBS: dict[str, Handler] = {
    "session": _session,
    "schema": _schema,
    "patch": _patch,
    "get": _get,
    "list": _list,
    "watch": _watch,
    "scopes": _scopes,
    "drop": _drop,
    "compact": _compact,
    "retain": _retain,
}
