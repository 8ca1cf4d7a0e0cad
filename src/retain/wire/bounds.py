"""The size bounds of one document, and what a transport holds when a document outgrew them.

A transport reads at most :attr:`WireLimits.max_bytes` of a document before giving up on it:
the stream's :class:`~retain.wire.framing.Framer` drops the rest as it arrives, HTTP stops
reading the body. Either hands on a :class:`TooLarge` in the document's place, answered
with one refusal (:func:`refuse_size`); the loader checks size and depth again itself.

Every connection of a server also draws on one :class:`ByteBudget`: the bytes of unfinished
documents (and HTTP bodies) buffered across the whole process. A document that would push
it past its limit is dropped like an oversized one and answered ``unavailable``
(:class:`~retain.errors.Unavailable`): the server refuses new work rather than grow
(30 connections sending 15 MiB each had added 450 MB).

A request read whole keeps its bytes reserved until its answer is written, and once loaded it is
counted at its loaded size (:func:`loaded_size`, Python objects weigh more than their text), both in
the process's budget and in its connection's own (:attr:`WireLimits.max_held`): a peer that pipelines
documents holds no more than either allows (a 3 MiB JSON list had grown logd by
215 MiB). A request that cannot be counted is refused ``unavailable``, naming the budget.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterable
from dataclasses import dataclass

from retain.errors import InvalidDocument, LimitExceeded, LogdError, Unavailable

__all__ = ["ByteBudget", "Budgets", "WireLimits", "StreamTimeouts", "TooLarge", "check_digits", "loaded_size",
           "refuse_size"]


@dataclass(frozen=True, slots=True)
class WireLimits:
    """Bounds on one document: its size in bytes, how deeply collections nest, how many digits an integer has.

    ``max_int_digits`` is checked before the digits are converted (Python's int() of a long digit string is
    quadratic; past 4,300 digits it raises), so a hostile integer costs no more than reading it.

    A document longer than ``inline_bytes`` is loaded, and an answer that weighs more is dumped, on a
    thread of :mod:`retain.wire.offload`'s small pool rather than on the event loop. ``max_held`` is what
    one stream connection may hold at once: its unfinished document and the requests it sent that are
    not answered yet, counted at their loaded size.
    """

    max_bytes: int = 16 * 1024 * 1024
    max_depth: int = 64
    max_int_digits: int = 64
    max_unanswered: int = 64  # requests a stream connection may have read ahead of the answers it took
    max_unsent: int = 64 * 1024 * 1024  # bytes of pushed documents (a watch's deltas) left unread: then closed
    inline_bytes: int = 16 * 1024  # larger documents are loaded and dumped off the event loop
    max_held: int = 64 * 1024 * 1024  # bytes one stream connection may hold, its requests counted loaded

    def __post_init__(self) -> None:
        for name in ("max_bytes", "max_depth", "max_int_digits", "max_unanswered", "max_unsent", "inline_bytes",
                     "max_held"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"limit {name} is a positive whole number (got {value!r})")


@dataclass(frozen=True, slots=True)
class StreamTimeouts:
    """Seconds a stream connection may idle (owing no answer, streaming no watch; None: for ever), and take
    over one document, first byte to end line."""

    idle: float | None = 300.0
    document: float = 30.0

    def __post_init__(self) -> None:
        for name in ("idle", "document"):
            value = getattr(self, name)
            if value is None and name == "idle":
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise ValueError(f"stream timeout {name} is a positive number of seconds (got {value!r})")


@dataclass(frozen=True, slots=True)
class TooLarge:
    """A document that outgrew :attr:`WireLimits.max_bytes` on its way in; its bytes were dropped.

    ``size`` is how many bytes had arrived when it was given up on: at least that many. ``overloaded``:
    it was given up on because a :class:`ByteBudget` was spent, not for its own size; ``spent`` names it.
    """

    size: int
    overloaded: bool = False
    spent: str = "max_buffered_bytes"


def refuse_size(document: TooLarge, limits: WireLimits) -> LogdError:
    """The one refusal of a document too large to read (or dropped because the server's buffers were full)."""
    if document.overloaded:
        return Unavailable(f"the server's buffers are full ({document.spent} spent): a document of "
                           f"{document.size} bytes or more was dropped; send it again later")
    return InvalidDocument(f"document is {document.size} bytes or more; at most {limits.max_bytes}")


class ByteBudget:
    """The bytes every connection of a process may hold buffered at once (unfinished documents, HTTP bodies).

    :meth:`take` reserves bytes, or says no when the limit would be passed; :meth:`give` returns them.
    Thread-safe (a logd's stream and HTTP servers share one).
    ``name`` is how a refusal names it (the option or limit that sets it).
    """

    def __init__(self, limit: int = 256 * 1024 * 1024, name: str = "max_buffered_bytes") -> None:
        if not isinstance(limit, int) or limit < 1:
            raise ValueError(f"a byte budget is a positive number of bytes (got {limit!r})")
        self.limit, self.used, self.name = limit, 0, name
        self._lock = threading.Lock()

    def take(self, size: int) -> bool:
        with self._lock:
            if self.used + size > self.limit:
                return False
            self.used += size
            return True

    def give(self, size: int) -> None:
        with self._lock:
            self.used -= size

    def short(self, size: int) -> str | None:
        """Take ``size``: None when taken, else the budget that said no, named with its limit."""
        return None if self.take(size) else f"{self.name} ({self.limit} bytes)"


class Budgets:
    """Several :class:`ByteBudget` drawn on as one (a connection's own and the process's): all or none."""

    def __init__(self, budgets: Iterable[ByteBudget]) -> None:
        self.budgets = tuple(budgets)

    def take(self, size: int) -> bool:
        return self.short(size) is None

    def short(self, size: int) -> str | None:
        """Take ``size`` from every budget: None when taken, else the name of the first that said no (the
        others are given back what they gave)."""
        for index, budget in enumerate(self.budgets):
            spent = budget.short(size)
            if spent is not None:
                for taken in self.budgets[:index]:
                    taken.give(size)
                return spent
        return None

    def give(self, size: int) -> None:
        for budget in self.budgets:
            budget.give(size)


def loaded_size(value: object) -> int:
    """The bytes a loaded document's Python objects take (``sys.getsizeof`` of each; None, booleans and small
    integers are shared singletons and weigh nothing; other shared objects count each time they appear: an
    upper bound); walked without recursion, so any depth is safe."""
    size, todo = 0, [value]
    while todo:
        item = todo.pop()
        if item is None or item is True or item is False or (type(item) is int and -5 <= item <= 256):
            continue
        size += sys.getsizeof(item)
        if isinstance(item, dict):
            todo.extend(item.keys())
            todo.extend(item.values())
        elif isinstance(item, (list, tuple, set, frozenset)):
            todo.extend(item)
    return size


def check_digits(text: str, limits: WireLimits) -> None:
    """Refuse an integer's text with more digits than :attr:`WireLimits.max_int_digits`, before converting it.

    Raises:
        LimitExceeded: naming the limit.
    """
    digits = len(text) - (text[:1] in ("-", "+"))
    if digits > limits.max_int_digits:
        raise LimitExceeded(f"an integer of {digits} digits; the limit max_int_digits is {limits.max_int_digits}")
