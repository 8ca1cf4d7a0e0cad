"""A retention policy: which streams keep which window, and the pure decision of a beat.

A policy is a list of entries, each a stream and the window it keeps. Plain
``(stream, window)`` pairs work; :class:`StreamPolicy` is the named form that
carries options (``archive=True``: fold what the window drops into the archive
before trimming). :class:`Policy` validates a list once (entry shapes, one window
per stream) so that a driver beating every second does not re-check it.

:func:`decide` is the pure part of a beat: given a policy and the clock instant,
it returns the XTRIM calls to send for the plain entries (an age window resolved
against ``now``), or an empty tuple when there is nothing to do. It never touches
a server. The archived entries (:attr:`Policy.archived`) get no plain XTRIM: a
driver folds each one first and trims it just past the archive's watermark.

Example:
    >>> policy = Policy([(StreamRef("codemojex", "activity"), MaxLen(10_000))])
    >>> [call.command for call in decide(policy, datetime(2026, 9, 12, tzinfo=timezone.utc))]
    [('XTRIM', 'emq:{codemojex}:stream:activity', 'MAXLEN', '~', '10000', 'LIMIT', '0')]
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from retain.errors import InvalidPolicy
from retain.retention.cuts import Size, byte_limit, cuts
from retain.retention.groups import Protect
from retain.retention.patterns import StreamPattern
from retain.streams.keys import RawKey, Stream, StreamRef
from retain.streams.trim import xtrim_command
from retain.windows import Limits, MaxAge, MaxBytes, MaxLen, MinId, Window, require_aware

if TYPE_CHECKING:
    # Only for annotations: the archive (pyarrow, deltalake) is loaded when one is given.
    from retain.archive import Archive, MaintenanceSettings

__all__ = ["Policy", "PolicyEntry", "StreamPolicy", "TrimCall", "decide"]

#: ``LIMIT 0``, sent after ``~`` windows. Without it the server caps one approximate
#: XTRIM at 100 x stream-node-max-entries entries (10,000 by default), so a producer
#: adding more than that per beat would outrun the driver for ever. Whole nodes only
#: still hold: LIMIT bounds the work of a call, not where it may cut.
UNLIMITED = 0


@dataclass(frozen=True)
class StreamPolicy:
    """One stream and the window a beat keeps it to.

    With ``archive=True`` a beat first folds everything the window drops into
    the driver's archive, then trims with ``MINID`` just past the archive's
    watermark W, so only archived entries leave the stream (INV-FOLD). Such an
    entry needs a driver made with ``archive=Archive(...)``.

    Raises:
        InvalidPolicy: the stream, window or archive flag is not what it should be.
    """

    stream: Stream
    #: what a policy may keep (a MinStreamId is the archive's own trim, never declared); a :class:`Limits`
    #: combines several, the strictest wins
    window: MaxLen | MinId | MaxAge | MaxBytes | Limits
    archive: bool = False
    #: cap the trim at what the stream's consumer groups still need, within ``max_lag`` (see :mod:`retain.retention.groups`)
    protect: Protect | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.stream, (StreamRef, RawKey)):
            raise InvalidPolicy(f"a policy entry's stream must be a StreamRef or RawKey (got {self.stream!r})")
        if not isinstance(self.window, (MaxLen, MinId, MaxAge, MaxBytes, Limits)):
            raise InvalidPolicy("a policy entry's window must be MaxLen, MinId, MaxAge, MaxBytes or Limits "
                                f"(got {self.window!r})")
        if not isinstance(self.archive, bool):
            raise InvalidPolicy(f"a policy entry's archive must be True or False (got {self.archive!r})")
        if self.protect is not None and not isinstance(self.protect, Protect):
            raise InvalidPolicy(f"a policy entry's protect must be a Protect or None (got {self.protect!r})")
        if self.protect is not None and self.archive:
            raise InvalidPolicy("protect applies to a stream without archive: an archived stream's group catches up "
                                "from the archive instead (retain.archive.catch_up)")
        if self.archive:
            problem = archive_key_problem(self.stream.key)
            if problem is not None:
                raise InvalidPolicy(problem)

    @property
    def key(self) -> str:
        """The Redis key of the stream."""
        return self.stream.key

    @property
    def budget(self) -> MaxBytes | None:
        """The entry's byte budget, if it has one: a beat measures the stream before deciding its trim."""
        return byte_limit(self.window)


PolicyEntry = StreamPolicy | StreamPattern | tuple[Stream, Window]

#: keys an archived stream may not have: a path segment of their own name would climb the archive's tree
#: wherever the key is used as one (the format-1 archive, tools that lay files out by key)
_NOT_SEGMENTS = (".", "..")


def archive_key_problem(key: str) -> str | None:
    """Why ``key`` cannot be archived, or None: ``.`` and ``..`` are no object-store path segment."""
    if key in _NOT_SEGMENTS:
        return (f"stream key {key!r} cannot be archived: {key!r} is no object-store path segment (it names a "
                "folder, not an object); rename the stream, or keep it without archive")
    return None


