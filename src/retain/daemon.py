"""One lifecycle for every daemon: start, log, wait for SIGTERM or SIGINT, stop the same way, exit 0.

``retain streams run``, ``retain logd serve``, ``retain logd schedule``,
``retain docd serve`` and ``retain docd controller`` each hand
:func:`run_daemon` the services they run -- anything with ``start()`` (returns
once it runs, in threads of its own; raises when it cannot) and ``stop()``
(finishes the work in progress: the beat, the requests being answered) --
and it does the rest, once for all of them:

1. logging goes to stderr, one line per event, as text or JSON (:func:`retain.logs.configure_logging`);
2. SIGTERM and SIGINT are blocked in every thread before anything starts, so no
   handler ever runs in the middle of a beat or a commit; the main thread waits
   for them with ``sigwait``. A thread made *before* (a SQLite store's
   checkpointer, made by ``Store.open``) would not block them, and a signal the
   kernel hands it while the main thread is not yet in ``sigwait`` kills the
   process: a command that makes threads before it calls :func:`run_daemon`
   makes them inside :func:`stop_signals_held`;
3. the services start in order; one that cannot start (a port in use, a socket
   path taken) stops those already started and raises
   :class:`~retain.errors.ServerStartError` naming what failed, so the command
   prints one line and exits 1 instead of a traceback;
4. on the first signal the services stop in reverse order, each finishing what
   it is doing, and the function returns: the command exits 0.

Example:
    >>> run_daemon(driver, name="retention driver", started=lambda: "retention driver started: 3 streams",
    ...            stopped=lambda: f"after {driver.beats} beats")
"""

from __future__ import annotations

import logging
import signal
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Protocol

from retain.errors import RetainError, ServerStartError
from retain.logs import configure_logging

__all__ = ["STOP_SIGNALS", "Service", "run_daemon", "stop_signals_held"]

#: the signals that stop a daemon gracefully
STOP_SIGNALS = frozenset({signal.SIGTERM, signal.SIGINT})


class Service(Protocol):
    """Something a daemon runs: ``start()`` returns once it runs; ``stop()`` finishes what it is doing."""

    def start(self) -> object: ...

    def stop(self) -> object: ...


@contextmanager
def stop_signals_held() -> Iterator[None]:
    """SIGTERM and SIGINT blocked in this thread, and in every thread it starts, until the block ends (then
    delivered, if one came). Threads inherit the mask: only :func:`run_daemon`'s ``sigwait`` takes them."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def run_daemon(*services: Service, name: str, started: Callable[[], str], finishing: str = "the work in progress",
               stopped: Callable[[], str] = lambda: "", log: logging.Logger | None = None,
               log_format: str = "text") -> None:
    """Start ``services`` in order, log ``started()``, run until SIGTERM or SIGINT, then stop them in reverse order
    (saying it finishes ``finishing``: ``the beat in progress``) and log ``<name> stopped`` followed by
    ``stopped()`` (``after 12 beats``).

    Raises:
        ServerStartError: a service could not start (its OSError or RetainError is the cause);
            the services started before it are stopped first.
    """
    configure_logging(log_format)
    log = log or logging.getLogger(f"retain.{name.replace(' ', '-')}")
    with stop_signals_held():
        running = _start_all(services, name)
        log.info(started())
        try:
            received = signal.sigwait(STOP_SIGNALS)
            log.info("%s received: finishing %s", signal.Signals(received).name, finishing)
        finally:
            _stop_all(running)
        log.info("%s stopped%s", name, f" {stopped()}" if stopped() else "")


def _start_all(services: Sequence[Service], name: str) -> list[Service]:
    running: list[Service] = []
    for service in services:
        try:
            service.start()
        except (OSError, RetainError) as exc:
            _stop_all(running)
            raise ServerStartError(f"{name} cannot start: {exc}") from exc
        running.append(service)
    return running


def _stop_all(services: Sequence[Service]) -> None:
    for service in reversed(services):
        service.stop()
