"""Documents on a stream (TCP or Unix socket): each ends with a line ``...``, both ways.

``...`` is the YAML document end marker, so a framed stream is a YAML stream too.
:func:`frame` writes one document so; :class:`Framer` splits a byte stream on it, with
bounded memory.
"""

from __future__ import annotations

from typing import Any

from retain.wire.bounds import TooLarge
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
    """

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._buffer = bytearray()
        self._dropped = 0  # bytes of an oversized document dropped so far

    def feed(self, data: bytes) -> list[bytes | TooLarge]:
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
                found.append(TooLarge(self._dropped + len(document)))
                self._dropped = 0
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