@dataclass(frozen=True, init=False)
class Policy:
    """A validated policy: entries as :class:`StreamPolicy`, at most one per stream key.

    Accepts any iterable of :class:`StreamPolicy` or ``(stream, window)`` pairs.

    Raises:
        InvalidPolicy: naming the entry (by position, from 1) that is malformed or
            that repeats a stream already declared.
    """

    entries: tuple[StreamPolicy, ...]
    #: the entries with ``archive=True``, in policy order: folded, then trimmed past W
    archived: tuple[StreamPolicy, ...] = field(repr=False, compare=False)
    #: the entries with a byte budget, in policy order: a beat measures them first
    measured: tuple[StreamPolicy, ...] = field(repr=False, compare=False)
    #: the entries with ``protect``, in policy order: a beat reads their groups, then trims each on its own
    protected: tuple[StreamPolicy, ...] = field(repr=False, compare=False)
    #: the patterns, in policy order: a driver scans for their streams (:mod:`retain.retention.patterns`)
    patterns: tuple[StreamPattern, ...] = field(compare=True)
    # Each plain entry, with its call when that never changes (a length or fixed-instant
    # window): made once here, not every beat. None: an age window, resolved each beat.
    _plain: tuple[tuple[StreamPolicy, TrimCall | None], ...] = field(repr=False, compare=False)
    _same: tuple[TrimCall, ...] | None = field(repr=False, compare=False)

    def __init__(self, entries: Iterable[PolicyEntry] = ()) -> None:
        if isinstance(entries, (str, bytes, StreamPolicy)) or not isinstance(entries, Iterable):
            raise InvalidPolicy("a policy is a list of (stream, window) pairs or StreamPolicy entries "
                                f"(got {entries!r})")
        normalised: list[StreamPolicy] = []
        patterns: list[StreamPattern] = []
        seen: dict[str, int] = {}
        for number, entry in enumerate(entries, start=1):
            if isinstance(entry, StreamPattern):
                if any(other.pattern == entry.pattern for other in patterns):
                    raise InvalidPolicy(f"policy entry #{number} repeats pattern {entry.pattern!r}: "
                                        "one window per pattern")
                patterns.append(entry)
                continue
            item = _entry(entry, number)
            if item.key in seen:
                raise InvalidPolicy(f"policy entry #{number} repeats stream {item.key!r} of entry #{seen[item.key]}: "
                                    "one window per stream")
            seen[item.key] = number
            normalised.append(item)
        object.__setattr__(self, "entries", tuple(normalised))
        object.__setattr__(self, "patterns", tuple(patterns))
        object.__setattr__(self, "archived", tuple(entry for entry in normalised if entry.archive))
        object.__setattr__(self, "measured", tuple(entry for entry in normalised if entry.budget is not None))
        plain = tuple((entry, _call(entry, entry.window) if isinstance(entry.window, (MaxLen, MinId)) else None)
                      for entry in normalised if not entry.archive and entry.protect is None)
        object.__setattr__(self, "protected", tuple(entry for entry in normalised if entry.protect is not None))
        object.__setattr__(self, "_plain", plain)
        # Every plain call the same each beat: decide hands out this one tuple (a driver keeps its layout).
        same = None if any(fixed is None for _, fixed in plain) else tuple(fixed for _, fixed in plain)
        object.__setattr__(self, "_same", same)

    @classmethod
    def of(cls, policy: Policy | Iterable[PolicyEntry]) -> Policy:
        """``policy`` itself if already validated, else a new :class:`Policy` of it."""
        return policy if isinstance(policy, Policy) else cls(policy)

    def only(self, keep: Callable[[str], bool]) -> Policy:
        """The entries of the streams whose key ``keep`` answers True for (no patterns): checked and decided
        already, so no entry is validated or its call made again (a replica restricts a policy of 20,000
        streams to its shards whenever they change: that took a second)."""
        kept = Policy.__new__(Policy)
        entries = tuple(entry for entry in self.entries if keep(entry.key))
        chosen = {entry.key for entry in entries}
        plain = tuple(pair for pair in self._plain if pair[0].key in chosen)
        for name, value in (("entries", entries), ("patterns", ()), ("_plain", plain),
                            ("archived", tuple(entry for entry in self.archived if entry.key in chosen)),
                            ("measured", tuple(entry for entry in self.measured if entry.key in chosen)),
                            ("protected", tuple(entry for entry in self.protected if entry.key in chosen)),
                            ("_same", None if any(fixed is None for _, fixed in plain)
                             else tuple(fixed for _, fixed in plain))):
            object.__setattr__(kept, name, value)
        return kept

    def __len__(self) -> int:
        return len(self.entries)

    def __iter__(self) -> Iterator[StreamPolicy]:
        return iter(self.entries)


