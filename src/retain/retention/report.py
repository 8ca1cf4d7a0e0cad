"""What one beat of the driver did: :class:`SweepReport`, and :class:`ReplicaBeat` for the shards it held."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from retain.errors import RetainError, ServerUnavailable
from retain.ids import StreamId
from retain.retention.groups import GroupTrim
from retain.retention.leases import LeaseChanges

if TYPE_CHECKING:
    from retain.archive import MaintenanceReport

__all__ = ["ReplicaBeat", "SweepReport", "log_failures"]

log = logging.getLogger("retain.retention.driver")

#: at most this many failing streams are logged one by one per beat; the rest are counted
LOGGED_FAILURES = 10


def _empty() -> Mapping[Any, Any]:
    return MappingProxyType({})


@dataclass(frozen=True)
class ReplicaBeat:
    """The shards a replica held during one beat, and what its lease work changed."""

    #: the replica's name (its member id without the nonce)
    name: str
    #: the policy's shards, in all
    shards: int
    #: the shards this replica held, whose streams the beat trimmed and folded
    held: frozenset[int]
    #: live replicas of the policy, this one included
    members: int
    changes: LeaseChanges = field(default_factory=LeaseChanges)


@dataclass(frozen=True)
class SweepReport:
    """What one beat did.

    ``removed_by`` has an entry for every stream whose trim went through (an
    archived stream's after its fold), ``failures`` for every one that did not,
    ``archiving`` for an archived one whose job goes on past the beat; together
    they cover every stream of the policy the beat applied to: with replicas
    (``replica``), the streams of the shards this replica held.
    ``folded_by`` and ``watermarks`` cover the archived streams whose fold went
    through.
    """

    #: the clock instant the beat was decided at
    at: datetime
    #: entries removed in all
    removed: int
    #: streams whose trim went through (a failed one is not counted; an archived
    #: stream counts once its fold went through, even with nothing to trim)
    calls: int
    #: stream key -> entries removed
    removed_by: Mapping[str, int]
    #: stream key -> the error its trim (or an archived stream's fold) met
    failures: Mapping[str, RetainError]
    #: stream key -> length right after its trim; empty unless the driver measures
    lengths: Mapping[str, int] = field(default_factory=_empty)
    #: seconds from sending the beat's first command to its last answer, folds included
    elapsed: float = 0.0
    #: archived stream key -> entries this beat folded into the archive (0 included)
    folded_by: Mapping[str, int] = field(default_factory=_empty)
    #: archived stream key -> the archive's watermark W after this beat (None: nothing archived yet)
    watermarks: Mapping[str, StreamId | None] = field(default_factory=_empty)
    #: archived stream key -> the error its fold met, so it was not trimmed this beat (also in ``failures``)
    fold_failures: Mapping[str, RetainError] = field(default_factory=_empty)
    #: the archive's maintenance that ended since the beat before (it runs on a thread of its own)
    maintenance: MaintenanceReport | None = None
    #: (stream key, group) -> what this beat's trim took that the group had not consumed (non-zero ones only;
    #: see :mod:`retain.retention.groups`)
    unconsumed: Mapping[tuple[str, str], GroupTrim] = field(default_factory=_empty)
    #: archived stream key -> times its fold found another folder had committed first (it read on from there)
    races_lost: Mapping[str, int] = field(default_factory=_empty)
    #: the shards this replica held and what its leases did; None when it shares with no replica
    replica: ReplicaBeat | None = None
    #: archived streams whose archive job goes on past this beat (a later beat reports what it did)
    archiving: frozenset[str] = frozenset()

    @property
    def folded(self) -> int:
        """Entries folded into the archive in all."""
        return sum(self.folded_by.values())

    @property
    def ok(self) -> bool:
        """True when every trim of the beat was applied, and the replica's leases could be renewed."""
        return not self.failures and self.lease_error is None

    @property
    def lost_connection(self) -> bool:
        """True when some trim (or the replica's lease round trip) failed because the server could not be reached."""
        lease_error = self.replica.changes.error if self.replica is not None else None
        return isinstance(lease_error, ServerUnavailable) or any(
            isinstance(error, ServerUnavailable) for error in self.failures.values())

    @property
    def idle(self) -> bool:
        """True when the beat changed nothing an operator reads a log for: nothing removed or folded, nothing
        failed, no lease changed hands, no maintenance ended, no consumer group lost unread entries."""
        changes = self.replica.changes if self.replica is not None else None
        leases_moved = changes is not None and bool(changes.taken or changes.takeovers or changes.lost
                                                     or changes.released or changes.renew_failures or changes.error)
        return not (self.removed or self.folded or self.failures or self.maintenance is not None or self.unconsumed
                    or leases_moved)

    @property
    def lease_error(self) -> RetainError | None:
        """What failed this replica's lease round trip whole (it then trimmed only what it still held)."""
        return self.replica.changes.error if self.replica is not None else None

    def log_fields(self) -> dict[str, Any]:
        """What a JSON log line of the beat carries besides its text: removed, folded, failures by stream, W."""
        fields: dict[str, Any] = {"removed": self.removed, "trims": self.calls, "elapsed_s": round(self.elapsed, 6)}
        if self.folded_by:
            fields["folded"] = self.folded
            fields["watermarks"] = {key: str(w) if w is not None else None for key, w in self.watermarks.items()}
        if self.failures:
            fields["failures"] = {key: {"error": type(error).__name__, "message": str(error)}
                                  for key, error in self.failures.items()}
        if self.replica is not None:
            fields["shards"] = len(self.replica.held)
            takeovers = [takeover.shard for takeover in self.replica.changes.takeovers if takeover.expired]
            if takeovers:
                fields["takeovers"] = takeovers
        if self.races_lost:
            fields["races_lost"] = dict(self.races_lost)
        return fields

    def summary(self) -> str:
        """One line for a log, such as ``beat at <instant>: removed 120 entries in 3 trims, 1 failed, 1.2 ms``.

        With archived streams it also says ``folded 80 entries`` after the trims; with replicas, how many
        shards this replica held.
        """
        failed = f", {len(self.failures)} failed" if self.failures else ""
        folded = f", folded {_count(self.folded, 'entry', 'entries')}" if self.folded_by or self.fold_failures else ""
        removed, calls = _count(self.removed, "entry", "entries"), _count(self.calls, "trim", "trims")
        held = ""
        if self.replica is not None:
            held = f", holding {len(self.replica.held)} of {self.replica.shards} shards"
        return (f"beat at {self.at.isoformat(timespec='milliseconds')}: removed {removed} in {calls}{folded}{failed}"
                f"{held}, {self.elapsed * 1e3:.1f} ms")


def _count(number: int, one: str, many: str) -> str:
    return f"{number} {one if number == 1 else many}"


def log_failures(report: SweepReport) -> None:
    """A warning per failed stream (at most :data:`LOGGED_FAILURES`, then a count), per lost race, and for a
    lease round trip that failed whole."""
    if report.lease_error is not None and report.replica is not None:
        log.warning("the lease round trip failed, so this replica touches only the %d shards it still holds "
                    "(until their leases run out): %s", len(report.replica.held), report.lease_error,
                    extra={"error": type(report.lease_error).__name__})
    for number, (key, error) in enumerate(report.failures.items()):
        if number == LOGGED_FAILURES:
            log.warning("... and %d more streams failed in this beat", len(report.failures) - LOGGED_FAILURES)
            break
        # the fields a JSON log line carries beside its text (retain.logs)
        fields = {"stream": key, "error": type(error).__name__, "kind": "fold" if key in report.fold_failures
                  else "trim"}
        if key in report.fold_failures:
            log.warning("fold of %s failed, so it is not trimmed this beat: %s", key, error, extra=fields)
        else:
            log.warning("trim of %s failed: %s", key, error, extra=fields)
    for key, races in report.races_lost.items():
        log.warning("fold of %s lost %s to another folder, which committed W first: it read on from that W "
                    "(files it had written stay unlisted until vacuum)", key, _count(races, "race", "races"),
                    extra={"stream": key, "races_lost": races})
