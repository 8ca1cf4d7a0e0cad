"""What an operator watches of each stream a policy declares: length, window, oldest entry, W and its age, fold lag.

:func:`stream_status` reads, never writes. It builds on the dry run's reads
(:func:`~retain.retention.dryrun.preview`, with a fold threshold of one entry so
that its ``folds`` is every entry the window drops that the archive does not yet
hold: the fold lag) and adds the oldest entry's id (``XRANGE - + COUNT 1``).
The daemon's ops monitor calls it on a cadence of its own, next to the driver,
never inside a beat; the figures feed the metrics and the dashboard.

Example:
    >>> for status in stream_status(conn, policy, now=utc_now(), archive=archive):
    ...     print(status.key, status.length, status.oldest_age_s, status.fold_lag)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from retain._redis import RedisLike, translate_errors
from retain.errors import RetainError
from retain.ids import StreamId
from retain.retention.dryrun import preview
from retain.retention.policy import Policy, PolicyEntry
from retain.windows import Limits, MaxAge, MaxBytes, MaxLen, MinId

if TYPE_CHECKING:
    from retain.archive import Archive

__all__ = ["StreamStatus", "stream_status"]


@dataclass(frozen=True)
class StreamStatus:
    """One stream as an operator sees it at ``at``; ``error`` set (figures zero or None) when its reads failed."""

    key: str
    #: the window as declared (an age window unresolved): ``MAXLEN ~ 10000``, ``MAX-AGE ~ 7d``
    window: MaxLen | MinId | MaxAge | MaxBytes | Limits
    at: datetime
    length: int = 0
    #: the oldest entry's id (None: the stream is empty)
    oldest: StreamId | None = None
    archived: bool = False
    #: the archive's watermark W (archived streams; None: nothing archived yet)
    watermark: StreamId | None = None
    #: entries the window drops that the archive does not hold yet (archived streams)
    fold_lag: int = 0
    error: RetainError | None = None

    @property
    def window_entries(self) -> int | None:
        """The entries a length window keeps (None for an age or id window)."""
        return self.window.count if isinstance(self.window, MaxLen) else None

    @property
    def window_seconds(self) -> float | None:
        """The age an age window keeps, in seconds (None for a length or id window)."""
        return self.window.duration.total_seconds() if isinstance(self.window, MaxAge) else None

    @property
    def oldest_age_s(self) -> float | None:
        """Seconds from the oldest entry's time to ``at`` (None: empty stream)."""
        return None if self.oldest is None else _age(self.oldest, self.at)

    @property
    def watermark_age_s(self) -> float | None:
        """Seconds from W's time to ``at`` (None: nothing archived yet, or not archived)."""
        return None if self.watermark is None else _age(self.watermark, self.at)


def _age(stream_id: StreamId, at: datetime) -> float:
    return max(0.0, at.timestamp() - stream_id.ms / 1000)


def stream_status(conn: RedisLike, policy: Policy | Iterable[PolicyEntry], *, now: datetime,
                  archive: Archive | None = None) -> tuple[StreamStatus, ...]:
    """Each declared stream's status at ``now``, in policy order; one stream's failing reads never stop the others.

    Raises:
        InvalidPolicy, InvalidWindow: as :func:`~retain.retention.dryrun.preview`, before any I/O.
    """
    policy = Policy.of(policy)
    rows = preview(conn, policy, now=now, archive=archive, fold_min_entries=1)
    statuses = []
    for entry, row in zip(policy.entries, rows, strict=False):
        if row.error is not None:
            statuses.append(StreamStatus(entry.key, entry.window, now, archived=row.archived, error=row.error))
            continue
        try:
            oldest = _oldest(conn, entry.key) if row.length else None
        except RetainError as error:
            statuses.append(StreamStatus(entry.key, entry.window, now, archived=row.archived, error=error))
            continue
        statuses.append(StreamStatus(entry.key, entry.window, now, row.length, oldest, row.archived, row.watermark,
                                     row.folds if row.archived else 0))
    return tuple(statuses)


def _oldest(conn: RedisLike, key: str) -> StreamId | None:
    with translate_errors(key):
        first = conn.xrange(key, min="-", max="+", count=1)
    return StreamId.parse(first[0][0]) if first else None
