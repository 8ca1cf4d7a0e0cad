"""Measuring the streams that have a byte budget, before a beat decides their trims.

Redis has no byte trim. For each entry with a :class:`~retain.windows.MaxBytes`
a beat first sends ``MEMORY USAGE key SAMPLES n`` and ``XLEN key`` (one round
trip for all of them, in the same pipeline form as the trims), then
:func:`~retain.retention.policy.decide` converts each budget into a
``MAXLEN ~`` count (:meth:`~retain.windows.MaxBytes.to_maxlen`). A stream whose
measure fails gets no byte trim this beat; its error is the stream's failure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from retain._redis import as_retain_error
from retain.errors import RetainError
from retain.retention.cuts import Size
from retain.retention.policy import StreamPolicy

__all__ = ["Measured", "measure_commands", "read_sizes"]


@dataclass(frozen=True)
class Measured:
    """What a beat's measure came to: each stream's size, or the error reading it met."""

    sizes: dict[str, Size]
    failures: dict[str, RetainError]


def measure_commands(entries: Sequence[StreamPolicy]) -> list[tuple[str, ...]]:
    """Two commands per entry with a budget: ``MEMORY USAGE key SAMPLES n``, then ``XLEN key``."""
    commands: list[tuple[str, ...]] = []
    for entry in entries:
        budget = entry.budget
        assert budget is not None  # Policy.measured holds the entries with a budget
        commands += [budget.measure_command(entry.key), ("XLEN", entry.key)]
    return commands


def read_sizes(entries: Sequence[StreamPolicy], answers: Sequence[Any] | BaseException) -> Measured:
    """The sizes in the answers to :func:`measure_commands`; a failed answer is that stream's failure."""
    if isinstance(answers, BaseException):
        answers = [answers] * (2 * len(entries))
    sizes: dict[str, Size] = {}
    failures: dict[str, RetainError] = {}
    for index, entry in enumerate(entries):
        usage, length = answers[2 * index], answers[2 * index + 1]
        error = next((answer for answer in (usage, length) if isinstance(answer, BaseException)), None)
        if error is not None:
            failures[entry.key] = as_retain_error(error, entry.key)
            continue
        sizes[entry.key] = Size(None if usage is None else int(usage), int(length))
    return Measured(sizes, failures)
