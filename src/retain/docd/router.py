"""Routing, pure: which owner answers a request, what it is sent, and how the answers read back.

:func:`route` turns one request into a plan without touching the network:

- ``retain`` -> :class:`Fanout`: each rule goes to the owner of its container (logd for a
  base path, else the controller whose mount holds it), one request per owner, every one
  carrying the same ``now``; :func:`answer_retain` puts the owners' answers back together
  in the order the rules were sent;
- ``get``, ``list``, ``watch``, ``patch`` -> :class:`Forward`: one request for the owner of
  its path; :func:`answer_forward` and :func:`delta_from` make the owner's answer whole;
- ``session`` -> :class:`SessionChange`, which docd keeps and hands to every owner.

An owner sees paths relative to its mount (``verse.ctl.runs.*`` reaches the controller
mounted at ``verse.ctl`` as ``runs.*``); answers come back with the caller's paths.
Nothing is composed across mounts: a request over a container with mounts beneath it
is answered by that container's owner alone, and says so in ``under``.

Example:
    >>> table = MountTable.of({"verse.ctl": "127.0.0.1:7501"})
    >>> plan = route({"list": {"path": "verse.ctl.runs.*"}}, table, now=utc_now())
    >>> plan.owner.name, plan.request
    ('verse.ctl', {'list': {'path': 'runs.*'}})
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NoReturn

from retain import _fields
from retain._fields import Where
from retain.clock import format_rfc3339
from retain.docd.mounts import LOGD, Mount, MountTable
from retain.errors import InvalidInput, InvalidRequest, InvalidRetain, StorageError, Unsupported
from retain.logd.answers import DeltaBody
from retain.logd.client import Address
from retain.logd.paths import ROOT, Field, Path, Wild, check_key, parse
from retain.logd.retain_rules import parse_retain
from retain.wire.requests import Answer, Body, ErrorAnswer, ErrorDetail, answer_error, answer_result, parse_request

__all__ = ["ROUTED", "Fanout", "Forward", "Owner", "OwnerRequest", "Plan", "RuleRoute", "SessionChange",
           "answer_forward", "answer_retain", "delta_from", "route"]

#: the verbs docd routes; every other verb is answered ``unsupported`` by docd itself.
ROUTED = ("get", "list", "patch", "retain", "session", "watch")
_OP_VERBS = ("set", "delete", "append")


@dataclass(frozen=True, slots=True)
class Owner:
    """Who answers for a path: logd, or a mounted controller whose tree sits at ``prefix``."""

    name: str
    address: Address
    prefix: Path = ROOT

    @classmethod
    def of(cls, table: MountTable, mount: Mount | None) -> Owner:
        return cls(LOGD, table.logd) if mount is None else cls(mount.name, mount.address, mount.path)

    def relative(self, path: Path, original: str) -> Path:
        """``path`` as this owner names it; refused when the owner cannot name it (``verse.ctl(*)``)."""
        rest = Path(path.segments[len(self.prefix.segments):])
        first = rest.segments[0] if rest.segments else None
        if first is not None and not isinstance(first, Field) and first != Wild("field"):
            raise InvalidRequest(f"path {original!r}: the mount {self.name} is the root of its controller's "
                                 f"tree, a map; name its children with '.' ({self.name}.*)")
        return rest

    def absolute(self, text: str) -> str:
        """A path this owner wrote, as docd's callers name it."""
        if not self.prefix.segments:
            return text
        return str(Path(self.prefix.segments + (parse(text).segments if text else ())))


@dataclass(frozen=True)
class Forward:
    """One request for one owner; its answer goes back with ``owner`` (and ``under``) added."""

    verb: str
    owner: Owner
    request: Body
    #: the mounts beneath the place asked about, which the owner did not answer for
    under: tuple[str, ...] = ()


@dataclass(frozen=True)
class SessionChange:
    """A new author and/or scope for every owner this connection talks to (None: author unchanged)."""

    author: str | None
    scope: str | None


