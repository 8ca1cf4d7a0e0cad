"""A retain schedule: the same retain request, sent to a logd on a beat with the caller's clock.

logd holds no retention policy and runs no timer for it; the caller carries both. This is
that caller, declared in TOML (``docs/logd.md``, "Retain on a schedule")::

    connect = "127.0.0.1:7420"      # optional: HOST:PORT or unix:PATH (--connect overrides)
    every = "1h"                    # the beat: a duration (1h, 90m, 1d)
    retry = "1m"                    # optional: how soon the rules that skipped items are asked again
    author = "verse/retention"      # optional: the author of the delete commits
    scope = "trial-1"               # optional: run in this scope
    batch = 256                     # optional: the most items one delete commit removes

    [[rule]]
    path = "jobs.*"
    match = { status = { "!or" = ["done", "canceled"] } }   # tags in their JSON spelling
    age = ".updatedAt"
    after = "1d"

    [[rule]]
    path = "events(*)"
    age = ".at"
    after = "1y"

The file is checked whole before anything connects (rules as a retain request is:
:func:`~retain.logd.retain_rules.parse_retain`). Each beat sends ``{retain: {now, ...}}``
with ``now`` read from the caller's clock at that beat, over a fresh connection.

A rule whose answer reports ``skipped`` items (items written again and again under the
pass) is asked again on the next beat, which then comes ``retry`` after the one before
started (the lesser of one minute and ``every`` when not set) and sends only those rules
(:func:`reasked`); the beat after it is the regular one, ``every`` after the last regular
beat began. With ``retry`` at ``every`` or more, the regular beat asks again.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from retain import _fields, _toml
from retain._fields import Where
from retain.beats import Beat
from retain.clock import utc_now
from retain.errors import InvalidInput, InvalidPolicy, RetainError
from retain.logd.client import Address, Client, parse_address
from retain.logd.retain import RetainResult
from retain.logd.retain_rules import RetainRequest, parse_retain
from retain.wire import ClientTls
from retain.wire.requests import Answer
from retain.wire.tags import from_plain

__all__ = ["DEFAULT_RETRY", "RetainSchedule", "describe_answer", "load_schedule", "parse_schedule", "reasked",
           "run_schedule", "schedule_beat", "send_retain"]

TOP_FIELDS = ("connect", "every", "retry", "author", "scope", "batch", "rule")
#: how soon rules that skipped items are asked again, when the file does not say (never later than ``every``)
DEFAULT_RETRY = timedelta(minutes=1)

Clock = Callable[[], datetime]


@dataclass(frozen=True)
class RetainSchedule:
    """A schedule file, read and checked: the request (without ``now``), its beat and where it goes."""

    #: where it was read from, for messages: a path or ``<string>``
    source: str
    request: RetainRequest
    every: timedelta
    connect: str | None = None
    scope: str | None = None
    retry: timedelta | None = None

    def request_at(self, now: datetime, rules: Sequence[int] | None = None) -> dict[str, Any]:
        """The request document one beat sends: ``{retain: {now, batch, author?, what}}``; with ``rules`` (indices
        into the file's rules), only those, in that order."""
        request = dataclasses.replace(self.request, now=now)
        if rules is not None:
            request = dataclasses.replace(request, rules=tuple(self.request.rules[index] for index in rules))
        return {"retain": request.to_document()}

    @property
    def retry_after(self) -> timedelta:
        """How soon after a beat whose answer skipped items the rules that did are asked again."""
        return self.retry if self.retry is not None else min(self.every, DEFAULT_RETRY)


def load_schedule(path: str | Path) -> RetainSchedule:
    """Read and check the schedule file at ``path``.

    Raises:
        InvalidPolicy: the file cannot be read, is not TOML, or a field or rule is wrong; the
            message names the file, the rule (numbered from 1) and the field.
    """
    text = _toml.read(path, "schedule", InvalidPolicy)
    return parse_schedule(text, source=str(path))


def parse_schedule(text: str, source: str = "<string>") -> RetainSchedule:
    """Check the TOML ``text`` of a schedule file; ``source`` names it in messages.

    Example:
        >>> parse_schedule('every = "1h"\\n[[rule]]\\npath = "jobs.*"\\nage = ".updatedAt"\\nafter = "1d"').every
        datetime.timedelta(seconds=3600)
    """
    document = _toml.decode(text, source, InvalidPolicy)
    where = Where(source, InvalidPolicy)
    _fields.refuse_unknown(document, TOP_FIELDS, where)
    if "every" not in document:
        raise InvalidPolicy(f"{where.field('every')}: missing: the beat, a duration such as \"1h\"")
    every = _fields.duration(document["every"], "every", where)
    retry = _fields.duration(document["retry"], "retry", where) if "retry" in document else None
    rules = document.get("rule")
    if not isinstance(rules, list) or not rules:
        raise InvalidPolicy(f"{source}: at least one [[rule]] table is required "
                            "(path, match?, age, after)")
    for name in ("connect", "scope"):
        _fields.string(document, name, where)
    body = {name: document[name] for name in ("author", "batch") if name in document}
    try:
        if "connect" in document:
            parse_address(document["connect"])
        request = parse_retain({**body, "what": [from_plain(rule) for rule in rules]})
    except InvalidInput as exc:
        shown = str(exc).replace("retain what[", "rule[").replace("retain: ", "")
        raise InvalidPolicy(f"{source}: {_numbered(shown)}") from None
    return RetainSchedule(source, request, every, document.get("connect"), document.get("scope"), retry)


def _numbered(message: str) -> str:
    """``rule[0] (jobs.*): ...`` -> ``rule 1 (jobs.*): ...``: files number their tables from 1."""
    if message.startswith("rule["):
        index, _, rest = message[5:].partition("]")
        if index.isdigit():
            return f"rule {int(index) + 1}{rest}"
    return message


def send_retain(address: Address, request: dict[str, Any], *, scope: str | None = None,
                timeout: float = 600.0, token: str | None = None, tls: ClientTls = None) -> Answer:
    """Send one retain request over a fresh connection (presenting ``token`` if given, over TLS with ``tls``);
    the whole answer (``result`` or ``error``)."""
    with Client(address, scope=scope, timeout=timeout, token=token, tls=tls) as client:
        return client.request(request)


def describe_answer(answer: Answer) -> str:
    """One log line for a retain answer: the result's summary, or the error."""
    if "error" in answer:
        return f"retain failed: {answer['error']['code']}: {answer['error']['message']}"
    result: Mapping[str, Any] = answer["result"]["retain"]  # logd's shape, or docd's (each rule names its owner)
    if any("owner" in rule for rule in result["rules"]):
        return _describe_routed(result)
    return RetainResult.from_document(result).summary()


def _describe_routed(result: Mapping[str, Any]) -> str:
    """A retain answered through docd: each rule names its owner, and a rule whose owner did not run it says why."""
    parts = []
    for rule in result["rules"]:
        if "error" in rule:
            said = f"{rule['error'].get('code')}: {rule['error'].get('message')}"
        else:
            counts = [f"{rule[name]} {name}" for name in ("unreadable", "skipped", "retried") if rule.get(name)]
            said = ", ".join([str(rule.get("deleted", 0)), *counts])
        parts.append(f"{rule['path']} at {rule['owner']}: {said}")
    commit = f", logd commit {result['commit']}" if "commit" in result else ""
    return f"retain at {result['now']}: deleted {result['deleted']} ({'; '.join(parts)}){commit}"


def reasked(answer: Answer, sent: Sequence[int]) -> tuple[int, ...]:
    """The rules to ask again: of ``sent`` (the file's rules a beat sent, in order), those whose answer reported
    ``skipped`` items -- through logd or docd alike (each answers the rules in the order sent); none for an error
    answer, whose rules did not run.

    Example:
        >>> reasked({"result": {"retain": {"rules": [{"path": "a.*", "deleted": 1},
        ...                                          {"path": "b.*", "deleted": 0, "skipped": 3}]}}}, [0, 2])
        (2,)
    """
    if "error" in answer:
        return ()
    body = answer["result"].get("retain")
    rules = body.get("rules") if body is not None else None
    if not isinstance(rules, list):
        return ()
    return tuple(index for index, rule in zip(sent, rules, strict=False) if isinstance(rule, dict) and rule.get("skipped"))


def schedule_beat(schedule: RetainSchedule, address: Address, *,
                  on_answer: Callable[[datetime, Answer], None],
                  on_error: Callable[[datetime, RetainError], None], clock: Clock = utc_now,
                  send: Callable[..., Answer] = send_retain, stop: threading.Event | None = None) -> Beat:
    """The schedule as a :class:`retain.beats.Beat` (not started): every ``schedule.every`` it sends the request.

    Each beat reads ``clock()`` once and sends that as ``now``. An answer (even an error answer)
    goes to ``on_answer``; a logd that cannot be reached goes to ``on_error``, and the next beat
    tries again. A beat starts ``every`` after the one before started (at once if that ran
    longer); with beats that far apart it does not back off further. ``stop`` ends it when set.
    A regular beat whose answer reports skipped items has the next beat come
    ``schedule.retry_after`` after it started, asking only the rules that skipped (:func:`reasked`);
    the regular beats keep their times.
    """
    period = schedule.every.total_seconds()
    retry = schedule.retry_after.total_seconds()
    everything = tuple(range(len(schedule.request.rules)))
    again: list[tuple[int, ...]] = []  # the rules the next beat asks again, when it is a re-ask

    def one_beat() -> bool:
        now = clock()
        sent = again.pop() if again else everything
        try:
            answer = send(address, schedule.request_at(now, None if sent == everything else sent),
                          scope=schedule.scope)
        except RetainError as exc:
            on_error(now, exc)
            return True
        on_answer(now, answer)
        if sent != everything:
            beat.sooner(period - retry)  # back to the regular beat's time
        elif retry < period and (skipped := reasked(answer, sent)):
            again.append(skipped)
            beat.sooner(retry)
        return False

    beat = Beat(one_beat, tick=period, max_backoff=period, name="retain-schedule", stop=stop)
    return beat


def run_schedule(schedule: RetainSchedule, address: Address, *, stop: threading.Event,
                 on_answer: Callable[[datetime, Answer], None],
                 on_error: Callable[[datetime, RetainError], None], clock: Clock = utc_now,
                 send: Callable[..., Answer] = send_retain) -> int:
    """Run :func:`schedule_beat` in this thread until ``stop`` is set; returns the beats run."""
    beat = schedule_beat(schedule, address, on_answer=on_answer, on_error=on_error, clock=clock, send=send, stop=stop)
    beat.run()
    return beat.beats
