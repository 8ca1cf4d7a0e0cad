"""Documents on a stream (TCP or Unix socket): each ends with a line ``...``, both ways.

``...`` is the YAML document end marker, so a framed stream is a YAML stream too.
:func:`frame` writes one document so; :class:`Framer` splits a byte stream on it, with
bounded memory.
"""

from __future__ import annotations

from typing import Any

from retain.wire.bounds import ByteBudget, TooLarge
from retain.wire.documents import Format, dump

__all__ = ["END", "Framer", "frame"]

END = b"...\n"  # the line that ends a document on a stream


def frame(value: Any, fmt: Format) -> bytes:
    """One document as it travels on a stream: the document, then the end line."""
    return dump(value, fmt) + END


class Framer:
    """Split a byte stream into documents, each ended by a line ``...``; memory stays bounded.

    A document longer than ``max_bytes`` is dropped as it arrives and reported as
    :class:`~retain.wire.bounds.TooLarge` when its end line comes, so the stream stays in step.
    With a ``budget`` the bytes held are reserved from it; a document that cannot be reserved is
    dropped the same way and reported ``TooLarge(overloaded=True)``. :meth:`close` gives them back.
    """

    def __init__(self, max_bytes: int, budget: ByteBudget | None = None) -> None:
        self.max_bytes, self.budget = max_bytes, budget
        self._buffer = bytearray()
        self._dropped = 0  # bytes of an oversized document dropped so far
        self._overloaded = False  # the document being dropped is dropped for want of budget
        self._held = 0  # bytes reserved from the budget

    @property
    def unfinished(self) -> bool:
        """Whether part of a document has arrived without its end line."""
        return bool(self._dropped) or bool(self._buffer)

    def close(self) -> None:
        """Give back what the buffer held; the framer is done with."""
        self._buffer.clear()
        self._charge()

    def feed(self, data: bytes) -> list[bytes | TooLarge]:
        found = self._feed(data)
        if not self._charge():
            self._overloaded = True
            keep = len(END)  # an end line may straddle the next chunk
            self._dropped += max(len(self._buffer) - keep, 0)
            del self._buffer[:-keep]
            self._charge()
        return found

    def _charge(self) -> bool:
        """Reserve (or give back) the difference between what the buffer holds and what is reserved."""
        if self.budget is None:
            return True
        change = len(self._buffer) - self._held
        if change > 0 and not self.budget.take(change):
            return False
        if change < 0:
            self.budget.give(-change)
        self._held += change
        return True

    def _feed(self, data: bytes) -> list[bytes | TooLarge]:
        self._buffer += data
        found: list[bytes | TooLarge] = []
        while True:
            end = self._end()
            if end is None:
                break
            start, stop = end
            document = bytes(self._buffer[:start])
            del self._buffer[:stop]
            if self._dropped:
                found.append(TooLarge(self._dropped + len(document), overloaded=self._overloaded))
                self._dropped, self._overloaded = 0, False
            elif len(document) > self.max_bytes:
                found.append(TooLarge(len(document)))
            else:
                found.append(document)
        if len(self._buffer) > self.max_bytes + len(END):
            keep = len(END)  # an end line may straddle the next chunk
            self._dropped += len(self._buffer) - keep
            del self._buffer[:-keep]
        return found

    def _end(self) -> tuple[int, int] | None:
        if self._buffer.startswith(END):
            return 0, len(END)
        index = self._buffer.find(b"\n" + END)
        return None if index < 0 else (index + 1, index + 1 + len(END))