@dataclass(frozen=True)
class OwnerRequest:
    """The one retain request an owner is sent: its rules, relative to its mount, in the order sent."""

    owner: Owner
    request: Body


@dataclass(frozen=True)
class RuleRoute:
    """Where one rule went: its owner, its place in that owner's request, the mounts it did not touch."""

    path: str
    owner: str
    position: int
    under: tuple[str, ...] = ()


@dataclass(frozen=True)
class Fanout:
    """A retain request split by owner; ``rules`` keeps the order the caller sent them in."""

    now: str
    requests: tuple[OwnerRequest, ...]
    rules: tuple[RuleRoute, ...]


Plan = Forward | Fanout | SessionChange


def route(request: Any, table: MountTable, *, now: datetime) -> Plan:
    """Plan a loaded request: who is sent what. Pure; nothing is sent.

    ``now`` is docd's clock, read once by the caller; a retain request that names its
    own ``now`` keeps it.

    Raises:
        InvalidRequest: a request, path or patch docd cannot route (a patch spanning owners,
            a write over a mount point); nothing was sent.
        InvalidRetain: a retain request that cannot mean what it says.
        Unsupported: a verb docd does not route.
    """
    verb, body = parse_request(request)
    planner = _PLANNERS.get(verb)
    if planner is None:
        raise Unsupported(f"unsupported operation: request type {verb!r} (docd routes {', '.join(ROUTED)}; "
                          "send other requests to the owner directly)")
    return planner(body, table, now)


# -- planners ------------------------------------------------------------------------------------


def _session(body: dict[str, Any], table: MountTable, now: datetime) -> SessionChange:
    _fields.refuse_unknown(body, ("author", "scope"), Where("session", InvalidRequest))
    author = body.get("author")
    if author is not None and (not isinstance(author, str) or not author or len(author) > 256):
        raise InvalidRequest(f"an author is a string of 1-256 characters (got {author!r})")
    scope = body.get("scope")
    return SessionChange(author, None if scope is None else check_key(scope, "scope name"))


def _read(verb: str, *, required: bool) -> Callable[[dict[str, Any], MountTable, datetime], Forward]:
    def plan(body: dict[str, Any], table: MountTable, now: datetime) -> Forward:
        if "path" not in body and required:
            raise InvalidRequest(f"{verb} needs a path ending in a wildcard, such as jobs.*")
        text = body.get("path")
        path = ROOT if text is None else parse(text)
        container = path.parent if path.is_wild else path
        owner = Owner.of(table, table.owner(container))
        relative = owner.relative(path, str(text))
        sent = {name: value for name, value in body.items() if name != "path"}
        if relative.segments:
            sent = {"path": str(relative), **sent}
        return Forward(verb, owner, {verb: sent}, _names(table.beneath(container)))

    return plan


def _patch(body: dict[str, Any], table: MountTable, now: datetime) -> Forward:
    ops, precondition = body.get("ops"), body.get("if")
    if not isinstance(ops, list):
        raise InvalidRequest("patch needs ops: a list of {set: PATH, value: V}, {delete: PATH}, "
                             "{append: PATH, value: V}")
    if precondition is not None and not isinstance(precondition, dict):
        raise InvalidRequest(f"if is a map from path to pattern (got {type(precondition).__name__})")
    places: list[tuple[str, Path, Owner]] = []  # (what, path, owner) for every path the patch names
    for number, op in enumerate(ops, start=1):
        verbs = [name for name in _OP_VERBS if isinstance(op, dict) and name in op]
        if len(verbs) != 1:
            raise InvalidRequest(f"patch op #{number} must name one path: {{set: PATH, value: V}}, "
                                 f"{{delete: PATH}} or {{append: PATH, value: V}} (got {op!r})")
        places.append(_write_place(f"op #{number}", op[verbs[0]], table))
    for text in precondition or {}:
        places.append(_write_place(f"if {text}", text, table))
    owners = {owner.name: owner for _, _, owner in places}
    if len(owners) > 1:
        first_at: dict[str, str] = {}
        for what, path, owner in places:
            first_at.setdefault(owner.name, f"{what} at {path}")
        raise InvalidRequest("a patch is one commit at one owner, and this one spans "
                             + " and ".join(f"{name} ({where})" for name, where in first_at.items())
                             + ": send one patch per owner")
    owner = next(iter(owners.values()), Owner.of(table, None))
    sent = dict(body)
    sent["ops"] = [_relative_op(op, owner) for op in ops]
    if precondition is not None:
        sent["if"] = {str(owner.relative(parse(text), text)): pattern for text, pattern in precondition.items()}
    return Forward("patch", owner, {"patch": sent})


