"""Where a length window's edge lies, read in one command that no other client can split.

A trim by length that must become a ``MINID`` (an archived stream is trimmed
only past what is archived; a protected one only below what its groups need)
first needs the *boundary*: the highest id outside ``MaxLen(n)``, the
``n + 1``-th newest entry. Read in two steps -- ``XLEN``, then the
``len - n`` oldest entries -- it is wrong whenever another client removes
entries from the head in between (a second replica's trim, a consumer's
``XDEL``, a producer's ``XADD ... MAXLEN``): every entry removed between the
two commands moves the boundary that far into the window.

So the boundary is read in **one** command, which Redis runs atomically, in
one of two forms (:func:`boundary_read` picks the cheaper for the length it
expects):

- ``XREVRANGE key + - COUNT n+1``: about the newest end, so nothing removed
  from the head can move it. Its cost is ``n + 1`` entries;
- ``XINFO STREAM key FULL COUNT k``: the stream's length and its ``k`` oldest
  entries in the same answer. With ``L`` the length, the ``L - n`` oldest lie
  outside the window: the boundary is the ``min(k, L - n)``-th oldest. Its
  cost is about ``k``, the entries a fold reads anyway.

Why a boundary read this way never lands inside the window, whatever other
clients do afterwards (INV-WINDOW): at the instant the command runs, every
entry above the boundary is one of the ``n`` newest. After it, appends only
add newer entries; removals by others (a trim, an ``XDEL``) only take entries
away. A trim at ``MINID`` just past the boundary removes no entry above it,
so it never removes one that the window held when the boundary was read, nor
one appended since. (An entry that enters the ``n`` newest only because
another client deleted newer ones was outside the window when it was read:
that window shrank by the other client's deletes, not by this trim.)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import redis.exceptions

from retain._redis import RedisLike, translate_errors
from retain.ids import StreamId

__all__ = ["BoundaryRead", "boundary_read", "first_kept", "read_boundary"]

#: what ``XINFO STREAM`` answers for a key that does not exist
_MISSING = "no such key"


@dataclass(frozen=True)
class BoundaryRead:
    """One command that finds the highest id outside ``MaxLen(count)`` of ``key``, and how to read its answer."""

    key: str
    count: int
    command: tuple[str, ...]

    def boundary(self, answer: Any) -> StreamId | None:
        """The highest id outside the window when the command ran; None when the window held every entry.

        A boundary below the true one (a stream that grew past what the command
        read) is still outside the window: the trim then under-trims, never over-trims.
        ``XINFO STREAM`` of a missing key answers an error: no stream, nothing outside.
        Any other error answer is raised.
        """
        if isinstance(answer, BaseException):
            if _MISSING in str(answer):
                return None
            raise answer
        if self.command[0] == "XREVRANGE":
            return _id(answer[self.count][0]) if len(answer) > self.count else None
        info = _as_mapping(answer)
        length = int(_field(info, "length"))
        entries: Sequence[Any] = _field(info, "entries") or ()
        outside = min(length - self.count, len(entries))
        return _id(entries[outside - 1][0]) if outside > 0 else None


def boundary_read(key: str, count: int, expected_length: int | None) -> BoundaryRead | None:
    """The command that reads the boundary of ``MaxLen(count)`` on ``key``; None when nothing can be outside.

    ``expected_length`` is what the caller last saw of the stream's length
    (``XINFO STREAM``, ``XLEN``): only the choice of command and its cost
    depend on it, never whether the answer is right. None (unknown) reads
    from the newest end. A length at or below ``count`` reads nothing: the
    window then holds the stream as the caller saw it (an under-trim at worst,
    put right by the next beat).
    """
    if expected_length is not None:
        outside = expected_length - count
        if outside <= 0:
            return None
        if outside <= count + 1:
            return BoundaryRead(key, count, ("XINFO", "STREAM", key, "FULL", "COUNT", str(outside)))
    return BoundaryRead(key, count, ("XREVRANGE", key, "+", "-", "COUNT", str(count + 1)))


def read_boundary(conn: RedisLike, key: str, count: int, expected_length: int | None = None) -> StreamId | None:
    """The highest id outside ``MaxLen(count)`` of ``key`` now, read in one command; None if none is outside.

    Raises:
        WrongTypeError, ServerError, ServerUnavailable: from Redis.

    Example:
        >>> read_boundary(conn, "emq:{codemojex}:stream:activity", 10_000)
        StreamId(ms=1789171200000, seq=4)
    """
    read = boundary_read(key, count, expected_length)
    if read is None:
        return None
    with translate_errors(key):
        try:
            answer = conn.execute_command(*read.command)
        except redis.exceptions.ResponseError as exc:
            answer = exc
        return read.boundary(answer)


def first_kept(boundary: StreamId | None) -> StreamId | None:
    """The ``MINID`` floor that removes every id up to ``boundary`` and nothing above it (None: remove nothing)."""
    return boundary.successor() if boundary is not None else None


def _id(value: Any) -> StreamId:
    return StreamId.parse(value)


def _as_mapping(answer: Any) -> Mapping[Any, Any]:
    """``XINFO STREAM FULL`` as a mapping: RESP3 sends one, RESP2 a flat list of names and values."""
    if isinstance(answer, Mapping):
        return answer
    return dict(zip(answer[::2], answer[1::2], strict=False))


def _field(answer: Mapping[Any, Any], name: str) -> Any:
    return answer.get(name, answer.get(name.encode()))
