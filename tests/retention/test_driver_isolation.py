"""retain.retention.driver: one stream's archive trouble stays that stream's (INV-ISOLATION), on real servers.

With SeaweedFS frozen (SIGSTOP) every beat blocked for the store's retries and a plain
stream beside the archived one grew without bound. Now a beat waits for its archive work at most
``archive_deadline``; the plain stream is trimmed every beat; the late archive job never commits or trims
after its beat, and no second job starts while it runs; nothing is lost once the store thaws.
"""

from __future__ import annotations

import os
import signal
import uuid

import pytest

from retain.errors import ArchiveTimeout, InvalidPolicy
from retain.retention import RetentionDriver, StreamPolicy
from retain.servers import RedisServer, SeaweedServer
from retain.streams import StreamRef
from retain.windows import MaxLen
from tests.helpers.archive import archived_ids
from tests.helpers.retention import SOLO, Reports
from tests.helpers.streams import append
from tests.helpers.waiting import wait_for


def fresh(name: str) -> StreamRef:
    return StreamRef("iso", f"{name}-{uuid.uuid4().hex[:8]}")


def ms_seq(entry_id: bytes) -> tuple[int, int]:
    ms, seq = entry_id.split(b"-")
    return int(ms), int(seq)


@pytest.fixture
def weed():
    """A SeaweedFS of this test's own: it is frozen, and the session's must stay healthy for the others."""
    with SeaweedServer() as server:
        yield server


def test_frozen_store_fails_only_the_archived_stream(redis_conn, weed):
    plain, archived = fresh("plain"), fresh("archived")
    archive = weed.archive(f"frozen-{uuid.uuid4().hex}")
    policy = [StreamPolicy(plain, MaxLen(50, approx=False)),
              StreamPolicy(archived, MaxLen(50, approx=False), archive=True)]
    # A generous deadline where the store is healthy (a loaded machine may take seconds), a short one to freeze.
    healthy = RetentionDriver(redis_conn, policy, archive=archive, archive_deadline=120, replicas=SOLO)
    driver = RetentionDriver(redis_conn, policy, archive=archive, archive_deadline=0.5, replicas=SOLO)
    appended = append(redis_conn, archived.key, 200)
    append(redis_conn, plain.key, 200)
    assert healthy.sweep().ok  # both trimmed, the archived one after its fold
    assert redis_conn.xlen(archived.key) == 50
    os.kill(weed.pid, signal.SIGSTOP)
    try:
        for _ in range(4):
            appended += append(redis_conn, archived.key, 100)
            append(redis_conn, plain.key, 100)
            report = driver.sweep()
            assert redis_conn.xlen(plain.key) == 50, "the plain stream is trimmed every beat"
            assert report.removed_by[plain.key] == 100
            assert isinstance(report.failures[archived.key], ArchiveTimeout)
            assert archived.key in report.fold_failures
            assert plain.key not in report.failures
        assert redis_conn.xlen(archived.key) == 50 + 400, "nothing leaves the archived stream unarchived"
    finally:
        os.kill(weed.pid, signal.SIGCONT)
    # Thawed: the late job ends, and neither commits nor trims; then a beat folds and trims again.
    wait_for(lambda: not driver.archiving, "the late archive job to end", timeout=120)
    assert redis_conn.xlen(archived.key) == 50 + 400, "the job the beat gave up on trimmed nothing"
    assert healthy.sweep().ok
    assert redis_conn.xlen(archived.key) == 50
    live = {ms_seq(entry_id) for entry_id, _ in redis_conn.xrange(archived.key)}
    kept = set(archived_ids(archive, archived)) | live
    assert kept == {ms_seq(entry_id) for entry_id in appended}, "no entry lost"
    assert len(archived_ids(archive, archived)) == len(set(archived_ids(archive, archived))), "none archived twice"


def test_a_running_driver_trims_plain_streams_every_tick_while_the_store_is_frozen(redis_conn, weed):
    """INV-ISOLATION on a runner: with the object store frozen, the beats go on at their tick, each trimming the
    plain stream; the archive job goes on beside them (its streams reported as archiving), never two at once,
    and is given up at its deadline. A beat that waited for its job would have made no beat for the deadline."""
    plain, archived = fresh("plain"), fresh("archived")
    archive = weed.archive(f"frozen-{uuid.uuid4().hex}")
    policy = [StreamPolicy(plain, MaxLen(50, approx=False)),
              StreamPolicy(archived, MaxLen(50, approx=False), archive=True)]
    append(redis_conn, archived.key, 100)
    reports = Reports()
    driver = RetentionDriver(redis_conn, policy, archive=archive, tick=0.1, archive_deadline=3.0,
                             on_report=reports, replicas=SOLO)
    with driver:
        wait_for(lambda: any(archived.key in report.folded_by for report in reports.since(0)), "a first fold")
        os.kill(weed.pid, signal.SIGSTOP)
        try:
            frozen_from = len(reports)
            wait_for(lambda: any(isinstance(report.failures.get(archived.key), ArchiveTimeout)
                                 for report in reports.since(frozen_from)), "the job to be given up", timeout=60)
            during = reports.since(frozen_from)
        finally:
            os.kill(weed.pid, signal.SIGCONT)
        wait_for(lambda: not driver.archiving, "the late job to end", timeout=120)
    archiving = [report for report in during if archived.key in report.archiving]
    assert len(during) >= 10 and len(archiving) >= 5, "beats went on at the tick while the job was stuck"
    assert all(plain.key in report.removed_by for report in during), "the plain stream was trimmed every beat"


def test_deadline_is_checked(redis_conn):
    with pytest.raises(InvalidPolicy, match="archive_deadline: must be a positive number of seconds"):
        RetentionDriver(redis_conn, [(fresh("x"), MaxLen(5))], archive_deadline=0)


def test_wrong_password_is_not_an_outage(tmp_path):
    """A wrong Redis password fails plain and archived streams with AuthenticationError, never ServerUnavailable:
    the beat does not back off as for an outage."""
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    from retain.archive import Archive
    from retain.errors import AuthenticationError, ServerUnavailable

    plain, archived = fresh("plain"), fresh("archived")
    with RedisServer(config={"requirepass": "s3cret"}) as server, \
            server.client(password="wrong", retry=Retry(NoBackoff(), 0)) as conn:
        policy = [(plain, MaxLen(5)), StreamPolicy(archived, MaxLen(5), archive=True)]
        archive = Archive(str(tmp_path / "archive"))
        report = RetentionDriver(conn, policy, archive=archive, replicas=SOLO).sweep()
        shared = RetentionDriver(conn, policy, archive=archive).sweep()
    assert set(report.failures) == {plain.key, archived.key}
    for error in report.failures.values():
        assert isinstance(error, AuthenticationError) and not isinstance(error, ServerUnavailable)
    assert not report.lost_connection
    assert isinstance(shared.lease_error, AuthenticationError) and not shared.lost_connection
