"""One archive job of the driver in flight at a time, on a daemon thread, waited for up to a deadline.

A frozen object store can hold a call for as long as its client retries
(≈30 s on S3). The driver's beat must not wait that long: the plain streams'
trims of the next beats would wait with it. So the archived streams' work of a
beat (fold, commit, trim; then maintenance when due) runs here, on a thread of
its own, and the beat waits for it no longer than the deadline. A job the beat
gave up on is told so (``cancelled()`` answers True from then on) and starts no
further step, so a late fold never commits or trims after its beat; and while it
is still running, no new job starts: the next beats report the archived streams
as still busy instead of racing the old job on the same W.

The thread is a daemon thread: a job stuck on a frozen store never holds the
process at exit.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, wait
from typing import Generic, TypeVar

__all__ = ["JobSlot"]

T = TypeVar("T")


class JobSlot(Generic[T]):
    """Runs at most one job at a time; a job is ``work(cancelled)`` and its result comes back in a Future."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._lock = threading.Lock()
        self._running: Future[T] | None = None
        self._cancel = threading.Event()

    @property
    def busy(self) -> bool:
        """True while a job (perhaps one a beat gave up on) is still running."""
        with self._lock:
            return self._running is not None and not self._running.done()

    def start(self, work: Callable[[Callable[[], bool]], T]) -> Future[T]:
        """Start ``work`` on a daemon thread; refused (RuntimeError) while another job runs."""
        with self._lock:
            if self._running is not None and not self._running.done():
                raise RuntimeError(f"{self.name}: a job is still running")
            future: Future[T] = Future()
            cancel = self._cancel = threading.Event()
            self._running = future

        def run() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                future.set_result(work(cancel.is_set))
            except BaseException as exc:  # noqa: BLE001 - handed to whoever waits on the future
                future.set_exception(exc)

        threading.Thread(target=run, name=self.name, daemon=True).start()
        return future

    def wait(self, timeout: float) -> bool:
        """Wait for the running job (if any) to end, ``timeout`` seconds at most; True when none runs."""
        with self._lock:
            running = self._running
        if running is None:
            return True
        done, _ = wait([running], timeout=timeout)
        return bool(done)

    def give_up(self) -> None:
        """Tell the running job that nobody waits for it any more: it starts no further step."""
        self._cancel.set()
