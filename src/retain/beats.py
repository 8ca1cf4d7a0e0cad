"""A beat: one piece of work re-run every ``tick`` seconds, backing off while it is in trouble.

Both of retain's cadences run on it: the retention driver's sweep
(:mod:`retain.retention.driver`) and logd's retain schedule
(:mod:`retain.logd.schedule`). A beat starts ``tick`` seconds after the one
before started (at once if that one ran longer). A beat that raises never ends
the cadence: it is logged and counts as troubled. After a troubled beat the
wait doubles, up to ``max_backoff``; the first healthy beat resets it
(:func:`beat_delay`). The work says whether a beat was troubled by returning
True (a lost connection: retrying at full speed would only hammer a server
that is down). Work that left something to finish soon asks for the next beat
sooner (:meth:`Cadence.sooner`): once, and never in trouble.

- :class:`Beat` runs the work on a daemon thread (``start``/``stop``), or in the
  caller's thread (``run``) until ``stop``;
- :class:`AsyncBeat` is the asyncio twin, for a coroutine function.

Example:
    >>> beat = Beat(lambda: sweep().lost_connection, tick=1.0, max_backoff=30.0, name="retention")
    >>> beat.start()
    >>> ...
    >>> beat.stop()      # finishes the beat in progress
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Awaitable, Callable

__all__ = ["AsyncBeat", "Beat", "Cadence", "beat_delay"]

log = logging.getLogger(__name__)


def beat_delay(tick: float, troubled: int, max_backoff: float) -> float:
    """Seconds from one beat's start to the next after ``troubled`` bad beats in a row.

    ``tick`` when all is well; after each troubled beat it doubles, up to
    ``max_backoff`` (never below ``tick``).
    """
    if troubled <= 0:
        return tick
    return min(tick * 2.0 ** min(troubled, 64), max(max_backoff, tick))


class Cadence:
    """What both runners share: the tick, the backoff, and the count of beats and of troubled ones in a row."""

    def __init__(self, tick: float, max_backoff: float) -> None:
        self.tick, self.max_backoff = tick, max_backoff
        #: beats completed (a raising beat counts)
        self.beats = 0
        #: seconds from one beat's start to the next, as the runner now waits: ``tick``, or longer in trouble
        self.delay = tick
        self._troubled = 0
        self._sooner: float | None = None

    def sooner(self, seconds: float) -> None:
        """Start the next beat at most ``seconds`` after the one in progress started: for this once, and not when
        the beat in progress turns out troubled (a backoff is never cut short)."""
        self._sooner = seconds if self._sooner is None else min(self._sooner, seconds)

    def after(self, troubled: bool) -> float:
        """Count one beat and return the delay from its start to the next one's."""
        self.beats += 1
        self._troubled = self._troubled + 1 if troubled else 0
        self.delay = beat_delay(self.tick, self._troubled, self.max_backoff)
        sooner, self._sooner = self._sooner, None
        if sooner is not None and not troubled:
            self.delay = min(self.delay, sooner)
        return self.delay


class Beat(Cadence):
    """Run ``work()`` on a beat in a thread; ``work`` returns True when the beat was troubled.

    ``stop``, when given, is the event that ends the beat (:meth:`stop` sets it): a
    caller that already has one (a signal handler's) needs no second.
    """

    def __init__(self, work: Callable[[], bool], *, tick: float, max_backoff: float, name: str,
                 stop: threading.Event | None = None) -> None:
        super().__init__(tick, max_backoff)
        self.work, self.name = work, name
        self._own_stop = stop is None  # a caller's event is the caller's to clear
        self._stopping = stop if stop is not None else threading.Event()
        self._thread: threading.Thread | None = None

    def run(self) -> None:
        """Beat in this thread until :meth:`stop` is called (or the ``stop`` event is set); a beat in
        progress is finished first."""
        if self._own_stop:
            self._stopping.clear()
        self._loop()

    def _loop(self) -> None:
        while not self._stopping.is_set():
            started = time.monotonic()
            try:
                troubled = self.work()
            except Exception:
                log.exception("%s: a beat raised; the beat goes on", self.name)
                troubled = True
            delay = self.after(troubled)
            self._stopping.wait(max(0.0, delay - (time.monotonic() - started)))

    def start(self) -> None:
        """Beat on a daemon thread until :meth:`stop`; calling it while running is refused."""
        if self.running:
            raise RuntimeError(f"{self.name} is already running")
        # Cleared here, not in the thread: a stop() right after start() must not be lost.
        if self._own_stop:
            self._stopping.clear()
        self._thread = threading.Thread(target=self._loop, name=f"retain-{self.name}", daemon=True)
        self._thread.start()

    def stop(self, timeout: float | None = None) -> None:
        """Ask the beat to end after the beat in progress; wait for the thread :meth:`start` made."""
        self._stopping.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
            if not thread.is_alive():
                self._thread = None

    @property
    def running(self) -> bool:
        """True while the thread started by :meth:`start` is alive."""
        return self._thread is not None and self._thread.is_alive()


class AsyncBeat(Cadence):
    """The asyncio twin of :class:`Beat`: ``work()`` is a coroutine function returning True when troubled."""

    def __init__(self, work: Callable[[], Awaitable[bool]], *, tick: float, max_backoff: float, name: str) -> None:
        super().__init__(tick, max_backoff)
        self.work, self.name = work, name
        # Made by run() or start(), inside the event loop that will wait on it.
        self._stopping: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None

    async def run(self) -> None:
        """Beat in this task until :meth:`stop` is called; a beat in progress is finished first."""
        self._stopping = asyncio.Event()
        await self._loop(self._stopping)

    async def _loop(self, stopping: asyncio.Event) -> None:
        while not stopping.is_set():
            started = time.monotonic()
            try:
                troubled = await self.work()
            except Exception:
                log.exception("%s: a beat raised; the beat goes on", self.name)
                troubled = True
            delay = self.after(troubled)
            try:
                await asyncio.wait_for(stopping.wait(), max(0.0, delay - (time.monotonic() - started)))
            except TimeoutError:
                pass

    async def start(self) -> None:
        """Beat in a background task until :meth:`stop`; calling it while running is refused."""
        if self.running:
            raise RuntimeError(f"{self.name} is already running")
        self._stopping = asyncio.Event()
        self._task = asyncio.create_task(self._loop(self._stopping), name=f"retain-{self.name}")

    async def stop(self) -> None:
        """Ask the beat to end after the beat in progress; wait for the task :meth:`start` made."""
        if self._stopping is not None:
            self._stopping.set()
        task, self._task = self._task, None
        if task is not None and task is not asyncio.current_task():
            await task

    @property
    def running(self) -> bool:
        """True while the task started by :meth:`start` is alive."""
        return self._task is not None and not self._task.done()
