"""retain.retention.sweep: one beat written once, as steps that the sync and the asyncio driver run alike."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import redis.asyncio

from retain.archive import Archive
from retain.retention import AsyncRetentionDriver, RetentionDriver, StreamPolicy
from retain.retention.groups import Protect
from retain.retention.patterns import StreamPattern
from retain.streams import StreamRef
from retain.windows import MaxBytes, MaxLen
from tests.helpers.streams import append

NOW = datetime(2026, 9, 12, tzinfo=UTC)


def policy() -> list:
    return [(StreamRef("sweep", "plain"), MaxLen(5, approx=False)), StreamPolicy(StreamRef("sweep", "bytes"), MaxBytes("1MiB")),
            StreamPolicy(StreamRef("sweep", "protected"), MaxLen(5), protect=Protect("pending", 100)),
            StreamPolicy(StreamRef("sweep", "archived"), MaxLen(5), archive=True),
            StreamPattern("sweep:other:*", MaxLen(5))]


def kinds(driver, now=NOW) -> list[str]:
    """The kinds of step one beat of ``driver`` yields, each run by the sync driver itself."""
    steps = driver._sweeper.steps(now)
    seen, answer = [], None
    try:
        while True:
            step = steps.send(answer)
            seen.append(type(step).__name__)
            answer = driver._run(step)
    except StopIteration:
        return seen


class TestOrder:
    def test_a_beat_in_steps(self, redis_conn, tmp_path):
        """The first beat of a replica: the patterns' scan, the leases (renewed and looked at; then taken),
        the byte budgets measured, the plain trims, the protected streams, then a wait for the archive job;
        the next beat the same without the rescan and without taking leases."""
        for key in ("emq:{sweep}:stream:plain", "emq:{sweep}:stream:archived", "sweep:other:1"):
            append(redis_conn, key, 10)
        driver = RetentionDriver(redis_conn, policy(), archive=Archive(str(tmp_path / "a")), track_groups=False)
        assert kinds(driver) == ["Send", "Send", "Scan", "Send", "Trims", "Blocking", "Wait"]
        assert kinds(driver) == ["Send", "Send", "Trims", "Blocking", "Wait"]

    def test_without_replicas_no_lease_step(self, redis_conn, tmp_path):
        """Coordination off: the same beat without the leases' round trips."""
        from tests.helpers.retention import SOLO

        driver = RetentionDriver(redis_conn, policy(), archive=Archive(str(tmp_path / "a")), track_groups=False,
                                 replicas=SOLO)
        assert kinds(driver) == ["Scan", "Send", "Trims", "Blocking", "Wait"]

    def test_the_twins_run_the_same_steps(self, redis_server, redis_conn, tmp_path):
        """The asyncio driver runs the same steps to the same report (its blocking ones on a worker thread)."""
        from tests.helpers.retention import SOLO

        append(redis_conn, "emq:{sweep}:stream:plain", 10)

        async def beat():
            conn = redis.asyncio.Redis(host=redis_server.host, port=redis_server.port)
            try:
                driver = AsyncRetentionDriver(conn, policy(), archive=Archive(str(tmp_path / "b")),
                                              fold_conn=redis_conn, replicas=SOLO, clock=lambda: NOW)
                return await driver.sweep()
            finally:
                await conn.aclose()

        report = asyncio.run(beat())
        assert report.ok and report.removed_by["emq:{sweep}:stream:plain"] == 5
        assert set(report.removed_by) >= {"emq:{sweep}:stream:plain", "emq:{sweep}:stream:protected"}

