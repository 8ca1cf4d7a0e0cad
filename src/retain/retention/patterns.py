"""Patterns: one ``[[stream]]`` entry for every stream whose key matches a glob, found again every rescan.

A :class:`StreamPattern` carries the same limits and options as a
:class:`~retain.retention.policy.StreamPolicy`, and a key glob in Redis's
``SCAN MATCH`` syntax (``emq:{*}:stream:*``: braces are literal, ``*`` and
``?`` are wildcards). A driver finds the matching streams with
``SCAN 0 MATCH <glob> TYPE stream`` (on a cluster, on every master: redis-py's
cluster ``scan_iter``), so a key of another type that matches is skipped, not
an error, and repeats the scan every ``rescan`` (1 minute by default): a stream
created while the driver runs is bounded from the first beat after the next
rescan. An explicit entry (``key``, or ``queue`` + ``name``) overrides any
pattern for its stream; of two patterns matching one key, the first declared wins.
:func:`expand` is the pure part: the declared policy and what each pattern
matched, made into the policy a beat applies.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from retain import durations
from retain._redis import AsyncRedisLike, RedisLike
from retain.errors import InvalidPolicy
from retain.retention.groups import Protect
from retain.streams.inspect import SCAN_COUNT, stream_keys
from retain.streams.keys import MAX_RAW_KEY_LENGTH, RawKey
from retain.windows import Limits, MaxAge, MaxBytes, MaxLen, MinId

__all__ = ["DEFAULT_RESCAN", "StreamPattern", "expand"]

log = logging.getLogger(__name__)

DEFAULT_RESCAN = timedelta(minutes=1)


@dataclass(frozen=True)
class StreamPattern:
    """Every stream whose key matches ``pattern`` keeps ``window`` (and the options of a StreamPolicy).

    Raises:
        InvalidPolicy: an empty or over-long pattern, one with whitespace or control characters, a bad
            window, option or rescan.
    """

    pattern: str
    window: MaxLen | MinId | MaxAge | MaxBytes | Limits
    archive: bool = False
    protect: Protect | None = None
    #: how often the driver scans for matching streams again
    rescan: timedelta = field(default=DEFAULT_RESCAN)

    def __post_init__(self) -> None:
        if not isinstance(self.pattern, str) or not self.pattern or len(self.pattern) > MAX_RAW_KEY_LENGTH:
            raise InvalidPolicy(f"a pattern must be a key glob of 1 to {MAX_RAW_KEY_LENGTH} characters such as "
                                f"'emq:{{*}}:stream:*' (got {self.pattern!r})")
        bad = next((ch for ch in self.pattern if ch.isspace() or not ch.isprintable()), None)
        if bad is not None:
            raise InvalidPolicy(f"pattern {self.pattern!r} contains {bad!r}: whitespace and control characters "
                                "are refused")
        if isinstance(self.rescan, str):
            object.__setattr__(self, "rescan", durations.parse(self.rescan))
        if not isinstance(self.rescan, timedelta) or self.rescan <= timedelta(0):
            raise InvalidPolicy(f"rescan must be a positive duration such as '1m' (got {self.rescan!r})")
        # The limits and options are checked as a StreamPolicy checks them.
        self.entry_for("probe")

    def entry_for(self, key: str) -> Any:
        """The :class:`~retain.retention.policy.StreamPolicy` this pattern gives the stream at ``key``."""
        from retain.retention.policy import StreamPolicy

        return StreamPolicy(RawKey(key), self.window, self.archive, self.protect)


def scan(conn: RedisLike, pattern: StreamPattern) -> list[str]:
    """The keys of the streams matching ``pattern`` now (``SCAN … MATCH … TYPE stream``, every master)."""
    from retain._redis import translate_errors

    with translate_errors():
        return stream_keys(conn.scan_iter(match=pattern.pattern, count=SCAN_COUNT, _type="stream"))


async def ascan(conn: AsyncRedisLike, pattern: StreamPattern) -> list[str]:
    """The asyncio twin of :func:`scan`."""
    from retain._redis import translate_errors

    with translate_errors():
        return stream_keys([key async for key in conn.scan_iter(match=pattern.pattern, count=SCAN_COUNT,
                                                              _type="stream")])


def expand(explicit: Sequence[Any], patterns: Sequence[StreamPattern],
           found: Mapping[str, Sequence[str]]) -> list[Any]:
    """The entries a beat applies: the explicit ones, then per pattern (in order) each matched key not yet taken.

    ``found``: pattern -> the keys it matched. A matched key its pattern's
    options refuse (an archived pattern matching ``.``, no object-store path
    segment) is left out, logged: one odd key never stops a rescan. Pure but for that log.
    """
    entries = list(explicit)
    taken = {entry.key for entry in explicit}
    for pattern in patterns:
        for key in sorted(found.get(pattern.pattern, ())):
            if key in taken:
                continue
            try:
                entry = pattern.entry_for(key)
            except InvalidPolicy as exc:
                log.warning("pattern %s matched %r, which it cannot apply to; skipped: %s", pattern.pattern, key, exc)
                continue
            taken.add(key)
            entries.append(entry)
    return entries
