"""The plain streams of a beat: their trims laid out as one round trip, and the answers read back in one pass.

A plain stream (no archive) is trimmed by the one ``XTRIM`` its window means
(:func:`~retain.retention.policy.decide`): atomic, so nothing another client
does can move it into the window. Per stream the beat may also read, in the
same round trip, its consumer groups and length before the trim (to report
what a trim took that a group had not consumed, :mod:`retain.retention.groups`)
and its length after. :class:`PlainTrims` keeps what makes that cheap every
beat: the commands' layout, made once for a policy whose calls do not change,
and the wire form of every command that is the same each beat.

A protected stream is trimmed on its own, after reading its groups
(:meth:`PlainTrims.protect`, blocking).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from retain._redis import RedisLike, as_retain_error
from retain.errors import RetainError
from retain.retention.bytes import Measured
from retain.retention.groups import Seen, groups_or_none, trim_protected
from retain.retention.policy import StreamPolicy, TrimCall

__all__ = ["Layout", "PlainBeat", "PlainTrims"]


@dataclass
class Layout:
    """A beat's commands and how their answers are laid out (see :meth:`PlainTrims.layout`)."""

    commands: list[tuple[str, ...]]
    #: per command: the same every beat (its wire form may be kept)
    fixed: list[bool]
    #: the streams, in the order of their commands
    keys: list[str]
    #: one trim a stream: each stream's answers are ``step`` in a row, in the same places
    uniform: bool
    all_fixed: bool
    step: int


@dataclass
class PlainBeat:
    """What a beat's plain and protected streams came to, before the report is made."""

    removed_by: dict[str, int] = field(default_factory=dict)
    failures: dict[str, RetainError] = field(default_factory=dict)
    lengths: dict[str, int] = field(default_factory=dict)
    #: stream key -> its groups, read before the trim, and what the trim removed (streams with groups only)
    seen: dict[str, Seen] = field(default_factory=dict)


