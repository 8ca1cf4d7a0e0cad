"""Catch-up: a consumer group that fell behind a trim of an archived stream gets back what it missed.

The live stream only lost ids at or below the archive's watermark W (INV-FOLD),
so a group whose last-delivered id is below W finds the entries it was never
delivered in the archive (and the live stream, for those not trimmed yet: the
merge-read serves both). :func:`catch_up` yields them in id order, then moves
the group's last-delivered id to W with ``XGROUP SETID``, so that
``XREADGROUP ... >`` continues with the live entries after W.

Why no gap at the hand-over: a trim only removes ids at or below the W of its
time. After the SETID, W is read again: if it did not move, no trim can yet
have removed an id above the W the group now stands at, so every entry after
it is still live. If it moved (a beat folded meanwhile), the entries up to the
new W are yielded too and the group moved again, until W stands still.

At-least-once: the group is only moved after the entries before it were
yielded (the caller processed them); a caller that crashes half-way runs
catch-up again and gets the rest, perhaps some twice. Run it while the group's
consumers are stopped: a consumer reading meanwhile could have its position
moved back to W (entries after W delivered again, never lost).

A pending entry whose stream entry was trimmed (``XCLAIM`` returns nothing for
it) is read from the archive by id: ``read(conn, stream, archive, entry_id, entry_id)``.

Example:
    >>> for entry_id, fields in catch_up(conn, StreamRef("codemojex", "jobs"), "workers", archive):
    ...     handle(entry_id, fields)
    >>> conn.xreadgroup("workers", "w1", {"emq:{codemojex}:stream:jobs": ">"})   # the live tail
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from retain._redis import RedisLike, translate_errors
from retain.archive.columns import Entry
from retain.archive.read import DEFAULT_COUNT, read
from retain.archive.table import Archive
from retain.errors import InvalidInput, InvalidStreamId
from retain.ids import StreamId
from retain.streams.keys import Stream, key_of

__all__ = ["catch_up", "last_delivered"]


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def last_delivered(conn: RedisLike, key: str, group: str) -> StreamId:
    """The group's last-delivered id, from ``XINFO GROUPS``.

    Raises:
        InvalidInput: the stream has no such group.
        WrongTypeError, ServerError, ServerUnavailable: from Redis (a missing stream is a ServerError).
    """
    with translate_errors(key):
        answer = conn.execute_command("XINFO", "GROUPS", key)
    for item in answer or ():
        fields = item if isinstance(item, Mapping) else dict(zip(item[::2], item[1::2], strict=False))
        fields = {_text(name): value for name, value in fields.items()}
        if _text(fields.get("name")) == group:
            try:
                return StreamId.parse(_text(fields["last-delivered-id"]))
            except (InvalidStreamId, KeyError):
                return StreamId(0, 0)
    raise InvalidInput(f"stream {key!r} has no consumer group {group!r}: create it with XGROUP CREATE, "
                       "or name one of its groups (XINFO GROUPS)")


def catch_up(conn: RedisLike, stream: Stream, group: str, archive: Archive, *,
             count: int = DEFAULT_COUNT) -> Iterator[Entry]:
    """Yield what ``group`` was never delivered up to the archive's W, in id order; then move it to W.

    Entries come as ``conn.xrange`` returns them. Nothing is yielded (and the
    group not moved) when the group is at or past W, or nothing is archived.

    Raises:
        InvalidStreamName, InvalidInput: a malformed stream, group or count, before any I/O.
        InvalidInput: the stream has no such group.
        WrongTypeError, ServerError, ServerUnavailable, ArchiveError: while iterating.
    """
    key = key_of(stream)
    if not isinstance(group, str) or not group:
        raise InvalidInput(f"group must be a consumer group's name, a non-empty string (got {group!r})")
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise InvalidInput(f"count must be an int >= 1 (got {count!r})")
    return _catch_up(conn, stream, key, group, archive, count)


def _catch_up(conn: RedisLike, stream: Stream, key: str, group: str, archive: Archive, count: int) -> Iterator[Entry]:
    position = last_delivered(conn, key, group)
    while True:
        watermark = archive.watermark(stream)
        if watermark is None or watermark <= position:
            return
        yield from read(conn, stream, archive, position.successor(), watermark, count=count)
        with translate_errors(key):
            conn.execute_command("XGROUP", "SETID", key, group, str(watermark))
        position = watermark
