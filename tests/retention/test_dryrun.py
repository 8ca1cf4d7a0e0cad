"""retain.retention.dryrun: a dry run reads, never writes, and its figures hold against a real trim."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pytest
import redis
from hypothesis import given, settings
from hypothesis import strategies as st

from retain.archive import Archive, MaintenanceSettings, StreamId, fold, maintain
from retain.errors import InvalidPolicy, InvalidWindow, WrongTypeError
from retain.retention import RetentionDriver, StreamPolicy, StreamPreview, preview
from retain.retention.dryrun import approx_removes_at_least
from retain.retention.policy import UNLIMITED
from retain.streams import RawKey, StreamRef, trim
from retain.windows import MaxAge, MaxLen, MinId
from tests.helpers.streams import BASE_MS, fill

UTC = UTC
_keys = itertools.count()


def at_ms(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC)


def writes(conn: redis.Redis) -> set[str]:
    """Commands the server ran that can change a stream."""
    return {name for name in conn.info("commandstats") if name.startswith(("cmdstat_xtrim", "cmdstat_xadd",
                                                                           "cmdstat_xdel", "cmdstat_del"))}


class TestApproxBound:
    @pytest.mark.parametrize(("window", "outside", "node", "least"), [
        (MaxLen(10, approx=False), 75, 100, 75),
        (MaxLen(10), 75, 10, 66),
        (MaxLen(10), 5, 10, 0),
        (MinId(at_ms(BASE_MS)), 75, 10, 65),
        (MaxLen(10), 75, 0, 0),        # no entry limit on nodes: nothing is certain
        (MaxLen(10), 75, None, 0),     # the server refused CONFIG
    ])
    def test_table(self, window, outside, node, least):
        """= removes exactly what is outside; ~ at least that less one node."""
        assert approx_removes_at_least(window, outside, node) == least


class TestPreview:
    def test_figures_and_nothing_written(self, redis_conn):
        """Length, what the window keeps and what a trim removes now, with no write reaching the server."""
        fill(redis_conn, "exact", [1] * 100)
        fill(redis_conn, "aged", [1_000] * 100)     # one entry a second
        now = at_ms(BASE_MS + 100_000)
        policy = [(RawKey("exact"), MaxLen(30, approx=False)), (RawKey("aged"), MaxAge("40s", approx=False)),
                  (StreamRef("q", "absent"), MaxLen(5))]
        redis_conn.config_resetstat()
        rows = preview(redis_conn, policy, now=now)
        assert writes(redis_conn) == set()
        assert [(row.key, row.length, row.keeps, row.outside, row.at_least) for row in rows] == [
            ("exact", 100, 30, 70, 70), ("aged", 100, 41, 59, 59), ("emq:{q}:stream:absent", 0, 0, 0, 0)]
        assert rows[1].window == MinId(at_ms(BASE_MS + 60_000), approx=False)
        assert [redis_conn.xlen(key) for key in ("exact", "aged")] == [100, 100]
        assert rows[0].describe() == "exact  MAXLEN = 30  length 100  keeps 30  a trim now removes 70"

    def test_pages_through_a_long_stream(self, redis_conn, monkeypatch):
        """Counting below a MINID floor reads in pages and counts each entry once."""
        monkeypatch.setattr("retain.retention.dryrun.PAGE", 7)
        fill(redis_conn, "long", [1] * 50)
        (row,) = preview(redis_conn, [(RawKey("long"), MinId(at_ms(BASE_MS + 36), approx=False))], now=at_ms(BASE_MS))
        assert (row.outside, row.keeps) == (35, 15)

    def test_wrongtype_row(self, redis_conn):
        """A key that is not a stream carries its error; the other rows are still read."""
        redis_conn.set("bad", "x")
        fill(redis_conn, "good", [1] * 10)
        bad, good = preview(redis_conn, [(RawKey("bad"), MaxLen(1)), (RawKey("good"), MaxLen(4, approx=False))],
                            now=datetime.now(UTC))
        assert isinstance(bad.error, WrongTypeError) and "WRONGTYPE" in bad.describe()
        assert isinstance(bad.error.__cause__, redis.exceptions.ResponseError)
        assert (good.error, good.outside) == (None, 6)

    def test_needs_an_aware_now(self, redis_conn):
        """A naive now is refused before any read."""
        with pytest.raises(InvalidWindow):
            preview(redis_conn, [(RawKey("k"), MaxLen(1))], now=datetime(2026, 1, 1))

    @settings(max_examples=60)
    @given(length=st.integers(min_value=0, max_value=800), node=st.integers(min_value=1, max_value=80),
           by_age=st.booleans(), data=st.data())
    def test_approx_range_holds_against_a_real_trim(self, redis_conn, node_size, length, node, by_age, data):
        """The ~ range a dry run prints contains what the driver's own XTRIM then removes."""
        node_size(node)
        key = f"prop:preview:{next(_keys)}"
        fill(redis_conn, key, [1] * length)
        if by_age:
            window = MinId(at_ms(data.draw(st.integers(min_value=BASE_MS - 2, max_value=BASE_MS + length + 2))))
        else:
            window = MaxLen(data.draw(st.integers(min_value=0, max_value=length + 5)))
        (row,) = preview(redis_conn, [(RawKey(key), window)], now=datetime.now(UTC))
        assert row == StreamPreview(key, window, length, row.outside, row.at_least, node)
        removed = trim(redis_conn, RawKey(key), window, limit=UNLIMITED)
        assert row.at_least <= removed <= row.outside
        redis_conn.delete(key)

    def test_exact_count_matches_an_exact_trim(self, redis_conn):
        """For = the dry run's count is what the trim then removes."""
        fill(redis_conn, "s", [0, 1, 0, 0, 2, 1] * 20)   # several entries share a millisecond
        window = MinId(at_ms(BASE_MS + 100), approx=False)
        (row,) = preview(redis_conn, [(RawKey("s"), window)], now=datetime.now(UTC))
        assert trim(redis_conn, RawKey("s"), window) == row.outside == row.at_least


