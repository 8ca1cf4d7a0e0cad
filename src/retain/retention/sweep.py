"""One beat of the retention driver, written once as a sequence of steps that a sync and an asyncio driver run.

:meth:`Sweeper.steps` is a generator: it yields each piece of I/O as a step and
gets its answer back, so the order of a beat is written here once and
:class:`~retain.retention.driver.RetentionDriver` and
:class:`~retain.retention.driver.AsyncRetentionDriver` only say how each kind
of step runs (in place, or awaited). A beat, at the clock's ``now``:

1. **leases** (with replicas): one round trip renews the shards this replica
   holds and looks at the others; a second, when it takes or gives some back
   (:mod:`retain.retention.leases`). The beat then applies only the streams of
   the shards it holds (:mod:`retain.retention.shards`);
2. **patterns**: every ``rescan``, ``SCAN ... MATCH ... TYPE stream`` again
   (:mod:`retain.retention.patterns`);
3. **byte budgets**: ``MEMORY USAGE`` and ``XLEN`` of each such stream, one
   round trip (:mod:`retain.retention.bytes`);
4. **decide** (pure): the plain streams' XTRIMs (:func:`~retain.retention.policy.decide`);
5. **the archive job** starts on its own thread: fold the archived streams in
   one commit, then trim each past W (:mod:`retain.retention.archive_job`);
6. **plain trims**, one round trip (:mod:`retain.retention.plain`), then the
   protected streams one by one, blocking;
7. **groups**: up to two round trips counting what the trims took that a
   group had not consumed (:mod:`retain.retention.groups`);
8. **wait** for the archive job: on a runner no longer than the tick (a job
   still running goes on beside the next beats, which report it once it
   ends), and never past its deadline (it is then given up); then the report.

A stream's failure never raises: it is the stream's, in the report, and the
next beat re-applies the idempotent window.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from retain._redis import RedisLike
from retain.errors import RetainError
from retain.retention.archive_job import ArchivedBeat, ArchiveJob
from retain.retention.bytes import Measured, measure_commands, read_sizes
from retain.retention.groups import GroupTrim, PendingCounter, Seen
from retain.retention.leases import LeaseBook
from retain.retention.maintainer import Maintainer
from retain.retention.patterns import StreamPattern, expand
from retain.retention.plain import PlainBeat, PlainTrims
from retain.retention.policy import Policy, TrimCall, decide
from retain.retention.report import ReplicaBeat, SweepReport, log_failures
from retain.retention.shards import Shards

if TYPE_CHECKING:
    from retain.archive import Fence

__all__ = ["Blocking", "Scan", "Send", "Step", "Sweeper", "Trims", "Wait"]


@dataclass(frozen=True, slots=True)
class Send:
    """Commands in one round trip. Answer: each command's answer, or the exception that failed them all."""

    commands: Sequence[tuple[str, ...]]


@dataclass(frozen=True, slots=True)
class Trims:
    """The plain trims in one round trip, the driver's hot path. Answer: the :class:`PlainBeat` they came to."""

    calls: Sequence[TrimCall]


@dataclass(frozen=True, slots=True)
class Scan:
    """The patterns' scans. Answer: pattern -> the keys it matched, or the RetainError scanning met."""

    patterns: Sequence[StreamPattern]


@dataclass(frozen=True, slots=True)
class Blocking:
    """Blocking work with a synchronous client (in place, or on a worker thread). Answer: its value."""

    run: Callable[[Any], Any]


@dataclass(frozen=True, slots=True)
class Wait:
    """A job on another thread, waited for at most ``timeout`` seconds (its outcome is the steps' to take).
    Answer: None."""

    future: Future[Any]
    timeout: float


Step = Send | Trims | Scan | Blocking | Wait


