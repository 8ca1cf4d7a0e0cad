"""The server's one writer thread, with group commit.

Everything a server does to its store -- patches, sessions, watches, a retain's batches --
runs on one thread, in the order it was submitted (:class:`Writer` is an
:class:`~concurrent.futures.Executor`, so ``loop.run_in_executor(writer, ...)`` works as with
a one-worker pool). Writes submitted with :meth:`Writer.submit_write` (patches) that queue up
behind each other while the writer is busy are committed together when it comes to them
(:meth:`~retain.logd.store.Store.together`): each its own commit, numbered one after the other,
one failing its precondition failing alone, and one sync of the file for all of them. No future
is resolved -- no answer goes out, no watcher hears of a commit -- before that sync: what was
answered is as durable as one commit per transaction made it.

Why: with ``synchronous=full`` a commit's fsync takes milliseconds, and one transaction per patch
made the writer spend most of its time waiting for the disk while the patches queued behind it
(`bench/logd_load.py`).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

from retain.logd.store import Outcome, Store, run_write

__all__ = ["GROUP_WRITES", "Hand", "Writer"]

#: the most queued writes one transaction takes: a bound on what one failed sync fails, and on how long the
#: first write of a group waits for the last
GROUP_WRITES = 64
T = TypeVar("T")
#: ``hand(writes)``: runs a prefix of a group's small writes elsewhere (:class:`~retain.logd.loop_hand.LoopHand`:
#: on the event loop) while the writer waits, and returns their outcomes
Hand = Callable[[Sequence[Callable[[], Any]]], list[Outcome[Any]]]


@dataclass(frozen=True, slots=True)
class _Work:
    run: Callable[[], Any]
    future: Future[Any]
    groups: bool  # a write that may share a transaction with the ones queued beside it
    small: bool = False  # a write the writer's hand may run


class Writer(Executor):
    """One thread running what is submitted in order; queued writes (:meth:`submit_write`) share a transaction.

    Example:
        >>> writer = Writer(store)
        >>> writer.submit_write(session.patch, [{"set": "a", "value": 1}]).result().commit
        1
    """

    def __init__(self, store: Store, *, group_writes: int = GROUP_WRITES, name: str = "logd-writer") -> None:
        if type(group_writes) is not int or group_writes < 1:
            raise ValueError(f"group_writes must be an int >= 1 (got {group_writes!r})")
        self._store, self._most = store, group_writes
        #: runs the small writes of a group elsewhere (the server's event loop) while the writer waits; None: here
        self.hand: Hand | None = None
        # A SimpleQueue, not a deque under a Condition: put() and get() are C, and a put wakes the writer without
        # Condition.notify's Python (it showed in the event loop's profile: every patch is put from there).
        self._inbox: queue.SimpleQueue[_Work | None] = queue.SimpleQueue()  # None: shut down once all before it ran
        self._carried: list[_Work | None] = []  # taken from the inbox but not into the last batch: the next's first
        self._closing = threading.Lock()  # a put and the shutdown's None, in one order
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        """Run ``fn(*args, **kwargs)`` on the writer, alone, after everything submitted before it."""
        return self._put(partial(fn, *args, **kwargs), groups=False)

    def submit_write(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        """Run ``fn(*args, **kwargs)`` -- at most one commit through the store -- on the writer after everything
        submitted before it, in one transaction with the writes queued right beside it. Its future is resolved
        once that transaction is durable (or failed)."""
        return self._put(partial(fn, *args, **kwargs), groups=True)

    def submit_small_write(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        """:meth:`submit_write` for a small patch, which the writer's :attr:`hand` may run while it waits."""
        return self._put(partial(fn, *args, **kwargs), groups=True, small=True)

    def _put(self, run: Callable[[], T], *, groups: bool, small: bool = False) -> Future[T]:
        future: Future[T] = Future()
        with self._closing:
            if self._closed:
                raise RuntimeError("cannot submit to the logd writer after it shut down")
            self._inbox.put(_Work(run, future, groups, small))
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Stop taking work; the writer finishes what was submitted (``cancel_futures``: what has not started
        is cancelled instead), then ends. ``wait``: return once it has."""
        with self._closing:
            if not self._closed:
                self._closed = True
                if cancel_futures:  # what has not started: held back from the last batch, or not taken yet
                    for work in list(self._carried):
                        if work is not None:
                            work.future.cancel()
                    while True:
                        try:
                            work = self._inbox.get_nowait()
                        except queue.Empty:
                            break
                        if work is not None:
                            work.future.cancel()
                self._inbox.put(None)
        if wait and self._thread is not threading.current_thread():
            self._thread.join()

    def _run(self) -> None:
        while True:
            batch = self._next()
            if batch is None:
                return
            if len(batch) == 1 and not batch[0].groups:
                _run_alone(batch[0])
            else:
                self._run_together(batch)

    def _next(self) -> list[_Work] | None:
        """The next work, and the writes queued right behind it when it is a write (up to the bound); None at
        the end."""
        first = self._carried.pop() if self._carried else self._inbox.get()
        if first is None:
            return None
        batch = [first]
        while first.groups and len(batch) < self._most:
            try:
                following = self._inbox.get_nowait()
            except queue.Empty:
                break
            if following is None or not following.groups:
                self._carried.append(following)  # not for this batch: the first of the next
                break
            batch.append(following)
        return batch

    def _run_together(self, batch: list[_Work]) -> None:
        started = [work for work in batch if work.future.set_running_or_notify_cancel()]
        if not started:
            return
        hand, small = self.hand, [work.small for work in started]
        try:
            outcomes = self._store.together([work.run for work in started],
                                            apply=None if hand is None or not any(small) else partial(_apply, hand, small))
        except BaseException as exc:  # the store could not even say what became of them: each fails with it
            for work in started:
                work.future.set_exception(exc)
            return
        for work, outcome in zip(started, outcomes, strict=True):
            if outcome.error is not None:
                work.future.set_exception(outcome.error)
            else:
                work.future.set_result(outcome.value)


def _run_alone(work: _Work) -> None:
    if not work.future.set_running_or_notify_cancel():
        return
    try:
        result = work.run()
    except BaseException as exc:  # the caller's to see, as a pool's worker hands it over
        work.future.set_exception(exc)
    else:
        work.future.set_result(result)


def _apply(hand: Hand, small: list[bool], writes: Sequence[Callable[[], T]]) -> list[Outcome[T]]:
    """A group's writes in order: each run of small ones by ``hand``, the rest -- and a small one the hand
    gave back -- here."""
    outcomes: list[Outcome[T]] = []
    while len(outcomes) < len(writes):
        start = end = len(outcomes)
        while end < len(writes) and small[end]:
            end += 1
        if end > start:
            outcomes.extend(hand(writes[start:end]))
        if len(outcomes) < len(writes) and (end == start or len(outcomes) < end):
            outcomes.append(run_write(writes[len(outcomes)]))
    return outcomes
