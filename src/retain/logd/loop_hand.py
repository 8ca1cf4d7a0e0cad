"""The event loop's hand in the writer's group commits: it runs a group's small patches while the writer thread waits.

Why: the writer thread and the event loop share one GIL. A patch on the writer thread runs a handful of
SQLite statements and each one hands the GIL over; under load the loop takes it every time and the writer
waits to get it back, so a patch cost the server three to four times its own CPU (`bench/logd_load.py`,
50 clients, one request in five a patch: 440 microseconds of writer CPU per patch against 100 when run
alone). Run on the loop, the same patches hand nothing over. The writer thread keeps what needs a thread:
the group's ``BEGIN`` and its ``COMMIT`` (whose fsync then waits without holding the GIL), the writes
that are not small patches, and the order of everything.

Small, so that the loop never spends more on one patch than on a small read: a request of few objects
(:func:`small_write`, decided as it arrives), and a patch whose scans -- a subtree it replaces or deletes,
a schema's check of a container -- stay within :data:`SCAN_ROWS` rows. One that passes them stops before
it writes anything (:meth:`~retain.logd.store.Store.scans_at_most`), and the writer thread runs it instead,
in its place in the group.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from typing import Any

from retain.logd.store import Outcome, Store, run_write
from retain.logd.view import ScanBudgetExceeded
from retain.wire.offload import weighs_more

__all__ = ["SCAN_ROWS", "SMALL_WRITE_BYTES", "LoopHand", "small_write"]

#: the most rows the scans of a patch the loop runs may read (as a read answered on the loop may touch
#: :data:`~retain.logd.server.INLINE_READ_RECORDS` records)
SCAN_ROWS = 256
#: the most bytes a patch request's objects may take for the loop to run it
SMALL_WRITE_BYTES = 16 * 1024
_CHECK_SECONDS = 0.1  # how often a waiting writer looks whether the loop is still there to run its patches


def small_write(request: Any) -> bool:
    """Whether a patch request is small enough for the loop to run (its objects within
    :data:`SMALL_WRITE_BYTES`); a few microseconds for a small one."""
    return not weighs_more(request, SMALL_WRITE_BYTES)


class LoopHand:
    """Runs writes on ``loop`` for the writer thread, which waits meanwhile (the writer's ``hand``).

    Called with a group's consecutive small writes, it returns the outcomes of those the loop ran: all of
    them, or fewer when one's scans passed :data:`SCAN_ROWS` (that one wrote nothing; the writer runs it
    and carries on), or none once :meth:`close` was called or the loop is gone.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, store: Store, *, scan_rows: int = SCAN_ROWS) -> None:
        self._loop, self._store, self._scan_rows = loop, store, scan_rows
        self._open = True

    def close(self) -> None:
        """Run nothing more on the loop: the writer runs every write itself from now on."""
        self._open = False

    def __call__(self, writes: Sequence[Callable[[], Any]]) -> list[Outcome[Any]]:
        if not self._open:
            return []
        job = _Job(writes, self._store, self._scan_rows)
        try:
            self._loop.call_soon_threadsafe(job.run)
        except RuntimeError:  # the loop is closed
            return []
        while not job.finished.wait(_CHECK_SECONDS):
            if not self._loop.is_running() and job.take():
                return []  # the loop stopped before it came to them: the writer runs them
        return job.outcomes


class _Job:
    """Writes handed to the loop; taken once, by the loop to run them or by the writer to take them back."""

    def __init__(self, writes: Sequence[Callable[[], Any]], store: Store, scan_rows: int) -> None:
        self.writes, self.store, self.scan_rows = writes, store, scan_rows
        self.outcomes: list[Outcome[Any]] = []
        self.finished = threading.Event()
        self._lock = threading.Lock()
        self._taken = False

    def take(self) -> bool:
        with self._lock:
            taken, self._taken = self._taken, True
        return not taken

    def run(self) -> None:  # on the loop
        if not self.take():
            return
        try:
            for write in self.writes:
                with self.store.scans_at_most(self.scan_rows):
                    outcome = run_write(write)
                if isinstance(outcome.error, ScanBudgetExceeded):
                    break  # it wrote nothing: the writer thread runs it, and what follows
                self.outcomes.append(outcome)
        finally:
            self.finished.set()
