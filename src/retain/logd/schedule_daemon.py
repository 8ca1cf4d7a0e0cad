"""The schedule as a daemon, assembled: a TOML schedule's retain request sent to a logd on its beat.

``retain logd schedule`` is this module with click in front: each option is one field of
:class:`ScheduleConfig`; :func:`run_scheduled` is the daemon, :func:`send_once` its ``--once``.
A program that wants the schedule in its own process calls the same::

    run_scheduled(ScheduleConfig(load_schedule("retain-jobs.toml"), http=("127.0.0.1", 9466)))
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from retain.beats import Beat
from retain.clock import utc_now
from retain.daemon import run_daemon
from retain.logd.client import Address, parse_address
from retain.logd.schedule import RetainSchedule, describe_answer, schedule_beat, send_retain
from retain.wire.requests import Answer

if TYPE_CHECKING:
    from retain.wire import ClientTls, Tokens

__all__ = ["DEFAULT_CONNECT", "ScheduleConfig", "run_scheduled", "send_once"]

#: the logd the schedule sends to unless the config or the file says
DEFAULT_CONNECT = "127.0.0.1:7420"

log = logging.getLogger("retain.schedule")


@dataclass(frozen=True)
class ScheduleConfig:
    """What ``retain logd schedule`` runs, one field per option."""

    schedule: RetainSchedule
    #: the logd to send to (HOST:PORT or unix:PATH), over the file's ``connect``
    connect: str | None = None
    #: the secret of a token with ``retain`` (a logd served with tokens needs one)
    token: str | None = None
    #: how to reach a logd whose listener speaks TLS: its CA file, True (the system's CAs), an SSLContext
    tls: ClientTls = None
    #: where to serve /healthz, /readyz, /metrics and the dashboard; None serves nothing
    http: tuple[str, int] | None = None
    #: the tokens that may read the endpoints (None: anyone who reaches the address)
    readers: Tokens | None = None
    log_format: str = "text"

    def where(self) -> str:
        return self.connect or self.schedule.connect or DEFAULT_CONNECT

    def address(self) -> Address:
        return parse_address(self.where())


def send_once(config: ScheduleConfig) -> Answer:
    """Send the request once now, with this machine's clock; the answer (an error answer included)."""
    schedule = config.schedule
    return send_retain(config.address(), schedule.request_at(utc_now()), scope=schedule.scope, token=config.token,
                       tls=config.tls)


def run_scheduled(config: ScheduleConfig) -> None:
    """Send the request every ``schedule.every`` until SIGTERM or SIGINT (after the beat in progress)."""
    from retain.logd.endpoints import ScheduleOps  # the endpoints load starlette: only when served
    from retain.ops import OpsServer

    schedule = config.schedule
    ops = ScheduleOps(schedule.source, schedule.every.total_seconds()) if config.http is not None else None
    sent = [time.perf_counter()]

    def send(*args: Any, **options: Any) -> Answer:
        sent[0] = time.perf_counter()
        return send_retain(*args, token=config.token, tls=config.tls, **options)

    def on_answer(now: datetime, answer: Answer) -> None:
        summary = describe_answer(answer)
        log.info(summary, extra={"answer": answer})
        if ops is not None:
            ops.answered(now, answer, summary, time.perf_counter() - sent[0])

    def on_error(now: datetime, error: Exception) -> None:
        log.warning("retain at %s: %s", now.isoformat(), error, extra={"error": type(error).__name__})
        if ops is not None:
            ops.failed(now, error)

    beat: Beat = schedule_beat(schedule, config.address(), on_answer=on_answer, on_error=on_error, send=send)
    services: list[Any] = [beat]
    if ops is not None and config.http is not None:
        services.insert(0, OpsServer(config.http, ops.health, ops.registry, ops.page, config.readers))
    run_daemon(*services, name="retain schedule", log=log, log_format=config.log_format,
               finishing="the beat in progress", stopped=lambda: f"after {beat.beats} beats",
               started=lambda: f"retain schedule from {schedule.source}: {len(schedule.request.rules)} rules "
                               f"every {schedule.every} to {config.where()}")
