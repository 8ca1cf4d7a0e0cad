"""The size bounds of one document, and what a transport holds when a document outgrew them.

A transport reads at most :attr:`Limits.max_bytes` of a document before giving up on it:
the stream's :class:`~retain.wire.framing.Framer` drops the rest as it arrives, HTTP stops
reading the body. Either hands on a :class:`TooLarge` in the document's place, answered
with one refusal (:func:`refuse_size`); the loader checks size and depth again itself.
"""

from __future__ import annotations

from dataclasses import dataclass

from retain.errors import InvalidDocument

__all__ = ["Limits", "TooLarge", "refuse_size"]


@dataclass(frozen=True, slots=True)
class Limits:
    """Bounds on one document: its size in bytes and how deeply collections nest."""

    max_bytes: int = 16 * 1024 * 1024
    max_depth: int = 64


@dataclass(frozen=True, slots=True)
class TooLarge:
    """A document that outgrew :attr:`Limits.max_bytes` on its way in; its bytes were dropped.

    ``size`` is how many bytes had arrived when it was given up on: at least that many.
    """

    size: int


def refuse_size(document: TooLarge, limits: Limits) -> InvalidDocument:
    """The one refusal of a document too large to read."""
    return InvalidDocument(f"document is {document.size} bytes or more; at most {limits.max_bytes}")
