"""The size bounds of one document, and what a transport holds when a document outgrew them.

A transport reads at most :attr:`Limits.max_bytes` of a document before giving up on it:
the stream's :class:`~retain.wire.framing.Framer` drops the rest as it arrives, HTTP stops
reading the body. Either hands on a :class:`TooLarge` in the document's place, answered
with one refusal (:func:`refuse_size`); the loader checks size and depth again itself.

Every connection of a server also draws on one :class:`ByteBudget`: the bytes of unfinished
documents (and HTTP bodies) buffered across the whole process. A document that would push
it past its limit is dropped like an oversized one and answered ``unavailable``
(:class:`~retain.errors.Unavailable`): the server refuses new work rather than grow
(issue 13, finding 3: 30 connections sending 15 MiB each had added 450 MB).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from retain.errors import InvalidDocument, LimitExceeded, LogdError, Unavailable

__all__ = ["ByteBudget", "Limits", "StreamTimeouts", "TooLarge", "check_digits", "refuse_size"]


@dataclass(frozen=True, slots=True)
class Limits:
    """Bounds on one document: its size in bytes, how deeply collections nest, how many digits an integer has.

    ``max_int_digits`` is checked before the digits are converted (Python's int() of a long digit string is
    quadratic; past 4,300 digits it raises), so a hostile integer costs no more than reading it.
    """

    max_bytes: int = 16 * 1024 * 1024
    max_depth: int = 64
    max_int_digits: int = 64
    max_unanswered: int = 64  # requests a stream connection may have read ahead of the answers it took
    max_unsent: int = 64 * 1024 * 1024  # bytes of pushed documents (a watch's deltas) left unread: then closed


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
    """A document that outgrew :attr:`Limits.max_bytes` on its way in; its bytes were dropped.

    ``size`` is how many bytes had arrived when it was given up on: at least that many. ``overloaded``:
    it was given up on because the process's :class:`ByteBudget` was spent, not for its own size.
    """

    size: int
    overloaded: bool = False


def refuse_size(document: TooLarge, limits: Limits) -> LogdError:
    """The one refusal of a document too large to read (or dropped because the server's buffers were full)."""
    if document.overloaded:
        return Unavailable(f"the server's buffers are full: a document of {document.size} bytes or more was "
                           "dropped; send it again later")
    return InvalidDocument(f"document is {document.size} bytes or more; at most {limits.max_bytes}")


class ByteBudget:
    """The bytes every connection of a process may hold buffered at once (unfinished documents, HTTP bodies).

    :meth:`take` reserves bytes, or says no when the limit would be passed; :meth:`give` returns them.
    Thread-safe (a logd's stream and HTTP servers share one).
    """

    def __init__(self, limit: int = 256 * 1024 * 1024) -> None:
        if not isinstance(limit, int) or limit < 1:
            raise ValueError(f"a byte budget is a positive number of bytes (got {limit!r})")
        self.limit, self.used = limit, 0
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


def check_digits(text: str, limits: Limits) -> None:
    """Refuse an integer's text with more digits than :attr:`Limits.max_int_digits`, before converting it.

    Raises:
        LimitExceeded: naming the limit.
    """
    digits = len(text) - (text[:1] in ("-", "+"))
    if digits > limits.max_int_digits:
        raise LimitExceeded(f"an integer of {digits} digits; the limit max_int_digits is {limits.max_int_digits}")