def _write_place(what: str, text: object, table: MountTable) -> tuple[str, Path, Owner]:
    path = parse(text)  # type: ignore[arg-type]
    holds = table.beneath(path) + tuple(mount for mount in table.mounts if mount.path == path)
    if holds:
        raise InvalidRequest(f"patch {what}: {path} holds the mount {holds[0].name}: a write stops at a "
                             "mount (nothing is composed across mounts); write beside it, or inside it")
    return what, path, Owner.of(table, table.owner(path))


def _relative_op(op: dict[str, Any], owner: Owner) -> dict[str, Any]:
    return {name: str(owner.relative(parse(value), value)) if name in _OP_VERBS else value
            for name, value in op.items()}


def _retain(body: dict[str, Any], table: MountTable, now: datetime) -> Fanout:
    # Checked whole, as logd checks it, before anything is sent: a bad rule never lets the others half-run.
    checked = parse_retain(body)
    now_text = body["now"] if checked.now is not None else format_rfc3339(now)  # the caller's own words, else docd's
    by_owner: dict[str, tuple[Owner, list[dict[str, Any]]]] = {}
    routes = []
    for index, (rule, parsed) in enumerate(zip(body["what"], checked.rules, strict=True)):
        container = parsed.container
        owner = Owner.of(table, table.owner(container))
        try:
            relative = owner.relative(parsed.path, rule["path"])
        except InvalidInput as exc:
            raise InvalidRetain(f"retain what[{index}]: {exc}") from None
        owned = by_owner.setdefault(owner.name, (owner, []))[1]
        routes.append(RuleRoute(rule["path"], owner.name, len(owned), _names(table.beneath(container))))
        owned.append({**rule, "path": str(relative)})
    shared = {name: body[name] for name in ("batch", "author") if name in body}
    requests = tuple(OwnerRequest(owner, {"retain": {"now": now_text, **shared, "what": owned}})
                     for owner, owned in by_owner.values())
    return Fanout(now_text, requests, tuple(routes))


def _names(mounts: tuple[Mount, ...]) -> tuple[str, ...]:
    return tuple(mount.name for mount in mounts)


_PLANNERS: dict[str, Callable[[dict[str, Any], MountTable, datetime], Plan]] = {
    "get": _read("get", required=False),
    "list": _read("list", required=True),
    "watch": _read("watch", required=False),
    "patch": _patch,
    "retain": _retain,
    "session": _session,
}


# -- answers ------------------------------------------------------------------------------------


def answer_forward(plan: Forward, answer: Answer) -> Answer:
    """The owner's answer to a forwarded request, as docd's caller gets it.

    An error passes through as the owner said it. A result gains ``owner`` (whose
    commit numbers these are) and ``under`` (mounts beneath the place it did not answer
    for); a watch's ``path`` is the caller's.
    """
    if "error" in answer:
        return answer
    result = answer["result"].get(plan.verb)
    if result is None:
        return answer_error(StorageError(f"{plan.owner.name} answered {plan.verb} with something docd cannot "
                                         f"read: {_brief(answer)}"))
    result = dict(result)
    if plan.verb == "watch" and isinstance(path := result.get("path"), str):
        result["path"] = plan.owner.absolute(path)
    result["owner"] = plan.owner.name
    if plan.under:
        result["under"] = list(plan.under)
    return answer_result(plan.verb, result)


