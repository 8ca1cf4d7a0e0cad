"""The archive's maintenance on a thread and a cadence of its own, by one replica at a time.

Maintenance (:func:`retain.archive.maintain`: compaction, expiry, checkpoint,
log cleanup, vacuum) keeps a fold as cheap in a year as today, and can take
seconds on a large table. It never runs inside a beat: a beat that waited for
it would leave every stream untrimmed that long. :class:`Maintainer` looks
every ``period`` whether maintenance is due (``every`` since the last, the
first one period after it started), and runs it on a worker thread of its own,
through an :class:`~retain.archive.Archive` of its own, so that a fold never
waits for its lock either. A maintenance that replaced files (a compaction, an
expiry) is followed, ``vacuum_retention`` later, by a vacuum of them alone:
the files no reader's snapshot can still need leave the store then, not one
cadence later (:func:`retain.archive.vacuum_replaced`).

With replicas, one of them maintains: the maintainer holds a lease of its own
(``SET NX PX``, renewed by ``GETEX`` at each look, also while maintenance
runs); the others look and pass. Two maintainers at once (a lost lease) are
safe all the same: each rewrite is fenced by the table
(:mod:`retain.archive.maintenance`), they only duplicate work.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from retain._redis import REDIS_ERRORS
from retain.beats import Beat
from retain.errors import RetainError
from retain.retention._slot import JobSlot

if TYPE_CHECKING:
    from retain.archive import Archive, MaintenanceReport, MaintenanceSettings

__all__ = ["Maintainer"]

log = logging.getLogger("retain.retention.driver")

#: the longest a maintainer waits between two looks
LONGEST_PERIOD = 30.0
#: seconds a stopping maintainer waits for a maintenance in progress (systemd's TimeoutStopSec is 60)
STOP_WAIT = 30.0


class Maintainer:
    """Maintains ``archive`` every ``settings.every`` on threads of its own (see the module docstring).

    ``lease``: the lease key and this replica's member id, with the client to hold it through; None: no
    replicas, this process always maintains.
    """

    def __init__(self, archive: Archive, settings: MaintenanceSettings, *, clock: Callable[[], datetime],
                 lease: tuple[Any, str, str] | None = None) -> None:
        assert settings.every is not None
        self.archive = archive.clone()
        self.settings, self.clock, self.lease = settings, clock, lease
        self.period = min(settings.every.total_seconds(), LONGEST_PERIOD)
        self._lease_ms = int(self.period * 3 * 1000)
        self._slot: JobSlot[MaintenanceReport | None] = JobSlot("retention-maintenance")
        self._started_at: datetime | None = None
        self._maintained_at: datetime | None = None
        #: when the files the last maintenance replaced can go (None: it replaced none, or they went)
        self._vacuum_at: datetime | None = None
        self._lock = threading.Lock()
        self._done: MaintenanceReport | None = None
        self.holding = lease is None
        self._beat = Beat(self._look, tick=self.period, max_backoff=self.period, name="maintenance")

    def start(self) -> None:
        """Look on a daemon thread every ``period`` until :meth:`stop`."""
        if not self._beat.running:
            self._beat.start()

    def stop(self, timeout: float | None = None) -> None:
        """Stop looking, let a maintenance in progress end (``timeout`` seconds at most, :data:`STOP_WAIT` by
        default: a process must not exit in the middle of a store's call), and give the maintenance lease back."""
        self._beat.stop(timeout)
        self._slot.wait(STOP_WAIT if timeout is None else timeout)
        if self.lease is not None and self.holding:
            conn, key, _ = self.lease
            try:
                conn.delete(key)
            except REDIS_ERRORS:
                pass  # it runs out by itself
            self.holding = False

    @property
    def running(self) -> bool:
        return self._beat.running

    @property
    def busy(self) -> bool:
        """True while a maintenance runs."""
        return self._slot.busy

    def finished(self) -> MaintenanceReport | None:
        """The maintenance that ended since this was last asked (None: none did)."""
        with self._lock:
            done, self._done = self._done, None
        return done

    def check(self, now: datetime | None = None, *, wait: bool = False) -> MaintenanceReport | None:
        """One look at ``now`` (the clock's by default): renew or take the lease, and start a maintenance
        when it is due and none runs. With ``wait``, wait for it (after a vacuum still running, when it is due)
        and return its report."""
        now = now if now is not None else self.clock()
        if self.lease is not None:
            self.holding = self._hold()
        if wait and self.holding and self._due(now):
            self._slot.wait(STOP_WAIT)  # a vacuum of replaced files still running: the maintenance comes after it
        if not self.holding or self._slot.busy:
            return None
        if not self._due(now):
            if self._vacuum_at is not None and now >= self._vacuum_at:
                self._vacuum_at = None
                self._slot.start(lambda cancelled: self._vacuum())
            return None
        self._maintained_at = now
        job: Future[MaintenanceReport | None] = self._slot.start(lambda cancelled: self._maintain(now))
        return job.result() if wait else None

    def _look(self) -> bool:
        self.check()
        return False

    def _due(self, now: datetime) -> bool:
        """``every`` since the last maintenance; the first one ``every`` after the first look."""
        every = self.settings.every
        assert every is not None
        if self._started_at is None:
            self._started_at = now
        last = self._maintained_at if self._maintained_at is not None else self._started_at
        return now - last >= every

    def _maintain(self, now: datetime) -> MaintenanceReport | None:
        from retain.archive import maintain

        started = time.monotonic()
        try:
            report = maintain(self.archive, self.settings, now=now)
        except RetainError as error:
            log.warning("maintenance of the archive failed; it is tried again in %s: %s",
                        timedelta(seconds=int(self.settings.every.total_seconds())) if self.settings.every else "",
                        error)
            return None
        log.info("%s (%.1f s, beside the beats)", report.summary(), time.monotonic() - started)
        if report.replaced:
            self._vacuum_at = now + self.settings.vacuum_retention
        with self._lock:
            self._done = report
        return report

    def _vacuum(self) -> None:
        """The files the last maintenance replaced, vacuumed once no snapshot can need them."""
        from retain.archive import vacuum_replaced

        try:
            removed = vacuum_replaced(self.archive)
        except RetainError as error:
            log.warning("the files the last maintenance replaced were not vacuumed (the next maintenance "
                        "does): %s", error)
            return
        log.info("vacuumed %d files the last maintenance replaced", removed)

    def _hold(self) -> bool:
        """Renew the maintenance lease, or take it when it is free; whether this replica holds it now."""
        assert self.lease is not None
        conn, key, member = self.lease
        try:
            if self.holding:
                value = conn.execute_command("GETEX", key, "PX", str(self._lease_ms))
                if value is not None and (value.decode() if isinstance(value, bytes) else value) == member:
                    return True
                log.info("the archive's maintenance lease went to another replica")
            taken = bool(conn.execute_command("SET", key, member, "NX", "PX", str(self._lease_ms)))
            if taken:
                log.info("this replica maintains the archive now (it took the maintenance lease)")
            return taken
        except REDIS_ERRORS as exc:
            log.warning("the maintenance lease could not be renewed or taken: %s", exc)
            return False
