"""retain.archive.gap: entries in neither tier are an ArchiveGap, never a shorter read (INV-NOSILENTGAP).

Deleting the archive's newest log entry made a merge-read return 2,500 of 3,000
entries with no error, and the next fold reported success. Each test makes the damage by hand, on a
real Redis and a real archive, and checks the read, the fold and the beat all refuse.
"""

from __future__ import annotations

import os
import re

import pytest
import redis

from retain.archive import Archive, StreamId, fold, fold_then_trim, fold_then_trim_all, read
from retain.archive.gap import live_info, marks_key
from retain.archive.verify import verify
from retain.errors import ArchiveCorrupt, ArchiveGap
from retain.retention import RetentionDriver, StreamPolicy
from retain.windows import MaxLen
from tests.helpers.archive import NO_GAP_CHECK, keeps_entries_added
from tests.helpers.retention import SOLO
from tests.helpers.rival import proxied
from tests.helpers.streams import append as append_entries

pytestmark = pytest.mark.parametrize("store_kind", ["local"], indirect=True)


def ids_of(entries) -> list[bytes]:
    return [entry_id for entry_id, _ in entries]


def folded(redis_conn, stream, archive, append, count: int, keep: int, start: int = 0) -> list[bytes]:
    ids = append(stream, count, start)
    fold_then_trim(redis_conn, stream, archive, MaxLen(keep, approx=False))
    return ids


def test_healthy_stream_has_no_gap(redis_conn, archive, stream, append):
    """Fold and trim, beat after beat: every entry is read back, the archive knows W's ordinal."""
    if not keeps_entries_added(redis_conn):
        pytest.skip(NO_GAP_CHECK)
    ids = folded(redis_conn, stream, archive, append, 300, 50)
    ids += folded(redis_conn, stream, archive, append, 300, 50, 300)
    assert ids_of(read(redis_conn, stream, archive)) == ids
    watermark, ordinal = archive.positions([stream])[stream.key]
    assert watermark == StreamId.parse(ids[-51]) and ordinal == len(ids) - 50


def test_trimmed_past_w_by_hand(redis_conn, archive, stream, append):
    """XTRIM past W by hand: the read, the fold and a driver's beat each raise ArchiveGap naming the stream."""
    if not keeps_entries_added(redis_conn):
        pytest.skip(NO_GAP_CHECK)
    ids = folded(redis_conn, stream, archive, append, 300, 100)
    redis_conn.xtrim(stream.key, maxlen=20, approximate=False)  # 80 entries after W gone from both tiers
    with pytest.raises(ArchiveGap, match=re.escape(stream.key) + r".*80 entries after the archive's W"):
        list(read(redis_conn, stream, archive))
    assert isinstance(ArchiveGap("x"), ArchiveCorrupt)
    # A range that does not reach into the gap is still served.
    assert ids_of(read(redis_conn, stream, archive, end=ids[199])) == ids[:200]
    assert ids_of(read(redis_conn, stream, archive, start=ids[-20])) == ids[-20:]
    with pytest.raises(ArchiveGap):
        fold(redis_conn, stream, archive)
    outcome, = fold_then_trim_all(redis_conn, [(stream, MaxLen(5))], archive)
    assert isinstance(outcome.error, ArchiveGap)
    report = RetentionDriver(redis_conn, [StreamPolicy(stream, MaxLen(5), archive=True)], archive=archive).sweep()
    assert isinstance(report.fold_failures[stream.key], ArchiveGap)
    assert redis_conn.xlen(stream.key) == 20, "nothing more is trimmed over the gap"


def test_newest_log_entry_deleted(redis_conn, archive, stream, append, tmp_path):
    """The archive loses its newest commit (W goes back) after the stream was trimmed past the old W: the count
    tells (Redis >= 7), and the trim mark does on every server."""
    folded(redis_conn, stream, archive, append, 300, 50)
    folded(redis_conn, stream, archive, append, 300, 50, 300)
    root = archive.location.url.removeprefix("file://")
    newest = os.path.join(root, "_delta_log", f"{archive.version:020d}.json")
    os.remove(newest)
    damaged = Archive(archive.url)
    with pytest.raises(ArchiveGap, match="neither archived nor live|in neither tier"):
        list(read(redis_conn, stream, damaged))
    outcome, = fold_then_trim_all(redis_conn, [(stream, MaxLen(50, approx=False))], damaged)
    assert isinstance(outcome.error, ArchiveGap), "the next fold does not report success over the gap"


def test_xdel_is_no_gap(redis_conn, archive, stream, append):
    """An entry XDELed by its consumer above W is no damage: nothing is refused, and verify says the stream's
    live side is unverifiable (a count cannot tell that delete from a loss) rather than nothing."""
    ids = folded(redis_conn, stream, archive, append, 300, 100)
    redis_conn.xdel(stream.key, ids[-10])
    info = live_info(redis_conn, stream.key)
    assert info is not None and (info.deleted_above(archive.watermark(stream)) or not keeps_entries_added(redis_conn))
    assert ids_of(read(redis_conn, stream, archive)) == [entry for entry in ids if entry != ids[-10]]
    assert "XDEL" in verify(archive, redis_conn).unverifiable.get(stream.key, "") or \
        not keeps_entries_added(redis_conn)
    assert fold(redis_conn, stream, archive).entries == 99