def delta_from(owner: Owner, delta: DeltaBody) -> dict[str, dict[str, object]]:
    """A delta an owner sent a watch, with the caller's paths and the owner's name."""
    ops = [{name: owner.absolute(value) if name in _OP_VERBS and isinstance(value, str) else value
            for name, value in op.items()} if isinstance(op, dict) else op for op in delta.get("ops", ())]
    return {"delta": {**delta, "ops": ops, "owner": owner.name}}


class _Failed(Exception):
    """An owner's retain did not run: ``error`` is what its rules carry."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.error = {"code": code, "message": message}


def answer_retain(plan: Fanout, answers: Mapping[str, Answer]) -> Answer:
    """Put the owners' answers (owner name -> answer document) back into one, rules in the order sent.

    Each rule carries what its owner said of it, then ``owner``; a rule a controller ran also
    carries that controller's ``commit``; a rule over mounts it did not touch says ``under``;
    a rule whose owner failed carries that owner's ``error``. The top level carries the
    ``now`` every owner was sent, logd's ``commit`` (when logd ran) and ``deleted`` summed
    over every rule that ran. Only when no owner ran is the answer an error.
    """
    counts: dict[str, int] = {}
    for rule in plan.rules:
        counts[rule.owner] = counts.get(rule.owner, 0) + 1
    ran: dict[str, Mapping[str, Any]] = {}
    failed: dict[str, dict[str, str]] = {}
    for sent in plan.requests:
        name = sent.owner.name
        try:
            ran[name] = _retain_result(name, answers[name], counts[name])
        except _Failed as failure:
            failed[name] = failure.error
    if not ran:
        first = failed[plan.requests[0].owner.name]
        message = "; ".join(f"{name}: {error['message']}" for name, error in failed.items())
        return ErrorAnswer(error=ErrorDetail(code=first["code"], message=f"nothing ran: {message}"))
    rules = []
    for rule in plan.rules:
        entry: dict[str, Any] = {"path": rule.path}
        if rule.owner in ran:
            entry.update((name, value) for name, value in ran[rule.owner]["rules"][rule.position].items()
                         if name not in ("path", "owner", "under", "error"))
            if rule.owner != LOGD:
                entry["commit"] = ran[rule.owner]["commit"]  # a controller's commits are numbered its own way
        entry["owner"] = rule.owner
        if rule.under:
            entry["under"] = list(rule.under)
        if rule.owner in failed:
            entry["error"] = failed[rule.owner]
        rules.append(entry)
    result: dict[str, Any] = {"now": plan.now}
    if LOGD in ran:
        result["commit"] = ran[LOGD]["commit"]
    result["deleted"] = sum(rule.get("deleted", 0) for rule in rules if rule["owner"] in ran)
    result["rules"] = rules
    return answer_result("retain", result)


def _retain_result(owner: str, answer: Answer, count: int) -> Mapping[str, Any]:
    """The retain result an owner answered, checked; :class:`_Failed` if it did not run or made no sense."""
    if "error" in answer:
        return _fail(answer["error"]["code"], answer["error"]["message"])
    result = answer["result"].get("retain")
    rules = result.get("rules") if isinstance(result, dict) else None
    if not isinstance(result, dict) or not isinstance(rules, list) or len(rules) != count or not all(isinstance(rule, dict) for rule in rules):
        return _fail("storage_error", f"{owner} answered a retain result docd cannot read (expected {count} "
                                      f"rules): {_brief(answer)}")
    if not all(_count(rule.get("deleted", 0)) for rule in rules) or not isinstance(result.get("commit"), int):
        return _fail("storage_error", f"{owner} answered a retain result without a commit number or with a "
                                      f"deleted count that is not a count: {_brief(answer)}")
    return result


def _fail(code: str, message: str) -> NoReturn:
    raise _Failed(code, message)


def _count(value: object) -> bool:
    return type(value) is int and value >= 0


def _brief(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 200 else text[:200] + "..."