class PlainTrims:
    """The plain trims of every beat of one driver: their layout, their wire form, reading their answers.

    ``track_groups``: read each stream's groups and length before its trim; ``measure_lengths``: read its
    length after.
    """

    def __init__(self, *, track_groups: bool, measure_lengths: bool) -> None:
        self.track_groups, self.measure_lengths = track_groups, measure_lengths
        self._layout_of: Sequence[TrimCall] | None = None
        self._last_layout: Layout | None = None
        #: the wire form of every command that is the same each beat, packed once for one client
        self.packed: dict[tuple[str, ...], bytes] = {}
        self._packed_for: Any = None
        #: a whole beat's wire form, when every command of it is the same each beat
        self.blob: tuple[Layout, bytes] | None = None

    def layout(self, calls: Sequence[TrimCall]) -> Layout:
        """A beat's commands, per command whether it is the same every beat, and where each answer goes.

        Per stream, before its first trim when tracking groups: ``XINFO GROUPS``
        and ``XLEN`` (the length before). Then each trim, followed by ``XLEN``
        (the length after) when measuring lengths. The layout of the same
        calls (a policy without age windows or budgets decides the same tuple
        every beat) is made once.

        Its keys, which every beat reads its answers into, are fresh copies
        made one after the other: a replica's streams lie scattered among the
        whole policy's objects, and reading them where they lie cost a third
        more per stream (5,000 of 20,000 streams: 0.35 of the whole beat's
        CPU against 0.25 for as many made together; ``bench/replicas.py``).
        """
        if calls is self._layout_of and self._last_layout is not None:
            return self._last_layout
        commands: list[tuple[str, ...]] = []
        fixed: list[bool] = []
        keys: list[str] = []
        per_key = 0
        last = None
        for call in calls:
            key = call.key
            if key != last:
                keys.append(key.encode().decode())  # a fresh copy, beside the others (see the docstring)
                if self.track_groups:
                    commands += [("XINFO", "GROUPS", key), ("XLEN", key)]
                    fixed += [True, True]
            else:
                per_key = 2
            last = key
            commands.append(call.command)
            fixed.append(call.window is call.entry.window)
            if self.measure_lengths:
                commands.append(("XLEN", key))
                fixed.append(True)
        layout = Layout(commands, fixed, keys, uniform=per_key == 0, all_fixed=all(fixed),
                        step=(2 if self.track_groups else 0) + 1 + (1 if self.measure_lengths else 0))
        self._layout_of, self._last_layout = calls, layout
        return layout

    def packer(self, layout: Layout, conn: RedisLike) -> Callable[[Any], bytes]:
        """Packs a beat's commands on a connection of ``conn``, reusing the bytes of those that never change.

        Packing is most of a beat's client time, and a length or fixed-instant
        window sends the same bytes every beat: those are packed once per client,
        and a beat whose every command is fixed (the same layout as the last)
        sends the whole packed beat kept from then. An age window's command
        changes every beat and is packed afresh, never kept.
        """
        if self._packed_for is not conn:
            self.packed, self._packed_for, self.blob = {}, conn, None
        cache = self.packed
        commands, fixed = layout.commands, layout.fixed

        def pack(connection: Any) -> bytes:
            if self.blob is not None and self.blob[0] is layout:
                return self.blob[1]
            parts = []
            for command, same in zip(commands, fixed, strict=False):
                packed = cache.get(command)
                if packed is None:
                    packed = b"".join(connection.pack_command(*command))
                    if same:
                        cache[command] = packed
                parts.append(packed)
            whole = b"".join(parts)
            if layout.all_fixed:
                self.blob = (layout, whole)
            return whole

        return pack

    def read(self, calls: Sequence[TrimCall], answers: Sequence[Any] | BaseException) -> PlainBeat:
        """The plain trims' answers, in one pass: what each stream lost, its failure, its length, its groups.

        With one trim a stream and no error among the answers (the common beat),
        each kind of answer is a slice of the list, read at C speed; otherwise
        stream by stream.
        """
        if not calls:
            return PlainBeat()
        layout = self.layout(calls)
        if isinstance(answers, BaseException):
            answers = [answers] * len(layout.commands)
        # The types of the answers, a handful, say whether any is an error: at C speed, not one check an answer.
        if layout.uniform and not any(issubclass(kind, BaseException) for kind in set(map(type, answers))):
            return self._read_uniform(layout, answers)
        beat = PlainBeat()
        groups: dict[str, Any] = {}
        before: dict[str, int] = {}
        index = 0
        for call in calls:
            key = call.key
            if self.track_groups and key not in before and key not in groups:
                groups[key], length = answers[index], answers[index + 1]
                before[key] = -1 if isinstance(length, BaseException) else int(length)
                index += 2
            answer = answers[index]
            index += 1
            if isinstance(answer, BaseException):
                beat.failures[key] = as_retain_error(answer, key)
            elif key not in beat.failures:
                beat.removed_by[key] = beat.removed_by.get(key, 0) + int(answer)
            if self.measure_lengths:
                if not isinstance(answers[index], BaseException):
                    beat.lengths[key] = int(answers[index])
                index += 1
        for key in beat.failures:
            beat.removed_by.pop(key, None)
        _seen(beat, groups, before)
        return beat

    def _read_uniform(self, layout: Layout, answers: Sequence[Any]) -> PlainBeat:
        """One trim a stream, no error: every kind of answer is a slice of ``answers``."""
        step, keys = layout.step, layout.keys
        offset = 2 if self.track_groups else 0
        beat = PlainBeat(removed_by=dict(zip(keys, answers[offset::step], strict=False)))
        if self.measure_lengths:
            beat.lengths = dict(zip(keys, answers[offset + 1::step], strict=False))
        if self.track_groups:
            found = answers[0::step]
            with_groups = [index for index, answer in enumerate(found) if answer]
            if with_groups:
                lengths = answers[1::step]
                _seen(beat, {keys[index]: found[index] for index in with_groups},
                      {keys[index]: int(lengths[index]) for index in with_groups})
        return beat

    @staticmethod
    def protect(conn: RedisLike, entries: Sequence[StreamPolicy], now: datetime, measured: Measured | None,
                beat: PlainBeat) -> None:
        """Trim each protected stream on its own, after reading its groups (blocking; see
        :mod:`retain.retention.groups`); what each removed, or its failure, goes into ``beat``."""
        for entry in entries:
            key = entry.key
            if measured is not None and key in measured.failures:
                continue  # the measure's error is the stream's failure
            size = measured.sizes.get(key) if measured is not None else None
            try:
                removed, seen = trim_protected(conn, entry, now, size)
            except RetainError as error:
                beat.failures[key] = error
                continue
            beat.removed_by[key] = removed
            if seen.groups:
                beat.seen[key] = seen


def _seen(beat: PlainBeat, groups: Mapping[str, Any], before: Mapping[str, int]) -> None:
    """Note, per stream with groups whose trim went through, its groups and what the trim removed."""
    for key, answer in groups.items():
        try:
            found = groups_or_none(answer)
        except BaseException:  # the stream's trim reports its own error (WRONGTYPE, ...)
            continue
        if found and key in beat.removed_by and before[key] >= 0:
            beat.seen[key] = Seen(found, before[key], beat.removed_by[key])
