"""Seeing a gap between the archive and the live stream: entries that are in neither (INV-NOSILENTGAP).

A merge-read serves ids up to W from the archive and the rest from the live
stream. If the live stream lost entries above W — trimmed by hand past W, or
the archive lost its newest commit so that W went back — those entries are in
neither tier and a read would skip them in silence.

``XINFO STREAM``'s ``max-deleted-entry-id`` cannot tell: Redis updates it on
XDEL only, never on XTRIM (measured on Redis 7.0). What does tell is a count.
Redis ≥ 7 counts every entry ever added to a stream (``entries-added``); when
nothing was ever XDELed from it (``max-deleted-entry-id`` is ``0-0``) the live
stream holds exactly the last ``length`` of them, so its first entry is the
``entries-added - length + 1``-th ever added. The archive keeps, beside W,
W's own ordinal ``n`` (the app transaction ``<key>/n``), advanced by every
fold by the entries it archived. Entries ``n + 1 .. first - 1`` are then in
neither tier: a gap of ``first - 1 - n`` entries, raised as
:class:`~retain.errors.ArchiveGap`.

No check is made (and no gap reported) when it cannot be sound: Redis 6.2
(no ``entries-added``), a stream something XDELed from, a W whose ordinal the
archive does not know (folded before this check existed, or written by
``retain archive migrate``: it becomes known once a fold starts at the live
stream's first entry).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import redis

from retain._nodes import send_all
from retain._redis import REDIS_ERRORS, as_retain_error, translate_errors
from retain.errors import ArchiveGap, RetainError
from retain.ids import StreamId

__all__ = ["LiveInfo", "gap", "live_info", "live_infos", "next_ordinal"]

_NONE = StreamId(0, 0)


@dataclass(frozen=True)
class LiveInfo:
    """What ``XINFO STREAM`` says of a live stream that the gap check needs (Redis ≥ 7)."""

    #: entries ever added to the stream (None: Redis < 7 does not say)
    added: int | None
    length: int
    #: the first live entry's id (None: the stream is empty)
    first: StreamId | None
    #: the highest id ever XDELed (0-0: never)
    max_deleted: StreamId

    @property
    def countable(self) -> bool:
        """True when the live stream is exactly the last ``length`` entries added: nothing was ever XDELed."""
        return self.added is not None and self.max_deleted == _NONE

    @property
    def first_ordinal(self) -> int:
        """The ordinal of the first live entry (``added + 1`` when the stream is empty); 0 when unknown."""
        return self.added - self.length + 1 if self.added is not None else 0


def _field(answer: Mapping[Any, Any], name: str) -> Any:
    return answer.get(name, answer.get(name.encode()))


def _parsed(answer: Any) -> LiveInfo | None:
    """The check's view of one XINFO STREAM answer (Redis < 7: its length and first entry only)."""
    if isinstance(answer, list):  # redis-py 5.3 (the floor) leaves a pipelined XINFO STREAM unparsed: pairs
        answer = dict(zip(answer[::2], answer[1::2]))
    if not isinstance(answer, Mapping):
        return None
    added, deleted = _field(answer, "entries-added"), _field(answer, "max-deleted-entry-id")
    first = _field(answer, "first-entry")
    first_id = StreamId.parse(first[0]) if first else None
    return LiveInfo(int(added) if added is not None else None, int(_field(answer, "length")), first_id,
                    StreamId.parse(deleted) if deleted is not None else _NONE)


def live_info(conn: Any, key: str) -> LiveInfo | None:
    """XINFO STREAM of ``key`` as the check needs it; None when there is no such stream.

    Raises:
        ServerUnavailable, AuthenticationError: from Redis.
    """
    return live_infos(conn, [key])[key]


def live_infos(conn: Any, keys: Sequence[str], *,
               failed: dict[str, RetainError] | None = None) -> dict[str, LiveInfo | None]:
    """:func:`live_info` of every key, in one pipeline (one per node on a cluster).

    A key that holds no stream (or none at all) is None: the fold reports that itself. With ``failed``, a
    key whose node could not answer goes there (and not into the result) instead of failing every key.

    Raises:
        ServerUnavailable, AuthenticationError: the pipeline could not run (or, without ``failed``, a node).
    """
    if not keys:
        return {}
    with translate_errors():
        answers = send_all(conn, [("XINFO", "STREAM", key) for key in keys])
    found: dict[str, LiveInfo | None] = {}
    for key, answer in zip(keys, answers):
        if isinstance(answer, redis.exceptions.ResponseError):
            found[key] = None
        elif isinstance(answer, (*REDIS_ERRORS, RetainError)):
            error = answer if isinstance(answer, RetainError) else as_retain_error(answer, key)
            if failed is None:
                raise error
            failed[key] = error
        else:
            found[key] = _parsed(answer)
    return found


def gap(key: str, info: LiveInfo | None, watermark: StreamId | None, ordinal: int) -> ArchiveGap | None:
    """The gap between the archive (W and its ordinal) and the live stream, or None when there is none
    or it cannot be known (see the module docstring).

    ``info`` must have been read **before** W and its ordinal: both only grow, so a fold between the two
    reads can hide a gap for this call, never invent one.
    """
    if info is None or not info.countable or watermark is None or ordinal <= 0:
        return None
    assert info.added is not None  # countable
    missing = info.first_ordinal - 1 - ordinal
    if missing <= 0:
        return None
    starts = f"starts at {info.first}" if info.first is not None else "is empty"
    return ArchiveGap(f"stream {key!r}: {missing} entries after the archive's W {watermark} (entry #{ordinal} "
                      f"of {info.added} ever added) are neither archived nor live (the live stream now {starts}): "
                      "it was trimmed past what the archive holds, or the archive lost a commit; a merge-read "
                      "would skip them, so it refuses (`retain archive verify` checks the whole archive)")


def next_ordinal(info: LiveInfo | None, before: StreamId | None, ordinal: int, folded: int) -> int:
    """W's ordinal after a fold that archived ``folded`` entries after W ``before`` (whose ordinal is
    ``ordinal``, 0 when unknown); 0 when it cannot be known.

    Known from the old one, or, when the fold started at the live stream's first entry (nothing archived
    yet, or everything archived already trimmed), from ``info``: the entries before it were added and
    are gone, so the last one folded is ``added - length + folded``-th.
    """
    if info is None or not info.countable:
        return 0
    if ordinal > 0:
        return ordinal + folded
    if info.first is not None and (before is None or before < info.first):
        return info.first_ordinal - 1 + folded
    return 0
