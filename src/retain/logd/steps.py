"""Work in steps: a long request yields its units of work to whoever runs it, so others' requests come between.

A request that would hold logd's one writer for long -- a retain pass over a million items, a compaction of
a large history -- is a generator of :class:`Step`\\ s: each a read (``writes`` False: on a snapshot of its
own, beside the writer) or one unit of writing (``writes`` True: one transaction on the writer). In a
process of its own, :func:`drive` runs them one after the other; logd's server runs each where it belongs
(:func:`drive_async`), so every other client's request queued meanwhile runs between two of them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

__all__ = ["Step", "drive", "drive_async"]

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class Step:
    """One step, for its driver to run: a read (``writes`` False: on a snapshot of its own, beside the
    writer) or one unit of writing (``writes`` True: on the writer, between other clients' writes).
    ``run()`` returns what the steps go on with; an error it raises goes back into them."""

    run: Callable[[], Any]
    writes: bool


def drive(steps: Generator[Step, Any, _T]) -> _T:
    """Run the steps in place, in order, each one's value (or error) sent back in; the generator's return value."""
    driving = _Driving(steps)
    while not isinstance(step := driving.next(), _Done):
        try:
            driving.took(step.run())
        except Exception as exc:  # back into the steps, which say what had run before it
            driving.failed(exc)
    return step.value


async def drive_async(steps: Generator[Step, Any, _T], run: Callable[[Step], Awaitable[Any]]) -> _T:
    """:func:`drive`'s twin for a server: ``run(step)`` runs each step where it belongs (reads beside the
    writer, writes on it) while the event loop goes on."""
    driving = _Driving(steps)
    while not isinstance(step := driving.next(), _Done):
        try:
            driving.took(await run(step))
        except Exception as exc:
            driving.failed(exc)
    return step.value


@dataclass(frozen=True, slots=True)
class _Done(Generic[_T]):
    value: _T


class _Driving(Generic[_T]):
    """Where a driver is in the steps: what the last step gave (or raised) goes back in for the next."""

    def __init__(self, steps: Generator[Step, Any, _T]) -> None:
        self.steps: Generator[Step, Any, _T] = steps
        self.value: Any = None
        self.error: Exception | None = None

    def next(self) -> Step | _Done[_T]:
        """The next step; :class:`_Done` with the generator's return value after the last."""
        try:
            return self.steps.send(self.value) if self.error is None else self.steps.throw(self.error)
        except StopIteration as stop:
            return _Done(stop.value)

    def took(self, value: Any) -> None:
        self.value, self.error = value, None

    def failed(self, error: Exception) -> None:
        self.value, self.error = None, error