class TestArchivedPreview:
    """An archived entry's preview: what the beat would fold and then trim, against the driver's real beat."""

    def test_figures_and_nothing_written(self, redis_conn, tmp_path):
        """W from the archive, the entries a fold would archive, what the trim after it removes; nothing written."""
        archive = Archive(str(tmp_path / "archive"))
        ids = fill(redis_conn, "archived", [1] * 100)
        fold(redis_conn, RawKey("archived"), archive, f"{ids[29][0]}-{ids[29][1]}")
        policy = [StreamPolicy(RawKey("archived"), MaxLen(30, approx=False), archive=True)]
        redis_conn.config_resetstat()
        (row,) = preview(redis_conn, policy, now=datetime.now(UTC), archive=archive)
        assert writes(redis_conn) == set() and archive.version == 1
        assert (row.archived, row.watermark, row.folds, row.length, row.outside, row.keeps) == (
            True, StreamId(*ids[29]), 40, 100, 70, 30)
        assert row.describe() == (f"archived  MAXLEN = 30  archived, W {ids[29][0]}-{ids[29][1]}  length 100  "
                                  "keeps 30  a fold now archives 40, then a trim removes 70")

    def test_maintenance_previewed(self, redis_conn, tmp_path):
        """With the maintenance settings, a row also says what maintenance would expire and compact now: what
        maintenance then does; the preview writes nothing."""
        archive = Archive(str(tmp_path / "kept"))
        key = RawKey("aging")
        ids = fill(redis_conn, "aging", [1] * 60)
        for upto in (19, 39, 59):  # three files of 20 entries
            fold(redis_conn, key, archive, "{}-{}".format(*ids[upto]))
        settings = MaintenanceSettings(every=None, max_age=timedelta(milliseconds=100),
                                       log_retention=timedelta(seconds=1), vacuum_retention=timedelta(seconds=1))
        now = at_ms(ids[29][0] + 100)  # rows before the 30th are past max_age
        policy = [StreamPolicy(key, MaxLen(60), archive=True)]
        (row,) = preview(redis_conn, policy, now=now, archive=archive, maintenance=settings)
        assert (row.expires, row.compacts) == (29, 2) and archive.version == 3
        assert row.describe().endswith("; maintenance would expire 29 archived entries and compact 2 files")
        done = maintain(archive, settings, now=now).streams[0]
        assert (done.expired, done.compacted) == (row.expires, row.compacts)

    def test_needs_an_archive(self, redis_conn):
        """An archived entry with no archive is refused before any read."""
        with pytest.raises(InvalidPolicy, match="has archive=True, but no archive was given"):
            preview(redis_conn, [StreamPolicy(RawKey("k"), MaxLen(1), archive=True)], now=datetime.now(UTC))

    @settings(max_examples=40)
    @given(length=st.integers(min_value=0, max_value=400), node=st.integers(min_value=1, max_value=50),
           approx=st.booleans(), by_age=st.booleans(), data=st.data())
    def test_matches_the_beat_it_previews(self, redis_conn, node_size, length, node, approx, by_age, data):
        """For any stream, W and fold_min_entries, the beat folds what the preview said and removes within its
        range (exactly its count for =); the preview itself changes nothing."""
        node_size(node)
        key = f"prop:archived:{next(_keys)}"
        ids = fill(redis_conn, key, [1] * length)
        archive = Archive("memory://")
        folded_by_hand = data.draw(st.integers(min_value=0, max_value=length))
        if folded_by_hand:
            fold(redis_conn, RawKey(key), archive, "{}-{}".format(*ids[folded_by_hand - 1]))
        if by_age:
            window = MinId(at_ms(data.draw(st.integers(min_value=BASE_MS - 2, max_value=BASE_MS + length + 2))), approx)
        else:
            window = MaxLen(data.draw(st.integers(min_value=0, max_value=length + 5)), approx)
        min_entries = data.draw(st.integers(min_value=1, max_value=60))
        policy = [StreamPolicy(RawKey(key), window, archive=True)]
        now = datetime.now(UTC)
        (row,) = preview(redis_conn, policy, now=now, archive=archive, fold_min_entries=min_entries)
        assert row.error is None and redis_conn.xlen(key) == length
        report = RetentionDriver(redis_conn, policy, archive=archive, fold_min_entries=min_entries,
                                 clock=lambda: now).sweep()
        assert report.ok and report.folded_by[key] == row.folds
        assert row.at_least <= report.removed_by[key] <= row.outside
        if not approx:
            assert report.removed_by[key] == row.outside
        redis_conn.delete(key)
