"""The size bounds of one document, and what a transport holds when a document outgrew them.

A transport reads at most :attr:`Limits.max_bytes` of a document before giving up on it:
the stream's :class:`~retain.wire.framing.Framer` drops the rest as it arrives, HTTP stops
reading the body. Either hands on a :class:`TooLarge` in the document's place, answered
with one refusal (:func:`refuse_size`); the loader checks size and depth again itself.
"""

from __future__ import annotations

from dataclasses import dataclass

from retain.errors import InvalidDocument, LimitExceeded

__all__ = ["Limits", "TooLarge", "check_digits", "refuse_size"]


@dataclass(frozen=True, slots=True)
class Limits:
    """Bounds on one document: its size in bytes, how deeply collections nest, how many digits an integer has.

    ``max_int_digits`` is checked before the digits are converted (Python's int() of a long digit string is
    quadratic; past 4,300 digits it raises), so a hostile integer costs no more than reading it.
    """

    max_bytes: int = 16 * 1024 * 1024
    max_depth: int = 64
    max_int_digits: int = 64


@dataclass(frozen=True, slots=True)
class TooLarge:
    """A document that outgrew :attr:`Limits.max_bytes` on its way in; its bytes were dropped.

    ``size`` is how many bytes had arrived when it was given up on: at least that many.
    """

    size: int


def refuse_size(document: TooLarge, limits: Limits) -> InvalidDocument:
    """The one refusal of a document too large to read."""
    return InvalidDocument(f"document is {document.size} bytes or more; at most {limits.max_bytes}")


def check_digits(text: str, limits: Limits) -> None:
    """Refuse an integer's text with more digits than :attr:`Limits.max_int_digits`, before converting it.

    Raises:
        LimitExceeded: naming the limit.
    """
    digits = len(text) - (text[:1] in ("-", "+"))
    if digits > limits.max_int_digits:
        raise LimitExceeded(f"an integer of {digits} digits; the limit max_int_digits is {limits.max_int_digits}")