def test_xdel_at_or_below_w_then_trimmed_past_it(redis_conn, archive, stream, append):
    """A consumer XDELs an entry the archive already holds; later the stream is trimmed past W by hand. The
    check used to give up on any stream ever XDELed: the count still tells, since no XDEL went above W."""
    if not keeps_entries_added(redis_conn):
        pytest.skip(NO_GAP_CHECK)
    ids = append(stream, 300)
    fold(redis_conn, stream, archive, ids[199].decode())
    assert archive.positions([stream])[stream.key] == (StreamId.parse(ids[199]), 200)
    redis_conn.xdel(stream.key, ids[50])
    redis_conn.xtrim(stream.key, maxlen=20, approximate=False)  # entries #201..#280 gone from both tiers
    with pytest.raises(ArchiveGap, match=r"80 entries after the archive's W"):
        list(read(redis_conn, stream, archive))
    assert [damage.object for damage in verify(archive, redis_conn).damage] == [f"stream {stream.key}"]


def test_a_stream_that_reaches_w_has_no_gap_whatever_was_xdeled(redis_conn, archive, stream, append):
    """The live stream still holds entries at or below W: nothing after W can have been trimmed (a trim takes
    the head), whatever was XDELed above W, on every server (6.2 too): verified, not unverifiable."""
    ids = append(stream, 300)
    fold(redis_conn, stream, archive, ids[199].decode())
    redis_conn.xdel(stream.key, ids[250], ids[299])
    report = verify(archive, redis_conn)
    assert report.ok and not report.unverifiable, (report.damage, report.unverifiable)
    assert len(ids_of(read(redis_conn, stream, archive))) == 298


def test_the_beat_leaves_a_trim_mark(redis_conn, archive, stream, append):
    """Each fold-then-trim that moved W leaves it in the table's hash of trim marks, in the trims' round trip."""
    ids = append(stream, 300)
    fold_then_trim_all(redis_conn, [(stream, MaxLen(100, approx=False))], archive)
    assert redis_conn.hget(marks_key(archive.table_id), stream.key) == ids[199]
    folded(redis_conn, stream, archive, append, 100, 100, 300)
    assert redis_conn.hget(marks_key(archive.table_id), stream.key) == ids[199 + 100]


def test_lost_commit_found_by_the_mark_on_every_server(redis_conn, archive, stream, append):
    """The archive loses its newest commit and the stream was XDELed above the old W (so no count can tell):
    the driver's next beat refuses the stream, and so does a merge-read, instead of serving a shorter answer."""
    ids = append(stream, 300)
    driver = RetentionDriver(redis_conn, [StreamPolicy(stream, MaxLen(50, approx=False), archive=True)],
                             archive=archive, replicas=SOLO)
    driver.sweep()
    ids += append(stream, 300, 300)
    driver.sweep()
    redis_conn.xdel(stream.key, ids[-5])
    root = archive.location.url.removeprefix("file://")
    os.remove(os.path.join(root, "_delta_log", f"{archive.version:020d}.json"))
    damaged = Archive(archive.url)
    with pytest.raises(ArchiveGap, match="the archive lost the commits in between"):
        list(read(redis_conn, stream, damaged))
    report = RetentionDriver(redis_conn, [StreamPolicy(stream, MaxLen(50, approx=False), archive=True)],
                             archive=damaged, replicas=SOLO).sweep()
    assert isinstance(report.fold_failures[stream.key], ArchiveGap)


@pytest.mark.parametrize("entry_point", ["fold_then_trim", "fold_then_trim_all"])
def test_an_xdel_during_the_folds_reads_invents_no_gap(redis_server, archive, stream, entry_point):
    """A consumer XDELs an entry of the range being folded after the fold read the counters, before it read the
    entries: 199 of the first 200 entries are folded. Counting them as W's ordinal would make every later check
    see one entry missing; the counters read again after the reads say an XDEL came, so the ordinal is left
    unknown, and known again from the next fold that starts at the live stream's first entry."""
    def rival(command):
        if command[:2] == (b"XRANGE", stream.key.encode()) and not done:
            done.append(proxy.direct.xdel(stream.key, ids[150]))

    done: list[int] = []
    with proxied(redis_server, rival) as proxy, redis_server.client() as direct:
        ids = append_entries(direct, stream.key, 300)
        with redis.Redis.from_url(proxy.url) as conn:
            if entry_point == "fold_then_trim":
                fold_then_trim(conn, stream, archive, MaxLen(100, approx=False))
            else:
                outcome, = fold_then_trim_all(conn, [(stream, MaxLen(100, approx=False))], archive)
                assert outcome.error is None
        assert done == [1], "the rival's XDEL came between the counters and the reads"
        assert archive.positions([stream])[stream.key] == (StreamId.parse(ids[199]), 0)
        assert ids_of(read(direct, stream, archive)) == ids[:150] + ids[151:]
        ids += append_entries(direct, stream.key, 100)
        fold_then_trim(direct, stream, archive, MaxLen(100, approx=False))
        known = 300 if keeps_entries_added(direct) else 0  # Redis 6.2 counts no entries added: never known
        assert archive.positions([stream])[stream.key] == (StreamId.parse(ids[299]), known)