def checked_archive(policy: Policy, archive: Any) -> Archive | None:
    """``archive``, checked against what ``policy`` needs; None when it is None.

    Imports :mod:`retain.archive` (pyarrow, obstore) only when an archive is
    given, so that a policy without archiving never loads them.

    Raises:
        InvalidPolicy: an entry has ``archive=True`` and no archive is given, or
            ``archive`` is not a :class:`retain.archive.Archive`.
    """
    if archive is None:
        archived_pattern = next((pattern for pattern in policy.patterns if pattern.archive), None)
        if archived_pattern is not None:
            raise InvalidPolicy(f"pattern {archived_pattern.pattern!r} has archive=True, but no archive was given "
                                "to fold into: pass archive=Archive('file:///var/lib/retain')")
        if policy.archived:
            entry = policy.archived[0]
            number = policy.entries.index(entry) + 1
            raise InvalidPolicy(f"policy entry #{number} ({entry.key}) has archive=True, but no archive was given "
                                "to fold into: pass archive=Archive('file:///var/lib/retain') (or an s3:// one), "
                                "or set the entry's archive to False")
        return None
    # Lazy for start-up cost only: a caller who passed an archive has loaded it already.
    from retain.archive import Archive

    if not isinstance(archive, Archive):
        raise InvalidPolicy(f"archive must be a retain.archive.Archive (got {archive!r})")
    return archive


def checked_maintenance(policy: Policy, archive: Archive | None, maintenance: Any) -> MaintenanceSettings | None:
    """How a driver maintains ``archive``: ``maintenance``, or the archive's defaults; None with no archive to fold to.

    Raises:
        InvalidPolicy: ``maintenance`` is not a :class:`retain.archive.MaintenanceSettings`.
    """
    if archive is None or not (policy.archived or any(pattern.archive for pattern in policy.patterns)):
        return None
    # Lazy for start-up cost only: a caller who passed an archive has loaded it already.
    from retain.archive import MaintenanceSettings

    if maintenance is None:
        return MaintenanceSettings()
    if not isinstance(maintenance, MaintenanceSettings):
        raise InvalidPolicy(f"maintenance must be a retain.archive.MaintenanceSettings (got {maintenance!r})")
    return maintenance


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
    #: the window as sent: a MaxAge is resolved to the MinId it means at the beat's instant,
    #: a MaxBytes to the MaxLen it means for the stream's measured size
    window: MaxLen | MinId
    command: tuple[str, ...]
    #: the policy file's name of the limit this call applies: maxlen, max_age, min_id or max_bytes
    limit: str = field(default="", compare=False)

    @property
    def key(self) -> str:
        """The Redis key the call trims."""
        return self.entry.key


def decide(policy: Policy | Iterable[PolicyEntry], now: datetime,
           sizes: Mapping[str, Size] | None = None) -> tuple[TrimCall, ...]:
    """The trim calls of one beat at ``now`` for the plain entries; an empty tuple when there is nothing to do.

    Pure: no I/O, no clock of its own. An age window becomes ``MINID`` at
    ``now - duration``; a ``~`` window also carries ``LIMIT 0`` so that one beat
    removes every whole node outside the window, however many arrived since the last.
    A byte budget becomes ``MAXLEN`` for the stream's size in ``sizes`` (key ->
    :class:`~retain.retention.cuts.Size`, measured by the caller; without one
    the budget cuts nothing this beat). An entry with several limits
    (:class:`~retain.windows.Limits`) gets up to two calls, the strictest length
    and the strictest time limit (:mod:`retain.retention.cuts`).
    Archived entries get no call: a plain XTRIM could remove what is not yet
    archived. A driver folds them first (:attr:`Policy.archived`). Protected
    entries get none either: their trim depends on their groups, read first
    (:attr:`Policy.protected`, :mod:`retain.retention.groups`).

    Raises:
        InvalidWindow: ``now`` is not a timezone-aware datetime.
        InvalidPolicy: ``policy`` is not a valid policy.
    """
    require_aware(now, "now")
    policy = Policy.of(policy)
    if policy._same is not None:
        return policy._same
    calls: list[TrimCall] = []
    for entry, fixed in policy._plain:
        if fixed is not None:
            calls.append(fixed)
        elif isinstance(entry.window, MaxAge):
            calls.append(_call(entry, entry.window.resolve(now), "max_age"))
        else:
            calls.extend(_call(entry, cut.window, cut.limit) for cut in cuts(entry.window, now, sizes, entry.key))
    return tuple(calls)


def _call(entry: StreamPolicy, window: MaxLen | MinId, limit: str = "") -> TrimCall:
    name = limit or ("maxlen" if isinstance(window, MaxLen) else "min_id")
    return TrimCall(entry, window, xtrim_command(entry.stream, window, limit=UNLIMITED), name)
