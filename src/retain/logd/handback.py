"""The writer's answers handed back to the event loop, as many as are ready in one wakeup.

:func:`asyncio.wrap_future` wakes the loop once per future: the thread that resolves it writes to the
loop's self-pipe, and the loop takes a turn to read it. The writer resolves a whole group commit's
futures at once (up to :data:`~retain.logd.writer.GROUP_WRITES`), so :class:`Handback` queues what is
resolved and wakes the loop only when nothing was waiting to be handed over: one write to the pipe, one
turn of the loop, for all that arrived before that turn. Cancelling a wrapped answer cancels the
work behind it, as with :func:`asyncio.wrap_future` (work not started yet never runs).
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Future
from functools import partial
from typing import Any, TypeVar

__all__ = ["Handback"]

R = TypeVar("R")


class Handback:
    """Wraps futures resolved on other threads into futures of ``loop``, resolved in batches.

    Example:
        >>> handback = Handback(asyncio.get_running_loop())
        >>> answer = await handback.wrap(writer.submit_write(session.patch, ops))
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._lock = threading.Lock()
        self._ready: list[tuple[asyncio.Future[Any], Future[Any]]] = []
        self.wakeups = 0  # turns of the loop that handed answers over (what the batching saves is visible)

    def wrap(self, future: Future[R]) -> asyncio.Future[R]:
        """A future of the loop with ``future``'s outcome; cancelling it cancels ``future``."""
        answer: asyncio.Future[R] = self._loop.create_future()
        answer.add_done_callback(partial(_cancel_source, future))
        future.add_done_callback(partial(self._resolved, answer))
        return answer

    def _resolved(self, answer: asyncio.Future[Any], future: Future[Any]) -> None:  # the resolving thread
        with self._lock:
            waiting = bool(self._ready)
            self._ready.append((answer, future))
        if waiting:
            return  # the loop was woken for the first of them and takes this one too
        try:
            self._loop.call_soon_threadsafe(self._hand_over)
        except RuntimeError:  # the loop is closed: nobody is left to answer
            with self._lock:
                self._ready.clear()

    def _hand_over(self) -> None:  # on the loop
        with self._lock:
            ready, self._ready = self._ready, []
        self.wakeups += 1
        for answer, future in ready:
            if answer.done():  # cancelled meanwhile
                continue
            if future.cancelled():
                answer.cancel()
            elif (error := future.exception()) is not None:
                answer.set_exception(error)
            else:
                answer.set_result(future.result())


def _cancel_source(source: Future[Any], answer: asyncio.Future[Any]) -> None:
    if answer.cancelled():
        source.cancel()
