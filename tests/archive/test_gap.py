"""retain.archive.gap: entries in neither tier are an ArchiveGap, never a shorter read (INV-NOSILENTGAP).

Issue 13, finding 5: deleting the archive's newest log entry made a merge-read return 2,500 of 3,000
entries with no error, and the next fold reported success. Each test makes the damage by hand, on a
real Redis and a real archive, and checks the read, the fold and the beat all refuse.
"""

from __future__ import annotations

import os
import re

import pytest

from retain.archive import Archive, StreamId, fold, fold_then_trim, fold_then_trim_all, read
from retain.archive.gap import live_info
from retain.errors import ArchiveCorrupt, ArchiveGap
from retain.retention import RetentionDriver, StreamPolicy
from retain.windows import MaxLen
from tests.helpers.archive import NO_GAP_CHECK, keeps_entries_added

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
    """The archive loses its newest commit (W goes back) after the stream was trimmed past the old W."""
    if not keeps_entries_added(redis_conn):
        pytest.skip(NO_GAP_CHECK)
    folded(redis_conn, stream, archive, append, 300, 50)
    folded(redis_conn, stream, archive, append, 300, 50, 300)
    root = archive.location.url.removeprefix("file://")
    newest = os.path.join(root, "_delta_log", f"{archive.version:020d}.json")
    os.remove(newest)
    damaged = Archive(archive.url)
    with pytest.raises(ArchiveGap, match="neither archived nor live"):
        list(read(redis_conn, stream, damaged))
    outcome, = fold_then_trim_all(redis_conn, [(stream, MaxLen(50, approx=False))], damaged)
    assert isinstance(outcome.error, ArchiveGap), "the next fold does not report success over the gap"


def test_xdel_is_no_gap(redis_conn, archive, stream, append):
    """An entry XDELed by its consumer is no damage: once anything was XDELed the count proves nothing, so no
    check is made (documented), and nothing is refused."""
    ids = folded(redis_conn, stream, archive, append, 300, 100)
    redis_conn.xdel(stream.key, ids[-10])
    info = live_info(redis_conn, stream.key)
    assert info is not None and not info.countable
    assert ids_of(read(redis_conn, stream, archive)) == [entry for entry in ids if entry != ids[-10]]
    assert fold(redis_conn, stream, archive).entries == 99
