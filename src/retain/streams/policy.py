"""A retention policy: which streams keep which window, and the pure decision of a beat.

A policy is a list of entries, each a stream and the window it keeps. Plain
``(stream, window)`` pairs work; :class:`StreamPolicy` is the named form that
carries options. :class:`Policy` validates a list once (entry shapes, one window
per stream) so that a driver beating every second does not re-check it.

:func:`decide` is the pure part of a beat: given a policy and the clock instant,
it returns the XTRIM calls to send (an age window resolved against ``now``),
or an empty tuple when there is nothing to do. It never touches a server.

Example:
    >>> policy = Policy([(StreamRef("codemojex", "activity"), MaxLen(10_000))])
    >>> [call.command for call in decide(policy, datetime(2026, 9, 12, tzinfo=timezone.utc))]
    [('XTRIM', 'emq:{codemojex}:stream:activity', 'MAXLEN', '~', '10000', 'LIMIT', '0')]
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime

from retain.errors import InvalidPolicy
from retain.streams.keys import RawKey, Stream, StreamRef
from retain.streams.trim import xtrim_command
from retain.windows import MaxAge, MaxLen, MinId, Window, require_aware

__all__ = ["Policy", "PolicyEntry", "StreamPolicy", "TrimCall", "decide"]

#: Sent after ``~`` windows. Without it the server caps one approximate XTRIM at
#: 100 x stream-node-max-entries entries (10,000 by default), so a producer adding
#: more than that per beat would outrun the driver for ever. Whole nodes only still
#: hold: LIMIT bounds the work of a call, not where it may cut.
UNLIMITED = ("LIMIT", "0")

ARCHIVE_NOT_YET = ("archiving arrives with retain.archive; until then an entry only trims "
                   "(leave archive out, or set it to false)")


@dataclass(frozen=True)
class StreamPolicy:
    """One stream and the window a beat keeps it to.

    ``archive`` is reserved for folding what a trim removes into the archive
    first; it is refused when True until ``retain.archive`` is wired in.

    Raises:
        InvalidPolicy: the stream, window or archive flag is not what it should be.
    """

    stream: Stream
    window: Window
    archive: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.stream, (StreamRef, RawKey)):
            raise InvalidPolicy(f"a policy entry's stream must be a StreamRef or RawKey (got {self.stream!r})")
        if not isinstance(self.window, (MaxLen, MinId, MaxAge)):
            raise InvalidPolicy(f"a policy entry's window must be MaxLen, MinId or MaxAge (got {self.window!r})")
        if not isinstance(self.archive, bool):
            raise InvalidPolicy(f"a policy entry's archive must be True or False (got {self.archive!r})")
        if self.archive:
            raise InvalidPolicy(f"archive=True: {ARCHIVE_NOT_YET}")

    @property
    def key(self) -> str:
        """The Redis key of the stream."""
        return self.stream.key


PolicyEntry = StreamPolicy | tuple[Stream, Window]


@dataclass(frozen=True, init=False)
class Policy:
    """A validated policy: entries as :class:`StreamPolicy`, at most one per stream key.

    Accepts any iterable of :class:`StreamPolicy` or ``(stream, window)`` pairs.

    Raises:
        InvalidPolicy: naming the entry (by position, from 1) that is malformed or
            that repeats a stream already declared.
    """

    entries: tuple[StreamPolicy, ...]
    # The call of each length or fixed-instant entry never changes: made once here, not every beat.
    _fixed: tuple[TrimCall | None, ...] = field(repr=False, compare=False)

    def __init__(self, entries: Iterable[PolicyEntry] = ()) -> None:
        if isinstance(entries, (str, bytes, StreamPolicy)) or not isinstance(entries, Iterable):
            raise InvalidPolicy("a policy is a list of (stream, window) pairs or StreamPolicy entries "
                                f"(got {entries!r})")
        normalised: list[StreamPolicy] = []
        seen: dict[str, int] = {}
        for number, entry in enumerate(entries, start=1):
            item = _entry(entry, number)
            if item.key in seen:
                raise InvalidPolicy(f"policy entry #{number} repeats stream {item.key!r} of entry #{seen[item.key]}: "
                                    "one window per stream")
            seen[item.key] = number
            normalised.append(item)
        object.__setattr__(self, "entries", tuple(normalised))
        fixed = tuple(None if isinstance(entry.window, MaxAge) else _call(entry, entry.window) for entry in normalised)
        object.__setattr__(self, "_fixed", fixed)

    @classmethod
    def of(cls, policy: Policy | Iterable[PolicyEntry]) -> Policy:
        """``policy`` itself if already validated, else a new :class:`Policy` of it."""
        return policy if isinstance(policy, Policy) else cls(policy)

    def __len__(self) -> int:
        return len(self.entries)

    def __iter__(self) -> Iterator[StreamPolicy]:
        return iter(self.entries)


def _entry(entry: object, number: int) -> StreamPolicy:
    if isinstance(entry, StreamPolicy):
        return entry
    if isinstance(entry, tuple) and len(entry) == 2:
        try:
            return StreamPolicy(*entry)
        except InvalidPolicy as exc:
            raise InvalidPolicy(f"policy entry #{number}: {exc}") from None
    raise InvalidPolicy(f"policy entry #{number} must be a (stream, window) pair or a StreamPolicy (got {entry!r})")


@dataclass(frozen=True)
class TrimCall:
    """One XTRIM a beat sends: the entry it serves, its window resolved at ``now``, the command."""

    entry: StreamPolicy
    #: the window as sent: a MaxAge is resolved to the MinId it means at the beat's instant
    window: MaxLen | MinId
    command: tuple[str, ...]

    @property
    def key(self) -> str:
        """The Redis key the call trims."""
        return self.entry.key


def decide(policy: Policy | Iterable[PolicyEntry], now: datetime) -> tuple[TrimCall, ...]:
    """The trim calls of one beat at ``now``; an empty tuple when there is nothing to do.

    Pure: no I/O, no clock of its own. An age window becomes ``MINID`` at
    ``now - duration``; a ``~`` window also carries ``LIMIT 0`` so that one beat
    removes every whole node outside the window, however many arrived since the last.

    Raises:
        InvalidWindow: ``now`` is not a timezone-aware datetime.
        InvalidPolicy: ``policy`` is not a valid policy.
    """
    require_aware(now, "now")
    policy = Policy.of(policy)
    return tuple(fixed if fixed is not None else _call(entry, entry.window.resolve(now))  # type: ignore[union-attr]
                 for entry, fixed in zip(policy.entries, policy._fixed))


def _call(entry: StreamPolicy, window: MaxLen | MinId) -> TrimCall:
    command = xtrim_command(entry.stream, window)
    return TrimCall(entry, window, command + UNLIMITED if window.approx else command)
