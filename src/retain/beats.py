"""A beat: one piece of work re-run every ``tick`` seconds, backing off while it is in trouble.

Both of retain's cadences run on it: the retention driver's sweep
(:mod:`retain.retention.driver`) and logd's retain schedule
(:mod:`retain.logd.schedule`). A beat starts ``tick`` seconds after the one
before started (at once if that one ran longer). A beat that raises never ends
the cadence: it is logged and counts as troubled. After a troubled beat the
wait doubles, up to ``max_backoff``; the first healthy beat resets it
(:func:`beat_delay`). The work says whether a beat was troubled by returning
True (a lost connection: retrying at full speed would only hammer a server
that is down). ``next_in``, when given, may ask for the next beat sooner: it
returns seconds from now (None: no sooner than the tick) -- a replica beats
again right when another's lease runs out, to take it over. ``poke()``, from
any thread, starts the next beat at once -- a driver's archive job that
outlived its beat, once it ends, so that the next job starts without waiting
for the tick. Work that left something to finish soon asks for the next beat
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

    #: seconds from now to the next beat when sooner than the tick; None: the tick (see the module docstring)
    next_in: Callable[[], float | None] | None = None

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

    def wait(self, delay: float, started: float, troubled: bool) -> float:
        """Seconds to wait now for a beat that started at ``started``: the delay's rest, or ``next_in`` when
        sooner (never while in trouble: backing off comes first)."""
        rest = max(0.0, delay - (time.monotonic() - started))
        sooner = self.next_in() if self.next_in is not None and not troubled else None
        return rest if sooner is None else min(rest, max(0.0, sooner))


class Beat(Cadence):
    """Run ``work()`` on a beat in a thread; ``work`` returns True when the beat was troubled.

    ``stop``, when given, is the event that ends the beat (:meth:`stop` sets it): a
    caller that already has one (a signal handler's) needs no second.
    """

    def __init__(self, work: Callable[[], bool], *, tick: float, max_backoff: float, name: str,
                 stop: threading.Event | None = None, next_in: Callable[[], float | None] | None = None) -> None:
        super().__init__(tick, max_backoff)
        self.work, self.name, self.next_in = work, name, next_in
        self._own_stop = stop is None  # a caller's event is the caller's to clear
        self._stopping = stop if stop is not None else threading.Event()
        #: set by stop() and poke(): ends the wait between two beats
        self._wake = threading.Event()
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
            self._sleep(self.wait(delay, started, troubled))

    def _sleep(self, seconds: float) -> None:
        if not self._own_stop:  # a caller's stop event: that is what ends the wait
            self._stopping.wait(seconds)
            return
        self._wake.wait(seconds)
        self._wake.clear()

    def poke(self) -> None:
        """Start the next beat now (after the one in progress, if any), from any thread."""
        self._wake.set()

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
        self._wake.set()
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

    def __init__(self, work: Callable[[], Awaitable[bool]], *, tick: float, max_backoff: float, name: str,
                 next_in: Callable[[], float | None] | None = None) -> None:
        super().__init__(tick, max_backoff)
        self.work, self.name, self.next_in = work, name, next_in
        # Made by run() or start(), inside the event loop that will wait on them.
        self._stopping: asyncio.Event | None = None
        self._wake: asyncio.Event | None = None
        self._event_loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None

    def _events(self) -> asyncio.Event:
        self._stopping, self._wake = asyncio.Event(), asyncio.Event()
        self._event_loop = asyncio.get_running_loop()
        return self._stopping

    async def run(self) -> None:
        """Beat in this task until :meth:`stop` is called; a beat in progress is finished first."""
        await self._loop(self._events())

    async def _loop(self, stopping: asyncio.Event) -> None:
        wake = self._wake
        assert wake is not None
        while not stopping.is_set():
            started = time.monotonic()
            try:
                troubled = await self.work()
            except Exception:
                log.exception("%s: a beat raised; the beat goes on", self.name)
                troubled = True
            delay = self.after(troubled)
            try:
                await asyncio.wait_for(wake.wait(), self.wait(delay, started, troubled))
            except TimeoutError:
                pass
            wake.clear()

    def poke(self) -> None:
        """Start the next beat now (after the one in progress, if any), from any thread."""
        loop, wake = self._event_loop, self._wake
        if loop is not None and wake is not None and not loop.is_closed():
            loop.call_soon_threadsafe(wake.set)

    async def start(self) -> None:
        """Beat in a background task until :meth:`stop`; calling it while running is refused."""
        if self.running:
            raise RuntimeError(f"{self.name} is already running")
        self._task = asyncio.create_task(self._loop(self._events()), name=f"retain-{self.name}")

    async def stop(self) -> None:
        """Ask the beat to end after the beat in progress; wait for the task :meth:`start` made."""
        if self._stopping is not None and self._wake is not None:
            self._stopping.set()
            self._wake.set()
        task, self._task = self._task, None
        if task is not None and task is not asyncio.current_task():
            await task

    @property
    def running(self) -> bool:
        """True while the task started by :meth:`start` is alive."""
        return self._task is not None and not self._task.done()
