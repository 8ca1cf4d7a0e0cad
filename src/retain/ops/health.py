"""Health and readiness: alive while the process runs, ready while every check the daemon registered passes.

A check is a name and a function returning None when all is well, or the reason
it is not (``"the last beat is 12.0 s old, more than 3 ticks of 1 s"``). A check
that raises is failing, its exception the reason: readiness never crashes on the
thing it reports.

Example:
    >>> health = Health()
    >>> health.check("beat", beat_check(lambda: driver_last_beat, tick=1.0))
    >>> health.readiness()
    Readiness(ready=True, reasons={})
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

__all__ = ["STALE_TICKS", "Check", "Health", "Readiness", "beat_check"]

#: a beat older than this many ticks makes a daemon not ready
STALE_TICKS = 3

#: ``check() -> None`` when all is well, else the reason it is not
Check = Callable[[], str | None]


@dataclass(frozen=True)
class Readiness:
    """Whether a daemon can do its job now, and for each failing check, why not."""

    ready: bool
    reasons: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    #: what the daemon adds for people, whatever the checks say (a replica: the shards it holds)
    details: Mapping[str, object] = field(default_factory=lambda: MappingProxyType({}))

    def to_document(self) -> dict[str, object]:
        """``{"ready": false, "reasons": {"redis": "Redis unavailable: ..."}}``: what ``/readyz`` answers,
        with ``details`` when the daemon gives some."""
        document: dict[str, object] = {"ready": self.ready, "reasons": dict(self.reasons)}
        if self.details:
            document["details"] = dict(self.details)
        return document

    def listed(self) -> list[str]:
        """The reasons as the dashboard lists them: ``redis: Redis unavailable: ...``."""
        return [f"{name}: {reason}" for name, reason in self.reasons.items()]


class Health:
    """The checks a daemon registers; :meth:`readiness` runs them all."""

    def __init__(self) -> None:
        self._checks: dict[str, Check] = {}
        self._details: dict[str, Callable[[], object]] = {}

    def check(self, name: str, check: Check) -> None:
        """Register (or replace) the check called ``name``."""
        self._checks[name] = check

    def detail(self, name: str, detail: Callable[[], object]) -> None:
        """Register what ``/readyz`` also says under ``details[name]`` (a JSON value; None leaves it out)."""
        self._details[name] = detail

    def readiness(self) -> Readiness:
        """Run every check; ready when none has a reason."""
        reasons: dict[str, str] = {}
        for name, check in self._checks.items():
            try:
                reason = check()
            except Exception as exc:  # a check that breaks is a failing check, not a broken endpoint
                reason = f"{type(exc).__name__}: {exc}"
            if reason:
                reasons[name] = reason
        details = {name: value for name, detail in self._details.items() if (value := detail()) is not None}
        return Readiness(not reasons, MappingProxyType(reasons), MappingProxyType(details))


def beat_check(last_beat: Callable[[], float | None], *, tick: float,
               clock: Callable[[], float] = time.time, started: float | None = None) -> Check:
    """A check that fails once the last beat (epoch seconds; None: none yet) is older than 3 ticks.

    Before the first beat the process's start counts as the last beat, so a
    daemon is given three ticks to beat once.
    """
    begun = clock() if started is None else started

    def check() -> str | None:
        last = last_beat()
        age = clock() - (begun if last is None else last)
        if age > STALE_TICKS * tick:
            what = "no beat yet" if last is None else "the last beat"
            return f"{what}: {age:.1f} s old, more than {STALE_TICKS} ticks of {tick:g} s"
        return None

    return check