class Sweeper:
    """What a driver's beats share across beats, and the beat itself (:meth:`steps`).

    Built by the driver from its validated arguments; see
    :class:`~retain.retention.driver.RetentionDriver` for what each means.
    """

    def __init__(self, declared: Policy, *, plain: PlainTrims, leases: LeaseBook, shards: Shards,
                 archive_job: ArchiveJob | None, maintainer: Maintainer | None) -> None:
        self.declared = declared
        #: the policy a beat applies: the declared entries, and what the patterns matched at the last rescan
        self.policy = Policy(declared.entries) if declared.patterns else declared
        self.plain, self.leases, self.shards = plain, leases, shards
        self.archive_job, self.maintainer = archive_job, maintainer
        self._scanned_at: datetime | None = None
        self._pending = PendingCounter()
        self._held_of: tuple[Policy, frozenset[int], Policy] | None = None

    def steps(self, now: datetime, patience: float | None = None) -> Generator[Step, Any, SweepReport]:
        """One beat at ``now``, as steps (see the module docstring); returns its report.

        ``patience``: seconds from the beat's start that it waits for its archive job at most (a runner's
        tick: the job goes on past the beat, and a later one reports it); None: up to the job's deadline.
        """
        started = time.monotonic()
        replica = yield from self._leases()
        if self._rescan_due(now):
            self._rescanned(now, (yield Scan(self.declared.patterns)))
        policy = self.held_policy()
        measured = read_sizes(policy.measured, (yield Send(measure_commands(policy.measured)))) \
            if policy.measured else None
        calls = decide(policy, now, measured.sizes if measured is not None else None)
        earlier = self.archive_job.finished() if self.archive_job is not None else None
        job = self._start_archive(policy, now, measured)
        plain: PlainBeat = (yield Trims(calls)) if calls else PlainBeat()
        if policy.protected:
            yield Blocking(lambda conn: self.plain.protect(conn, policy.protected, now, measured, plain))
        unconsumed = (yield from self._unconsumed(plain.seen)) if plain.seen else None
        archived = yield from self._archived(job, started, patience)
        if earlier is not None:  # a job of an earlier beat ended since: what it did is reported now
            archived = earlier.then(archived)
        return self._report(now, plain, time.monotonic() - started, archived, policy, measured, unconsumed,
                            replica)

    # -- leases and shards ----------------------------------------------------------------------------

    def _leases(self) -> Generator[Step, Any, ReplicaBeat | None]:
        """The beat's lease round trips (none with coordination off); the shards held for the beat."""
        leases = self.leases
        if not leases.enabled:
            return None
        sent = time.monotonic()
        moves = leases.read((yield Send(leases.commands(sent))), sent)
        commands = leases.move_commands(moves)
        moved_at = time.monotonic()
        changes = leases.moved(commands, (yield Send(commands)) if commands else [], moved_at)
        return ReplicaBeat(leases.name, self.shards.count, leases.held(), len(leases.members), changes)

    def held_policy(self) -> Policy:
        """The entries of the shards this replica holds now (all of them with coordination off)."""
        if not self.leases.enabled:
            return self.policy
        held = self.leases.held()
        cached = self._held_of
        if cached is not None and cached[0] is self.policy and cached[1] == held:
            return cached[2]
        mine = self.policy.only(lambda key: self.shards.of(key) in held)
        self._held_of = (self.policy, held, mine)
        return mine

    def _fences(self, policy: Policy) -> Mapping[str, Fence] | None:
        if not self.leases.enabled:
            return None
        fences = {entry.key: self.leases.fence(self.shards.of(entry.key)) for entry in policy.archived}
        return {key: fence for key, fence in fences.items() if fence is not None}

    # -- patterns -------------------------------------------------------------------------------------

    def _rescan_due(self, now: datetime) -> bool:
        """True when the patterns' streams are to be found again: at the first beat, then every ``rescan``."""
        patterns = self.declared.patterns
        if not patterns:
            return False
        every = min(pattern.rescan for pattern in patterns)
        return self._scanned_at is None or not timedelta(0) <= now - self._scanned_at < every

    def _rescanned(self, now: datetime, found: Mapping[str, Sequence[str]] | RetainError) -> None:
        """Apply a rescan: the policy of the explicit entries and what each pattern matched (a failed scan keeps
        the last one, and is tried again at the next rescan)."""
        self._scanned_at = now
        if isinstance(found, RetainError):
            log_scan_failure(found)
            return
        self.policy = Policy(expand(self.declared.entries, self.declared.patterns, found))

    # -- the archive ----------------------------------------------------------------------------------

    def _start_archive(self, policy: Policy, now: datetime,
                       measured: Measured | None) -> Future[ArchivedBeat] | ArchivedBeat:
        if not policy.archived or self.archive_job is None:  # the driver gave a job to a policy that archives
            return ArchivedBeat()
        assert self.job_conn is not None  # ... and the client it folds with
        return self.archive_job.start(self.job_conn, now, policy.archived, measured, self._fences(policy))

    #: the synchronous client the archive job folds with (the driver sets it)
    job_conn: RedisLike | None = None

    def _archived(self, job: Future[ArchivedBeat] | ArchivedBeat, started: float,
                  patience: float | None) -> Generator[Step, Any, ArchivedBeat]:
        """What the beat's archive job came to: waited for up to its deadline, and no longer than ``patience``
        from the beat's start; a job still running then goes on (its streams are reported as archiving), or
        is given up once past its deadline."""
        if not isinstance(job, Future):
            return job
        job_ = self.archive_job
        assert job_ is not None
        wait = job_.remaining()
        if patience is not None:
            wait = min(wait, max(0.0, patience - (time.monotonic() - started)))
        yield Wait(job, wait)
        done = job_.finished()
        if done is not None:
            return done
        return job_.give_up() if job_.overdue() else job_.still_running()

    # -- groups ---------------------------------------------------------------------------------------

    def _unconsumed(self, seen: Mapping[str, Seen]) -> Generator[Step, Any, dict[tuple[str, str], GroupTrim]]:
        """What the trims took from each group; up to two more round trips when a group with pending entries
        lost some."""
        first = self._pending.first_step(seen)
        answers = (yield Send(first)) if first else []
        second = self._pending.second_step(seen, answers if isinstance(answers, list) else [])
        more = (yield Send(second)) if second else []
        return self._pending.finish(seen, second, more if isinstance(more, list) else [])

    # -- the report -----------------------------------------------------------------------------------

    def _report(self, now: datetime, plain: PlainBeat, elapsed: float, archived: ArchivedBeat, policy: Policy,
                measured: Measured | None, unconsumed: Mapping[tuple[str, str], GroupTrim] | None,
                replica: ReplicaBeat | None) -> SweepReport:
        """The beat's report: the plain and protected streams (``plain``), the archived ones, the measures' failures.

        A stream with two calls (several limits) sums what both removed; either
        failing fails the stream. ``unconsumed``: what the trims took from groups.
        """
        removed_by, failures, lengths = plain.removed_by, plain.failures, plain.lengths
        if measured is not None:
            failures.update(measured.failures)
            for entry in policy.measured:  # a budget with nothing to measure (no stream yet) trims nothing
                if not entry.archive and entry.key not in failures:
                    removed_by.setdefault(entry.key, 0)
        for key in failures:
            removed_by.pop(key, None)
        removed_by.update(archived.removed_by)
        failures.update(archived.failures)
        lengths.update(archived.lengths)
        report = SweepReport(at=now, removed=sum(removed_by.values()), calls=len(removed_by),
                             removed_by=MappingProxyType(removed_by), failures=MappingProxyType(failures),
                             lengths=MappingProxyType(lengths), elapsed=elapsed,
                             folded_by=MappingProxyType(archived.folded_by),
                             watermarks=MappingProxyType(archived.watermarks),
                             fold_failures=MappingProxyType(archived.fold_failures),
                             maintenance=self.maintainer.finished() if self.maintainer is not None else None,
                             unconsumed=MappingProxyType(dict(unconsumed or {})),
                             races_lost=MappingProxyType(archived.races_lost), replica=replica,
                             archiving=frozenset(archived.archiving))
        log_failures(report)
        return report


def log_scan_failure(error: RetainError) -> None:
    from retain.retention.report import log

    log.warning("scanning for the patterns' streams failed; the last streams found are kept: %s", error)
