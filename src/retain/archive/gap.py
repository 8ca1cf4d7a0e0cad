"""Seeing a gap between the archive and the live stream: entries that are in neither (INV-NOSILENTGAP).

A merge-read serves ids up to W from the archive and the rest from the live
stream. If the live stream lost entries above W — trimmed by hand past W, or
the archive lost its newest commits so that W went back — those entries are in
neither tier and a read would skip them in silence. Three facts tell, each
read **before** W (W only grows and a trim only removes entries, so a fold and
a trim between the reads can hide a gap for one call, never invent one):

- **The live stream still reaches W** (its first entry is at or below W):
  nothing after W was trimmed, since a trim takes entries from the head. No
  gap, whatever was XDELed.
- **The count.** Redis ≥ 7 counts every entry ever added to a stream
  (``entries-added``). The archive keeps, beside W, W's own ordinal ``n`` (the
  app transaction ``<key>/n``: W was the n-th entry ever added). When no XDEL
  went above W (``max-deleted-entry-id`` ≤ W) every entry added after W was
  either trimmed or is live, so ``entries-added - n - length`` of them are in
  neither tier. (``max-deleted-entry-id`` moves on XDEL only, never on XTRIM:
  it tells deletes from trims, not how many.)
- **The trim mark.** Each fold-then-trim that advanced W leaves W in one
  Redis hash per archive table (``retain:archive:<table id>:trimmed``, a
  field per stream, written after the commit). A mark above the archive's W
  while the stream no longer reaches W says the archive lost commits whose
  entries the trims then removed — whatever was XDELed, and on Redis 6.2 too.

Either is raised as :class:`~retain.errors.ArchiveGap`. What none can tell —
a trim past W by hand on a stream something XDELed above W, on Redis 6.2, or
for a W whose ordinal the archive does not know (folded before this check
existed, or migrated: it becomes known again once a fold starts at the live
stream's first entry) — ``retain archive verify`` names as unverifiable, and
why (:func:`unverifiable`). A fold keeps W's ordinal through XDELs at or
below the W it starts from, and re-reads the counters after its reads so that
an XDEL during them does not leave a wrong ordinal (:func:`next_ordinal`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import redis

from retain._nodes import send_all
from retain._redis import REDIS_ERRORS, RedisLike, as_retain_error, translate_errors
from retain.errors import ArchiveGap, RetainError
from retain.ids import StreamId

__all__ = ["LiveInfo", "gap", "live_info", "live_infos", "mark_commands", "mark_trimmed", "marks_key",
           "next_ordinal", "unverifiable"]

log = logging.getLogger(__name__)

_NONE = StreamId(0, 0)


@dataclass(frozen=True)
class LiveInfo:
    """What ``XINFO STREAM`` (and the archive's trim mark) say of a live stream that the gap check needs."""

    #: entries ever added to the stream (None: Redis < 7 does not say)
    added: int | None
    length: int
    #: the first live entry's id (None: the stream is empty)
    first: StreamId | None
    #: the highest id ever XDELed (0-0: never)
    max_deleted: StreamId
    #: the W the archive's last fold-then-trim of the stream committed (None: no mark, or it was not read)
    trimmed_to: StreamId | None = None

    @property
    def first_ordinal(self) -> int:
        """The ordinal of the first live entry (``added + 1`` when the stream is empty); 0 when unknown."""
        return self.added - self.length + 1 if self.added is not None else 0

    def deleted_above(self, watermark: StreamId | None) -> bool:
        """True when some XDEL removed an entry above ``watermark`` (None: any XDEL at all)."""
        return self.max_deleted != _NONE and (watermark is None or self.max_deleted > watermark)

    def reaches(self, watermark: StreamId | None) -> bool:
        """True when the live stream still holds an entry at or below ``watermark``: nothing after it was
        trimmed."""
        return watermark is not None and self.first is not None and self.first <= watermark


def _field(answer: Mapping[Any, Any], name: str) -> Any:
    return answer.get(name, answer.get(name.encode()))


def _parsed(answer: Any) -> LiveInfo | None:
    """The check's view of one XINFO STREAM answer (Redis < 7: its length and first entry only)."""
    if isinstance(answer, list):  # redis-py 5.3 (the floor) leaves a pipelined XINFO STREAM unparsed: pairs
        answer = dict(zip(answer[::2], answer[1::2], strict=False))
    if not isinstance(answer, Mapping):
        return None
    added, deleted = _field(answer, "entries-added"), _field(answer, "max-deleted-entry-id")
    first = _field(answer, "first-entry")
    first_id = StreamId.parse(first[0]) if first else None
    return LiveInfo(int(added) if added is not None else None, int(_field(answer, "length")), first_id,
                    StreamId.parse(deleted) if deleted is not None else _NONE)


def marks_key(table_id: str) -> str:
    """The Redis hash of the trim marks of the archive table ``table_id`` (its Delta metadata id)."""
    return f"retain:archive:{table_id}:trimmed"


def live_info(conn: RedisLike, key: str, table_id: str | None = None) -> LiveInfo | None:
    """XINFO STREAM of ``key`` as the check needs it (with the trim mark of ``table_id``); None when there is no
    such stream.

    Raises:
        ServerUnavailable, AuthenticationError: from Redis.
    """
    return live_infos(conn, [key], table_id=table_id)[key]


def live_infos(conn: RedisLike, keys: Sequence[str], *, table_id: str | None = None,
               failed: dict[str, RetainError] | None = None) -> dict[str, LiveInfo | None]:
    """:func:`live_info` of every key, in one pipeline (one per node on a cluster).

    A key that holds no stream (or none at all) is None: the fold reports that itself. With ``failed``, a
    key whose node could not answer goes there (and not into the result) instead of failing every key. Trim
    marks that cannot be read are left out (the check is then weaker, never wrong).

    Raises:
        ServerUnavailable, AuthenticationError: the pipeline could not run (or, without ``failed``, a node).
    """
    if not keys:
        return {}
    commands: list[tuple[str, ...]] = [("XINFO", "STREAM", key) for key in keys]
    if table_id is not None:
        commands.append(("HMGET", marks_key(table_id), *keys))
    with translate_errors():
        answers = send_all(conn, commands)
    marks = _marks(answers[len(keys)] if table_id is not None else None, keys)
    found: dict[str, LiveInfo | None] = {}
    for key, answer in zip(keys, answers, strict=False):
        if isinstance(answer, redis.exceptions.ResponseError):
            found[key] = None
        elif isinstance(answer, (*REDIS_ERRORS, RetainError)):
            error = answer if isinstance(answer, RetainError) else as_retain_error(answer, key)
            if failed is None:
                raise error
            failed[key] = error
        else:
            info = _parsed(answer)
            found[key] = replace(info, trimmed_to=marks.get(key)) if info is not None else None
    return found


def _marks(answer: Any, keys: Sequence[str]) -> dict[str, StreamId]:
    if not isinstance(answer, list):
        if isinstance(answer, BaseException):
            log.warning("the archive's trim marks could not be read (%s): the gap check goes without", answer)
        return {}
    marks = {}
    for key, mark in zip(keys, answer, strict=False):
        try:
            if mark is not None:
                marks[key] = StreamId.parse(mark)
        except RetainError:
            log.warning("the trim mark of %r is not a stream id (%r): ignored", key, mark)
    return marks


def mark_commands(table_id: str | None, trimmed: Mapping[str, StreamId]) -> list[tuple[str, ...]]:
    """The command that leaves each stream's W as its trim mark (to send once the commit of W is in, with the
    trims that follow it); none without a table or a stream."""
    if table_id is None or not trimmed:
        return []
    fields = [part for key, watermark in trimmed.items() for part in (key, str(watermark))]
    return [("HSET", marks_key(table_id), *fields)]


def mark_trimmed(conn: RedisLike, table_id: str | None, trimmed: Mapping[str, StreamId]) -> None:
    """Send :func:`mark_commands`; a mark that cannot be written is logged, not raised (the commit and the trim
    stand; the next check is weaker for it, never wrong)."""
    for command in mark_commands(table_id, trimmed):
        try:
            with translate_errors():
                conn.execute_command(*command)
        except RetainError as error:
            log.warning("the archive's trim marks could not be written (%s): the gap check goes without", error)


def gap(key: str, info: LiveInfo | None, watermark: StreamId | None, ordinal: int) -> ArchiveGap | None:
    """The gap between the archive (W and its ordinal) and the live stream, or None when there is none or it
    cannot be known (see the module docstring). ``info`` must have been read **before** W and its ordinal."""
    if info is None or info.reaches(watermark):
        return None
    missing = _missing(info, watermark, ordinal)
    starts = f"starts at {info.first}" if info.first is not None else "is empty"
    if missing is not None and missing > 0:
        return ArchiveGap(f"stream {key!r}: {missing} entries after the archive's W {watermark} (entry #{ordinal} "
                          f"of {info.added} ever added) are neither archived nor live (the live stream now "
                          f"{starts}): it was trimmed past what the archive holds, or the archive lost a commit; "
                          "a merge-read would skip them, so it refuses (`retain archive verify` checks the whole "
                          "archive)")
    if info.trimmed_to is not None and (watermark is None or info.trimmed_to > watermark):
        return ArchiveGap(f"stream {key!r}: the archive's W is {watermark} but its trims reached "
                          f"{info.trimmed_to}: the archive lost the commits in between, and the entries after "
                          f"its W that the live stream no longer holds (it now {starts}) are in neither tier; "
                          "a merge-read would skip them, so it refuses (`retain archive verify` checks the whole "
                          "archive)")
    return None


def _missing(info: LiveInfo, watermark: StreamId | None, ordinal: int) -> int | None:
    """Entries added after W that are neither live nor XDELed, when the counts can tell (see :func:`gap`)."""
    if info.added is None or watermark is None or ordinal <= 0 or info.deleted_above(watermark):
        return None
    return info.added - ordinal - info.length  # the live stream does not reach W: every live entry is after it


def unverifiable(info: LiveInfo | None, watermark: StreamId | None, ordinal: int) -> str | None:
    """Why :func:`gap` cannot rule out a trim past W by hand (None when it can, or there is nothing to check).

    A lost commit is still found by the trim mark; this names what is left unknown.
    """
    if info is None or watermark is None or info.reaches(watermark):
        return None
    if info.added is None:
        return "the server does not count the entries added to a stream (Redis before 7)"
    if ordinal <= 0:
        return ("the archive does not know which entry W was (folded before this check existed, or migrated); "
                "it will once a fold starts at the live stream's first entry")
    if info.deleted_above(watermark):
        return (f"an XDEL removed entries above W {watermark} (up to {info.max_deleted}) and the live stream no "
                "longer reaches W: counts cannot tell an entry deleted from one trimmed past the archive")
    return None


def next_ordinal(info: LiveInfo | None, later: LiveInfo | None, before: StreamId | None, ordinal: int,
                 folded: int) -> int:
    """W's ordinal after a fold that archived ``folded`` entries after W ``before`` (whose ordinal is
    ``ordinal``, 0 when unknown); 0 when it cannot be known.

    ``info`` was read before the fold's reads, ``later`` after them: an XDEL in between (the highest
    deleted id moved) may have taken an entry the count would miss, so the ordinal is then unknown. Known
    from the old one when no XDEL went above the old W; or, when the fold started at the live stream's
    first entry and no XDEL reached it, from ``info``: every entry from the first live one on is live, so the
    last one folded is the ``added - length + folded``-th.
    """
    if info is None or info.added is None or later is None or later.max_deleted != info.max_deleted:
        return 0
    if ordinal > 0 and not info.deleted_above(before):
        return ordinal + folded  # no entry after the old W was deleted: each one added was folded
    if info.first is not None and (before is None or before < info.first) and not info.deleted_above(info.first):
        return info.first_ordinal - 1 + folded
    return 0
