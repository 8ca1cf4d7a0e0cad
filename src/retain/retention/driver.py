"""The retention driver: a declared policy re-applied on its own beat.

Bounded memory is a safety property; a consumer being up is a liveness fact.
The driver keeps them apart: it trims the declared streams on a beat of its
own, so a stream nobody reads is bounded all the same. It never writes to
consumer groups; it reads them to report what a trim took that a group had
not consumed (:mod:`retain.retention.groups`).

One beat is one :meth:`~RetentionDriver.sweep`. Its order -- leases, pattern
rescans, byte budgets, the pure decision, the archive job on its own thread,
the plain trims in one round trip, the protected streams, the groups, the
wait for the archive job -- is written once, as steps
(:mod:`retain.retention.sweep`); the two drivers here only run those steps:

- :class:`RetentionDriver` for synchronous code: ``with driver:`` or
  ``start()``/``stop()`` beat on a daemon thread; ``run()`` beats in the caller's
  thread until ``stop()``. A standalone ``redis.Redis`` gets each round trip as
  one write of the packed commands (:mod:`retain.retention.roundtrip`); a
  cluster goes through redis-py's pipeline, one per node;
- :class:`AsyncRetentionDriver` for asyncio: ``async with driver:``,
  ``await driver.run()``, ``await start()``/``await stop()``; blocking work
  (folds, protected streams) runs on worker threads with a synchronous client.

**Replicas.** Several drivers on one policy (``retain streams run`` on several
hosts, or several processes of one app) share its streams through leases in
the Redis they trim (:mod:`retain.retention.leases`): each beat a driver
renews the shards it holds, takes free ones up to its fair share, and trims
and folds only the streams of its shards; a dead replica's shards are taken
over within one lease time. Coordination is on by default, so a second copy
is safe and useful; ``replicas=Replicas(enabled=False)`` turns it off.

**Maintenance** of the archive runs on a thread and cadence of its own, one
maintainer across the replicas (:mod:`retain.retention.maintainer`): a beat
never waits for it.

Both runners beat on :mod:`retain.beats`: a beat starts every ``tick`` seconds
(right after the previous one if that ran longer), or sooner when another
replica's lease runs out before then. A sweep that raises never kills the
beat: it is logged and the beat goes on. After a beat that lost the connection
(or raised), the wait doubles from ``tick`` up to ``max_backoff``; the first
healthy beat resets it. Keep the client's own retries low (the daemon uses
one): the driver's backoff is the retry policy.

Example:
    >>> driver = RetentionDriver(redis.Redis(), [(StreamRef("codemojex", "activity"), MaxLen(10_000))])
    >>> with driver:          # beats every second on a thread until the block ends
    ...     serve_the_game()
    >>> archived = RetentionDriver(redis.Redis(), [StreamPolicy(StreamRef("codemojex", "activity"),
    ...                                                         MaxLen(10_000), archive=True)],
    ...                            archive=Archive("file:///var/lib/retain"))
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import wait as wait_for_futures
from datetime import datetime
from typing import TYPE_CHECKING, Any

import redis
import redis.asyncio.cluster
import redis.cluster

from retain import _fields
from retain._fields import Where
from retain._gc import paused_gc
from retain._redis import REDIS_ERRORS, AsyncRedisLike, RedisLike
from retain.beats import AsyncBeat, Beat, Cadence
from retain.clock import utc_now
from retain.errors import InvalidPolicy, RetainError
from retain.retention.archive_job import ArchiveJob
from retain.retention.leases import LeaseBook, Replicas
from retain.retention.maintainer import Maintainer
from retain.retention.patterns import ascan, scan
from retain.retention.plain import PlainTrims
from retain.retention.policy import Policy, PolicyEntry, TrimCall, checked_archive, checked_maintenance
from retain.retention.policyfile import PolicyFile
from retain.retention.report import SweepReport
from retain.retention.roundtrip import pipeline_options, send_direct, send_pipeline
from retain.retention.shards import Shards, policy_group
from retain.retention.sweep import Blocking, Scan, Send, Step, Sweeper, Trims

if TYPE_CHECKING:
    # Only for annotations: the archive (pyarrow, deltalake) is loaded by a driver that archives.
    from retain.archive import Archive, MaintenanceReport, MaintenanceSettings

__all__ = ["AsyncRetentionDriver", "RetentionDriver", "SweepReport"]

log = logging.getLogger(__name__)

DEFAULT_TICK = 1.0
DEFAULT_MAX_BACKOFF = 30.0
#: seconds a beat waits for its archive work (fold, commit, trims) before it reports those streams failed for
#: the beat and goes on; the policy file's ``[archive] deadline``
DEFAULT_ARCHIVE_DEADLINE = 10.0
#: commands whose wire form a driver keeps, the last used (a beat's lease commands are ~130 for 64 shards; one-off
#: ones, such as the membership's score, fall out first)
PACKED_COMMANDS = 4096


class _Driver:
    """What both twins share: the arguments checked, the beat's state (:class:`Sweeper`), the runners' hooks."""

    def __init__(self, conn: RedisLike | AsyncRedisLike, policy: Policy | Iterable[PolicyEntry], *,
                 archive: Archive | None, maintenance: MaintenanceSettings | None, fold_min_entries: int, tick: float,
                 clock: Callable[[], datetime], max_backoff: float, measure_lengths: bool,
                 on_report: Callable[[SweepReport], None] | None, archive_deadline: float,
                 track_groups: bool, replicas: Replicas | None, job_conn: RedisLike | None) -> None:
        self.conn = conn
        declared = Policy.of(policy)
        self.archive = checked_archive(declared, archive)
        self.maintenance = checked_maintenance(declared, self.archive, maintenance)
        options = Where("", InvalidPolicy)
        self.fold_min_entries = _fields.count(fold_min_entries, "fold_min_entries", options, minimum=1)
        self.tick = _fields.seconds(tick, "tick", options)
        self.max_backoff = _fields.seconds(max_backoff, "max_backoff", options)
        self.archive_deadline = _fields.seconds(archive_deadline, "archive_deadline", options, example="10.0",
                                                duration_example="10s")
        if not callable(clock):
            raise InvalidPolicy(f"clock must be a callable returning an aware datetime (got {clock!r})")
        self.clock = clock
        self.measure_lengths, self.track_groups = bool(measure_lengths), bool(track_groups)
        if replicas is not None and not isinstance(replicas, Replicas):
            raise InvalidPolicy(f"replicas must be a retain.retention.Replicas (got {replicas!r})")
        self.replicas = (replicas if replicas is not None else Replicas()).for_tick(self.tick)
        self.on_report = on_report
        cluster = isinstance(conn, (redis.cluster.RedisCluster, redis.asyncio.cluster.RedisCluster))
        shards = Shards(self.replicas.shards, self.replicas.group or policy_group(_described(declared, self.archive)),
                        cluster)
        self.leases = LeaseBook(shards, self.replicas, self.tick)
        job = ArchiveJob(self.archive, deadline=self.archive_deadline, fold_min_entries=self.fold_min_entries,
                         measure_lengths=self.measure_lengths) if self.archive is not None else None
        maintainer = None
        if self.archive is not None and self.maintenance is not None and self.maintenance.every is not None:
            lease = (job_conn, shards.maintenance_key, self.leases.me) if self.replicas.enabled else None
            maintainer = Maintainer(self.archive, self.maintenance, clock=clock, lease=lease)
        self.maintainer = maintainer
        self.plain = PlainTrims(track_groups=self.track_groups, measure_lengths=self.measure_lengths)
        self._sweeper = Sweeper(declared, plain=self.plain, leases=self.leases, shards=shards, archive_job=job,
                                maintainer=maintainer)
        self._sweeper.job_conn = job_conn
        self._cadence = Cadence(self.tick, self.max_backoff)  # the runner's; replaced by it

    @property
    def node_timeout(self) -> float:
        """Seconds a beat waits for one node of a cluster: a tick (a second at least). A node slower than that
        fails its own streams for the beat; the others go on at the tick."""
        return max(1.0, self.tick)

    @property
    def declared(self) -> Policy:
        """The policy as declared, patterns included."""
        return self._sweeper.declared

    @property
    def policy(self) -> Policy:
        """The policy a beat applies: the declared entries and what the patterns matched at the last rescan
        (with replicas, the beat applies those of this replica's shards: :meth:`held_policy`)."""
        return self._sweeper.policy

    def held_policy(self) -> Policy:
        """The entries of the shards this replica holds now (all, with coordination off)."""
        return self._sweeper.held_policy()

    @property
    def beats(self) -> int:
        """Beats the runners have completed (a raising beat counts); a caller may reset it."""
        return self._cadence.beats

    @beats.setter
    def beats(self, count: int) -> None:
        self._cadence.beats = count

    @property
    def archiving(self) -> bool:
        """True while an archive job still runs: the current beat's, or one a beat gave up on at its deadline."""
        job = self._sweeper.archive_job
        return job is not None and job.busy

    @property
    def delay(self) -> float:
        """Seconds from one beat's start to the next, as the runner now waits: ``tick``, or longer in trouble."""
        return self._cadence.delay

    def next_in(self) -> float | None:
        """Seconds until the runner should beat again sooner than the tick (another's lease runs out); None."""
        return self.leases.wake_in()

    def maintain(self, now: datetime | None = None) -> MaintenanceReport | None:
        """Maintain the driver's archive now, in this thread (compaction, expiry, checkpoint, log cleanup,
        vacuum); None without one.

        Raises:
            ArchiveError: the store or the table failed.
        """
        if self.archive is None or self.maintenance is None:
            return None
        from retain.archive.maintenance import maintain

        report = maintain(self.archive, self.maintenance, now=now if now is not None else self.clock())
        log.info("%s", report.summary())
        return report

    def _observed(self, report: SweepReport) -> bool:
        """Hand a runner's beat to ``on_report``; True when the beat lost the connection (the runner backs off)."""
        if self.on_report is not None:
            try:
                self.on_report(report)
            except Exception:
                log.exception("on_report raised; the beat goes on")
        return report.lost_connection

    def _poke_on_late_jobs(self, poke: Callable[[], None]) -> None:
        """An archive job that outlived its beat starts the next beat when it ends: the archived streams then
        move at the pace of their folds, not of the folds rounded up to ticks."""
        if self._sweeper.archive_job is not None:
            self._sweeper.archive_job.on_late_end = poke

    def _start_maintainer(self) -> None:
        if self.maintainer is not None:
            self.maintainer.start()

    def _stop_maintainer(self) -> None:
        """Let the archive work in flight end (its deadline at most), then stop the maintainer (which lets a
        maintenance in progress end): a process must not exit in the middle of a store's call."""
        job = self._sweeper.archive_job
        if job is not None and not job.wait():
            log.warning("the archive job still runs past its deadline of %g s as the driver stops",
                        self.archive_deadline)
        if self.maintainer is not None:
            self.maintainer.stop()


def _file_options(policy_file: PolicyFile, archive: Archive | None) -> dict[str, Any]:
    """The driver's arguments a policy file gives."""
    return {"archive": archive if archive is not None else policy_file.open_archive(),
            "maintenance": policy_file.maintenance(), "fold_min_entries": policy_file.fold_min_entries,
            "tick": policy_file.tick, "archive_deadline": policy_file.archive_deadline,
            "replicas": policy_file.replicas}


def _described(policy: Policy, archive: Archive | None) -> list[str]:
    """What makes two replicas' policies the same one: each stream or pattern with its window and options,
    and the archive it folds into."""
    lines = [f"{entry.key}\t{entry.window.describe()}\t{entry.archive}\t{entry.protect}" for entry in policy.entries]
    lines += [f"pattern {pattern.pattern}\t{pattern.window.describe()}\t{pattern.archive}\t{pattern.protect}"
              for pattern in policy.patterns]
    return lines + [f"archive {archive.url}" if archive is not None else "no archive"]


class RetentionDriver(_Driver):
    """Re-applies a policy on its own beat, for a ``redis.Redis`` or ``redis.cluster.RedisCluster``.

    Arguments:
        conn: the client to send trims on (and to fold archived streams with); the caller owns and closes it.
        policy: a :class:`~retain.retention.policy.Policy`, or a list of ``(stream, window)``
            pairs and :class:`~retain.retention.policy.StreamPolicy` entries.
        archive: the :class:`retain.archive.Archive` that entries with ``archive=True``
            fold into before they are trimmed; required when the policy has such an entry.
        maintenance: how the archive is maintained (:class:`retain.archive.MaintenanceSettings`;
            None: its defaults): every ``maintenance.every`` a thread of the running driver
            compacts, expires, checkpoints, cleans the log and vacuums (``every=None``: never by itself).
        fold_min_entries: with fewer entries than this waiting to be folded, a beat
            folds none of a stream (and trims only what is archived already), so
            that a beat every second does not leave a trail of tiny files.
        tick: seconds between the starts of two beats.
        clock: returns the current time as an aware datetime; age windows resolve against it.
        max_backoff: the longest wait between beats while the server is unreachable.
        measure_lengths: also read each stream's length after its trim (same round trip).
        on_report: called by the runners with each beat's :class:`SweepReport`.
        track_groups: read each stream's consumer groups and length before its trim (same round
            trip) to report what a trim takes that a group has not consumed (``SweepReport.unconsumed``);
            False saves those two reads per stream.
        archive_deadline: seconds (or a duration such as ``"10s"``) a beat waits for its archive work;
            past it the archived streams fail the beat with :class:`~retain.errors.ArchiveTimeout`
            while the plain ones are trimmed all the same, and the late job starts no further step
            (no commit, no trim). Until it ends, the next beats report those streams as still busy.
        replicas: how this driver shares the policy's streams with other drivers of the same policy
            (:class:`~retain.retention.Replicas`; default: shared, 64 shards, 3 s leases;
            ``Replicas(enabled=False)``: this driver trims every stream and takes no lease).

    Raises:
        InvalidPolicy: a malformed policy, tick, backoff, clock, fold or replicas option; an
            archived entry with no archive given; before any I/O.
    """

    conn: RedisLike

    def __init__(self, conn: RedisLike, policy: Policy | Iterable[PolicyEntry], *, archive: Archive | None = None,
                 maintenance: MaintenanceSettings | None = None, fold_min_entries: int = 1,
                 tick: float = DEFAULT_TICK, clock: Callable[[], datetime] = utc_now,
                 max_backoff: float = DEFAULT_MAX_BACKOFF, measure_lengths: bool = False,
                 on_report: Callable[[SweepReport], None] | None = None,
                 archive_deadline: float = DEFAULT_ARCHIVE_DEADLINE, track_groups: bool = True,
                 replicas: Replicas | None = None) -> None:
        super().__init__(conn, policy, archive=archive, maintenance=maintenance, fold_min_entries=fold_min_entries,
                         tick=tick, clock=clock, max_backoff=max_backoff, measure_lengths=measure_lengths,
                         on_report=on_report, archive_deadline=archive_deadline, track_groups=track_groups,
                         replicas=replicas, job_conn=conn)
        #: the wire form of the commands last sent outside the trims (leases, measures, groups)
        self._packed_commands: OrderedDict[tuple[str, ...], bytes] = OrderedDict()
        self._runner = self._cadence = Beat(lambda: self._observed(self.sweep(patience=self.tick)), tick=self.tick,
                                            max_backoff=self.max_backoff, name="retention-driver",
                                            next_in=self.next_in)
        self._poke_on_late_jobs(self._runner.poke)

    @classmethod
    def from_policy_file(cls, conn: RedisLike, policy_file: PolicyFile, *, archive: Archive | None = None,
                         **options: Any) -> RetentionDriver:
        """The driver a policy file describes (its streams, tick, archive, maintenance and replicas), on ``conn``.

        ``archive``: the file's archive, opened (:meth:`PolicyFile.open_archive` opens it when None);
        ``options`` override the file or add what it does not say (``on_report``, ``measure_lengths``, ...).

        Example:
            >>> driver = RetentionDriver.from_policy_file(redis.Redis(), load_policy("retain.toml"))
        """
        return cls(conn, policy_file.policy, **_file_options(policy_file, archive) | options)

    def sweep(self, *, patience: float | None = None) -> SweepReport:
        """Apply one beat at the clock's instant; never raises for a stream's failure.

        ``patience``: the most seconds the beat waits for its archive job (its runner passes the tick: the
        job goes on beside the next beats, and the beat that sees it end reports it); None: up to the
        archive deadline.

        Raises:
            InvalidWindow: the clock returned a naive datetime (a bug in the caller's clock).
        """
        steps = self._sweeper.steps(self.clock(), patience)
        answer: Any = None
        try:
            while True:
                answer = self._run(steps.send(answer))
        except StopIteration as done:
            report: SweepReport = done.value
            return report

    def _run(self, step: Step) -> Any:
        """One step of a beat, here and now (see :mod:`retain.retention.sweep` for what each answers)."""
        if isinstance(step, Send):
            return self._pipeline(step.commands)
        if isinstance(step, Trims):
            with paused_gc():
                return self.plain.read(step.calls, self._send_trims(step.calls))
        if isinstance(step, Scan):
            try:
                return {pattern.pattern: scan(self.conn, pattern) for pattern in step.patterns}
            except RetainError as error:
                return error
        if isinstance(step, Blocking):
            return step.run(self.conn)
        wait_for_futures([step.future], timeout=step.timeout)
        return None

    def _pipeline(self, commands: Sequence[tuple[str, ...]]) -> list[Any] | BaseException:
        """``commands`` in one round trip: each answer, or the error that failed them all. The wire form of a
        command sent before is reused (a replica's lease commands are mostly the same each beat)."""
        try:
            if isinstance(self.conn, redis.Redis):
                def pack(connection: Any) -> bytes:
                    return b"".join(self._packed(connection, command) for command in commands)
                return send_direct(self.conn, len(commands), pack)
            return send_pipeline(self.conn, commands, node_timeout=self.node_timeout)
        except REDIS_ERRORS as exc:
            return exc

    def _packed(self, connection: Any, command: tuple[str, ...]) -> bytes:
        """``command``'s wire form, kept for the next beats: the :data:`PACKED_COMMANDS` last used."""
        cache = self._packed_commands
        packed = cache.get(command)
        if packed is None:
            packed = cache[command] = b"".join(connection.pack_command(*command))
            if len(cache) > PACKED_COMMANDS:
                cache.popitem(last=False)
        else:
            cache.move_to_end(command)
        return packed

    def _send_trims(self, calls: Sequence[TrimCall]) -> list[Any] | BaseException:
        """The plain trims in one round trip, the unchanging commands' wire form kept: each command's answer,
        or the error that failed them all."""
        try:
            layout = self.plain.layout(calls)
            if isinstance(self.conn, redis.Redis):
                return send_direct(self.conn, len(layout.commands), self.plain.packer(layout, self.conn))
            return send_pipeline(self.conn, layout.commands, node_timeout=self.node_timeout)
        except REDIS_ERRORS as exc:
            return exc

    def run(self) -> None:
        """Beat in this thread until :meth:`stop` is called; a beat in progress is finished first, then the
        replica's leases are given back."""
        self._start_maintainer()
        try:
            self._runner.run()
        finally:
            self._stop_maintainer()
            self._release()

    def start(self) -> RetentionDriver:
        """Beat on a daemon thread until :meth:`stop`; calling it while running is refused."""
        self._runner.start()
        self._start_maintainer()
        return self

    def stop(self, timeout: float | None = None) -> None:
        """Ask the beat to end after the beat in progress; wait for the thread :meth:`start` made; give the
        replica's leases back, so that the other replicas take its shards at their next beat."""
        self._runner.stop(timeout)
        self._stop_maintainer()
        if not self._runner.running:
            self._release()

    def _release(self) -> None:
        commands = self.leases.release_commands()
        if commands:
            self._pipeline(commands)  # best effort: a lease not deleted runs out by itself

    @property
    def running(self) -> bool:
        """True while the thread started by :meth:`start` is alive."""
        return self._runner.running

    def __enter__(self) -> RetentionDriver:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class AsyncRetentionDriver(_Driver):
    """The asyncio twin of :class:`RetentionDriver`, for ``redis.asyncio`` clients (standalone or cluster).

    Takes the same arguments, and ``fold_conn``; ``sweep``, ``run``, ``start`` and ``stop`` are coroutines.
    Archived streams are folded by the same blocking code as the sync driver's,
    on a worker thread so the event loop never waits on the archive: that needs
    ``fold_conn``, a synchronous ``redis.Redis`` (or ``RedisCluster``) for the
    same server, which the caller owns and closes.

    Raises:
        InvalidPolicy: as :class:`RetentionDriver`; also an archived or protected entry with no ``fold_conn``.
    """

    conn: AsyncRedisLike

    def __init__(self, conn: AsyncRedisLike, policy: Policy | Iterable[PolicyEntry], *, archive: Archive | None = None,
                 maintenance: MaintenanceSettings | None = None, fold_conn: RedisLike | None = None,
                 fold_min_entries: int = 1,
                 tick: float = DEFAULT_TICK, clock: Callable[[], datetime] = utc_now,
                 max_backoff: float = DEFAULT_MAX_BACKOFF, measure_lengths: bool = False,
                 on_report: Callable[[SweepReport], None] | None = None,
                 archive_deadline: float = DEFAULT_ARCHIVE_DEADLINE, track_groups: bool = True,
                 replicas: Replicas | None = None) -> None:
        declared = Policy.of(policy)
        needs_thread = any(pattern.archive or pattern.protect for pattern in declared.patterns)
        if (declared.archived or declared.protected or needs_thread) and fold_conn is None:
            raise InvalidPolicy("an AsyncRetentionDriver folds archived streams and trims protected ones on a worker "
                                "thread with a synchronous client: pass fold_conn=redis.Redis(...) (or a "
                                "RedisCluster) for the same server")
        super().__init__(conn, declared, archive=archive, maintenance=maintenance, fold_min_entries=fold_min_entries,
                         tick=tick, clock=clock, max_backoff=max_backoff, measure_lengths=measure_lengths,
                         on_report=on_report, archive_deadline=archive_deadline, track_groups=track_groups,
                         replicas=replicas, job_conn=fold_conn)
        self.fold_conn = fold_conn
        self._runner = self._cadence = AsyncBeat(self._observed_sweep, tick=self.tick,
                                                 max_backoff=self.max_backoff, name="retention-driver",
                                                 next_in=self.next_in)
        self._poke_on_late_jobs(self._runner.poke)

    async def sweep(self, *, patience: float | None = None) -> SweepReport:
        """Apply one beat at the clock's instant; never raises for a stream's failure.

        The round trips go on the event loop; folds and protected streams on worker threads. ``patience``
        as :meth:`RetentionDriver.sweep`.
        """
        steps = self._sweeper.steps(self.clock(), patience)
        answer: Any = None
        try:
            while True:
                answer = await self._run(steps.send(answer))
        except StopIteration as done:
            report: SweepReport = done.value
            return report

    async def _run(self, step: Step) -> Any:
        """One step of a beat on the event loop (see :mod:`retain.retention.sweep` for what each answers)."""
        if isinstance(step, Send):
            return await self._pipeline(step.commands)
        if isinstance(step, Trims):
            answers = await self._pipeline(self.plain.layout(step.calls).commands)
            return self.plain.read(step.calls, answers)
        if isinstance(step, Scan):
            try:
                return {pattern.pattern: await ascan(self.conn, pattern) for pattern in step.patterns}
            except RetainError as error:
                return error
        if isinstance(step, Blocking):
            return await asyncio.to_thread(step.run, self.fold_conn)
        await asyncio.wait({asyncio.wrap_future(step.future)}, timeout=step.timeout)
        return None

    async def _pipeline(self, commands: Sequence[tuple[str, ...]]) -> list[Any] | BaseException:
        """``commands`` in one pipeline: each command's answer, or the error that failed them all."""
        pipe = self.conn.pipeline(transaction=False)
        try:
            for command in commands:
                pipe.execute_command(*command, **pipeline_options(command))
            answers: list[Any] = await pipe.execute(raise_on_error=False)
            return answers
        except REDIS_ERRORS as exc:
            return exc
        finally:
            await pipe.reset()

    async def _observed_sweep(self) -> bool:
        return self._observed(await self.sweep(patience=self.tick))

    async def run(self) -> None:
        """Beat in this task until :meth:`stop` is called; a beat in progress is finished first, then the
        replica's leases are given back."""
        self._start_maintainer()
        try:
            await self._runner.run()
        finally:
            self._stop_maintainer()
            await self._release()

    async def start(self) -> AsyncRetentionDriver:
        """Beat in a background task until :meth:`stop`; calling it while running is refused."""
        await self._runner.start()
        self._start_maintainer()
        return self

    async def stop(self) -> None:
        """Ask the beat to end after the beat in progress; wait for the task :meth:`start` made; give the
        replica's leases back."""
        await self._runner.stop()
        self._stop_maintainer()
        await self._release()

    async def _release(self) -> None:
        commands = self.leases.release_commands()
        if commands:
            await self._pipeline(commands)  # best effort: a lease not deleted runs out by itself

    @property
    def running(self) -> bool:
        """True while the task started by :meth:`start` is alive."""
        return self._runner.running

    async def __aenter__(self) -> AsyncRetentionDriver:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

