"""The trim verb: one XTRIM, issued direct, that removes what lies outside a window.

:func:`xtrim_command` is the pure decision (which words go on the wire);
:func:`trim` and :func:`atrim` are the sync and asyncio twins that send it.
Everything is validated before the first byte is written: a malformed stream
or window never reaches the server.
"""

from __future__ import annotations

from datetime import datetime

from retain import _fields
from retain._fields import Where
from retain._redis import AsyncRedisLike, RedisLike, translate_errors
from retain.clock import utc_now
from retain.errors import InvalidWindow
from retain.streams.keys import Stream, key_of
from retain.windows import MaxAge, MaxLen, MinId, MinStreamId, Window, require_aware

__all__ = ["atrim", "trim", "xtrim_command"]


def xtrim_command(stream: Stream, window: Window, now: datetime | None = None, *,
                  limit: int | None = None) -> tuple[str, ...]:
    """The XTRIM command that applies ``window`` to ``stream``: pure, no I/O.

    A :class:`MaxAge` is resolved against ``now``, which it then requires.
    ``limit`` caps the entries one ``~`` trim removes (``LIMIT n``; 0: no cap).
    None sends no LIMIT, so the server's own cap applies: 100 x
    ``stream-node-max-entries`` (10,000 by default). It never cuts inside a
    node, so ``~`` still cannot reach inside the window. An exact (``=``) trim
    has no cap and takes no LIMIT (the server refuses one): none is sent.

    Raises:
        InvalidStreamName: ``stream`` is not a StreamRef or RawKey.
        InvalidWindow: ``window`` is not a window, or ``now`` is missing or naive for MaxAge,
            or ``limit`` is not None or an int >= 0.
    """
    key = key_of(stream)
    check_limit(limit)
    if isinstance(window, MaxAge):
        if now is None:
            raise InvalidWindow("a MaxAge window needs now= to resolve against")
        window = window.resolve(require_aware(now, "now"))
    approx = bool(getattr(window, "approx", None))
    flag = "~" if approx else "="
    if isinstance(window, MaxLen):
        command: tuple[str, ...] = ("XTRIM", key, "MAXLEN", flag, str(window.count))
    elif isinstance(window, (MinId, MinStreamId)):
        command = ("XTRIM", key, "MINID", flag, window.floor)
    else:
        raise InvalidWindow(f"window must be MaxLen, MinId, MaxAge or MinStreamId (got {window!r})")
    return command + ("LIMIT", str(limit)) if approx and limit is not None else command


def check_limit(limit: object) -> None:
    """Refuse a ``limit`` that is neither None nor a whole number >= 0 (:class:`InvalidWindow`)."""
    if limit is not None:
        _fields.whole_number(limit, "limit", Where("", InvalidWindow))


def trim(conn: RedisLike, stream: Stream, window: Window, *, now: datetime | None = None,
         limit: int | None = None) -> int:
    """Trim ``stream`` to ``window`` with one XTRIM; return how many entries it removed.

    ``now`` resolves a :class:`MaxAge`; it defaults to the current UTC time.
    ``limit`` caps what one ``~`` trim removes (0: no cap; None: the server's
    cap, see :func:`xtrim_command`). A missing key removes 0.

    Raises:
        InvalidStreamName, InvalidWindow: before anything is sent.
        WrongTypeError: the key holds something other than a stream.
        ServerError: any other refusal, with the server's message.
        ServerUnavailable: the server could not be reached.

    Example:
        >>> trim(conn, StreamRef("codemojex", "activity"), MaxLen(10_000))
        0
    """
    command = xtrim_command(stream, window, _clock(window, now), limit=limit)
    with translate_errors(stream.key):
        return int(conn.execute_command(*command))


async def atrim(conn: AsyncRedisLike, stream: Stream, window: Window, *, now: datetime | None = None,
                limit: int | None = None) -> int:
    """The asyncio twin of :func:`trim`, for a ``redis.asyncio`` connection."""
    command = xtrim_command(stream, window, _clock(window, now), limit=limit)
    with translate_errors(stream.key):
        return int(await conn.execute_command(*command))


def _clock(window: Window, now: datetime | None) -> datetime | None:
    # This is the entry point that owns the clock for a caller who passed none.
    if now is None and isinstance(window, MaxAge):
        return utc_now()
    return now
