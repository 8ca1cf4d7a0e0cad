"""A stream as an operator inspects it: what it holds (:mod:`retain.streams.inspect`) and what a policy says of it.

:func:`inspect_stream` adds to a stream's :class:`~retain.streams.inspect.StreamInfo`
the window that applies to it under a policy (its explicit entry, else the first
pattern whose glob matches its key, as a rescan would find it) and, for an archived
stream, the archive's watermark W and the fold lag (entries the window drops that
the archive does not hold yet, as :func:`~retain.retention.status.stream_status`
counts them). Reads only. ``retain streams ls`` and ``retain streams info`` print it.

Example:
    >>> report = inspect_stream(conn, "emq:{codemojex}:stream:activity", now=utc_now(),
    ...                         policy=policy_file.policy, archive=policy_file.open_archive())
    >>> report.window.describe(), report.watermark, report.fold_lag
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any

from retain._redis import RedisLike
from retain.ids import StreamId
from retain.retention.policy import Policy, StreamPolicy
from retain.retention.status import stream_status
from retain.streams.inspect import StreamInfo, stream_info
from retain.windows import Limits, MaxAge, MaxBytes, MaxLen, MinId

if TYPE_CHECKING:
    from retain.archive import Archive

__all__ = ["StreamReport", "applying_entry", "inspect_stream"]


@dataclass(frozen=True)
class StreamReport:
    """A stream's figures and, under a policy, the window that applies and where it comes from."""

    info: StreamInfo
    #: the window as declared (None: no policy given, or none of its entries applies)
    window: MaxLen | MinId | MaxAge | MaxBytes | Limits | None = None
    #: ``"entry"`` for an explicit [[stream]] entry, else the glob of the pattern that matched
    source: str | None = None
    archived: bool = False
    #: the archive's W (archived streams; None: nothing archived yet, or no archive to read)
    watermark: StreamId | None = None
    #: entries the window drops that the archive does not hold yet (archived streams with an archive to read)
    fold_lag: int | None = None

    def as_dict(self) -> dict[str, Any]:
        """The figures as JSON-ready values."""
        return {**self.info.as_dict(), "window": None if self.window is None else self.window.describe(),
                "policy": self.source, "archived": self.archived,
                "watermark": None if self.watermark is None else str(self.watermark), "fold_lag": self.fold_lag}


def applying_entry(policy: Policy, key: str) -> tuple[StreamPolicy | None, str | None]:
    """The entry of ``policy`` that applies to ``key`` and where it comes from (``"entry"`` or a pattern's glob).

    An explicit entry wins over any pattern; of two patterns, the first declared (as the driver applies them).
    Pure.
    """
    for entry in policy.entries:
        if entry.key == key:
            return entry, "entry"
    for pattern in policy.patterns:
        if fnmatchcase(key, pattern.pattern):
            return pattern.entry_for(key), pattern.pattern
    return None, None


def inspect_stream(conn: RedisLike, key: str, *, now: datetime, policy: Policy | None = None,
                   archive: Archive | None = None) -> StreamReport:
    """The stream at ``key`` at ``now``, with the window ``policy`` gives it and, if archived, W and the fold lag.

    Raises:
        WrongTypeError, ServerError: the key holds no stream (as :func:`~retain.streams.inspect.stream_info`).
    """
    info = stream_info(conn, key, now=now)
    entry, source = applying_entry(policy, key) if policy is not None else (None, None)
    if entry is None:
        return StreamReport(info)
    if not entry.archive or archive is None:
        return StreamReport(info, entry.window, source, entry.archive)
    status = stream_status(conn, [entry], now=now, archive=archive)[0]
    if status.error is not None:
        raise status.error
    return StreamReport(info, entry.window, source, True, status.watermark, status.fold_lag)
