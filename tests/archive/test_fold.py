"""retain.archive.fold: fold before trim, on every store kind, against a real Redis."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import redis

from retain.archive import Archive, StreamId, fold, fold_boundary, fold_then_trim, read, trim_past
from retain.errors import (
    ArchiveUnavailable,
    InvalidInput,
    InvalidStreamId,
    InvalidWindow,
    UnarchivableEntry,
    WrongTypeError,
)
from retain.servers import free_port
from retain.streams import StreamRef
from retain.windows import MaxAge, MaxLen, MinId, MinStreamId
from tests.helpers.rival import proxied
from tests.helpers.streams import append as append_entries


def ids_of(entries) -> list[bytes]:
    return [entry_id for entry_id, _ in entries]


class TestFold:
    def test_folds_everything_and_is_idempotent(self, redis_conn, archive, stream, append):
        """A fold archives every entry in files of at most segment_entries, a commit each; a re-run folds nothing."""
        ids = append(stream, 2500)
        result = fold(redis_conn, stream, archive, count=300, segment_entries=1000)
        assert (result.entries, result.files, result.version) == (2500, 3, 3)
        assert result.watermark == StreamId.parse(ids[-1])
        state = archive.state(stream)
        assert [file.count for file in state.files] == [1000, 1000, 500]
        assert state.entries == 2500 and state.size == sum(file.size for file in state.files)
        again = fold(redis_conn, stream, archive)
        assert (again.entries, again.files, again.watermark) == (0, 0, result.watermark)
        assert ids_of(read(redis_conn, stream, archive)) == ids

    def test_upto_forms(self, redis_conn, archive, stream):
        """upto takes an id, '<ms>' or a datetime, and folds up to it, included."""
        for ms in range(1, 11):
            for seq in range(2):
                redis_conn.xadd(stream.key, {"v": "x"}, id=f"{ms * 1000}-{seq}")
        assert fold(redis_conn, stream, archive, "2000-0").watermark == StreamId(2000, 0)
        assert fold(redis_conn, stream, archive, "4000").watermark == StreamId(4000, 1)
        instant = datetime.fromtimestamp(6, UTC)
        assert fold(redis_conn, stream, archive, instant).watermark == StreamId(6000, 1)
        assert fold(redis_conn, stream, archive, StreamId(7000, 0)).watermark == StreamId(7000, 0)
        assert archive.state(stream).entries == 13

    def test_min_entries_waits_for_more(self, redis_conn, archive, stream, append):
        """With fewer than min_entries waiting, nothing is written; with enough, all of it is."""
        append(stream, 40)
        assert fold(redis_conn, stream, archive, min_entries=50).entries == 0
        assert archive.version == -1  # no commit: the table is not even made
        append(stream, 20, start=40)
        assert fold(redis_conn, stream, archive, min_entries=50).entries == 60

    def test_empty_and_missing_stream(self, redis_conn, archive, stream):
        """A stream with nothing to fold leaves the archive as it is."""
        result = fold(redis_conn, stream, archive)
        assert (result.entries, result.watermark, result.version) == (0, None, -1)

    def test_decoding_connection(self, redis_server, archive, stream):
        """A connection that decodes responses folds and reads back str, as its XRANGE gives."""
        conn = redis_server.client(decode_responses=True)
        for index in range(120):
            conn.xadd(stream.key, {"player": "ada", "n": str(index)})
        expected = conn.xrange(stream.key)
        fold(conn, stream, archive, count=50)
        conn.xtrim(stream.key, minid="0-0", approximate=False)
        conn.delete(stream.key)
        assert list(read(conn, stream, archive)) == expected
        conn.close()

    def test_wrong_type(self, redis_conn, archive, stream):
        """A key that is no stream is WrongTypeError, and nothing is archived."""
        redis_conn.set(stream.key, "x")
        with pytest.raises(WrongTypeError):
            fold(redis_conn, stream, archive, "5-0")
        assert archive.version == -1

    @pytest.mark.parametrize(("options", "error"), [
        ({"count": 0}, InvalidInput), ({"segment_entries": -1}, InvalidInput), ({"min_entries": True}, InvalidInput),
        ({"min_entries": 10, "segment_entries": 5}, InvalidInput), ({"upto": "soon"}, InvalidStreamId),
    ])
    def test_refusals_before_io(self, redis_conn, stream, options, error):
        """Bad options are refused before any command reaches Redis."""
        redis_conn.config_resetstat()
        with pytest.raises(error):
            fold(redis_conn, stream, Archive("memory://"), **options)
        assert "cmdstat_xrange" not in redis_conn.info("commandstats")

    def test_unarchivable_entry_stops_the_fold(self, redis_conn, archive, stream):
        """An entry the format cannot hold is UnarchivableEntry; W stays before it."""
        redis_conn.xadd(stream.key, {"ok": "1"}, id="1-0")
        redis_conn.xadd(stream.key, {b"\xff": "1"}, id="2-0")
        with pytest.raises(UnarchivableEntry):
            fold(redis_conn, stream, archive, segment_entries=1)
        assert archive.watermark(stream) == StreamId(1, 0)

    def test_cluster(self, redis_cluster, stream):
        """A Redis Cluster client folds and merge-reads the same way."""
        conn = redis_cluster.client()
        ids = [conn.xadd(stream.key, {"i": str(index)}) for index in range(300)]
        archive = Archive("memory://")
        result = fold_then_trim(conn, stream, archive, MaxLen(100, approx=False), count=64)
        assert result.fold.entries == 200 and conn.xlen(stream.key) == 100
        assert ids_of(read(conn, stream, archive, count=64)) == ids
        conn.delete(stream.key)
        conn.close()


class TestFoldBoundary:
    @pytest.mark.parametrize("keep", [0, 3, 10, 29, 30, 40])
    def test_maxlen(self, redis_conn, stream, append, keep):
        """MaxLen(n) drops up to the (n+1)-th newest id; nothing when the stream fits."""
        ids = append(stream, 30)
        expected = StreamId.parse(ids[-keep - 1]) if keep < 30 else None
        assert fold_boundary(redis_conn, stream, MaxLen(keep)) == expected

    def test_a_rival_trim_between_reads_does_not_move_it(self, redis_server, stream):
        """1,500 entries, MaxLen(1000), and a rival that trims the 300 oldest right after any read is answered:
        the boundary is the 500th entry. Read as XLEN, then the len - n oldest, it was the 800th."""
        def rival(command):
            previous = proxy.commands[-2] if len(proxy.commands) > 1 else ()
            if previous[1:2] == (stream.key.encode(),) and not done:  # the first read of the stream was answered
                done.append(proxy.direct.xtrim(stream.key, minid=ids[300].decode(), approximate=False))

        done: list[int] = []
        with proxied(redis_server, rival) as proxy, redis_server.client() as direct:
            ids = append_entries(direct, stream.key, 1500)
            with redis.Redis.from_url(proxy.url) as conn:
                boundary = fold_boundary(conn, stream, MaxLen(1000))
        assert done == [300], "the rival trimmed between two of the fold's reads"
        assert boundary == StreamId.parse(ids[499]), \
            f"the boundary is entry #{ids.index(str(boundary).encode()) + 1}, not #500"

    def test_age_windows(self, redis_conn, stream):
        """MinId, MaxAge and MinStreamId drop up to just below their floor."""
        now = datetime(2026, 9, 12, tzinfo=UTC)
        floor_ms = int((now - timedelta(hours=1)).timestamp() * 1000)
        assert fold_boundary(redis_conn, stream, MaxAge("1h"), now) == StreamId(floor_ms - 1, 2**64 - 1)
        assert fold_boundary(redis_conn, stream, MinId(now)) == StreamId(int(now.timestamp() * 1000) - 1, 2**64 - 1)
        assert fold_boundary(redis_conn, stream, MinStreamId("7-3")) == StreamId(7, 2)
        assert fold_boundary(redis_conn, stream, MinStreamId("0-0")) is None

    def test_needs_now_for_max_age(self, redis_conn, stream):
        """A MaxAge boundary needs the caller's clock."""
        with pytest.raises(InvalidWindow, match="now"):
            fold_boundary(redis_conn, stream, MaxAge("1h"))


class TestTrimPast:
    def test_minid_just_past_w(self):
        """The trim floor is the id right after W, carrying into the next millisecond."""
        assert trim_past("17-3") == MinStreamId("17-4")
        assert trim_past(StreamId(17, 2**64 - 1), approx=False) == MinStreamId("18-0", approx=False)
        assert trim_past("17-3").describe() == "MINID ~ 17-4"

    def test_refusals(self):
        """A watermark that is no id, or a floor that is none, is refused."""
        with pytest.raises(InvalidStreamId):
            trim_past("x")
        with pytest.raises(InvalidWindow, match="stream id"):
            MinStreamId("17")


class TestFoldThenTrim:
    @pytest.mark.parametrize("approx", [True, False], ids=["~", "="])
    def test_nothing_leaves_before_it_is_archived(self, redis_conn, archive, stream, append, approx):
        """INV-FOLD: round after round, every id gone from the live stream is in the archive."""
        appended: list[bytes] = []
        for round_index in range(4):
            appended += append(stream, 300, start=round_index * 300)
            result = fold_then_trim(redis_conn, stream, archive, MaxLen(250, approx=approx), count=128)
            watermark = archive.watermark(stream)
            live = ids_of(redis_conn.xrange(stream.key))
            gone = [entry_id for entry_id in appended if entry_id not in set(live)]
            assert all(StreamId.parse(entry_id) <= watermark for entry_id in gone)
            assert len(live) >= 250 and (approx or len(live) == 250)
            assert result.trim == trim_past(min(watermark, result.boundary), approx)
            assert ids_of(read(redis_conn, stream, archive)) == appended

    def test_window_kept_when_w_is_ahead(self, redis_conn, archive, stream, append):
        """INV-WINDOW: W folded past the boundary by someone else still trims only outside the window."""
        ids = append(stream, 100)
        fold(redis_conn, stream, archive)  # W is now the newest id
        result = fold_then_trim(redis_conn, stream, archive, MaxLen(30, approx=False))
        assert result.trim == trim_past(StreamId.parse(ids[69]), approx=False)
        assert ids_of(redis_conn.xrange(stream.key)) == ids[70:]

    def test_no_trim_when_the_fold_fails(self, redis_conn, stream, append):
        """If the fold raises, nothing is trimmed this time."""
        append(stream, 50)
        unreachable = Archive("s3://retain/x", endpoint=f"http://127.0.0.1:{free_port()}", region="us-east-1",
                              access_key_id="a", secret_access_key="b", retry_config={"max_retries": 0})
        with pytest.raises(ArchiveUnavailable):
            fold_then_trim(redis_conn, stream, unreachable, MaxLen(10))
        assert redis_conn.xlen(stream.key) == 50

    def test_no_trim_before_anything_is_archived(self, redis_conn, archive, stream, append):
        """min_entries not reached and nothing archived yet: the stream is left whole."""
        append(stream, 20)
        result = fold_then_trim(redis_conn, stream, archive, MaxLen(10), min_entries=50)
        assert (result.fold.entries, result.trim, result.removed) == (0, None, 0)
        assert redis_conn.xlen(stream.key) == 20

    def test_max_age_uses_now(self, redis_conn, archive, stream):
        """A MaxAge window folds and trims what is older than now - duration."""
        now = datetime(2026, 9, 12, tzinfo=UTC)
        for minutes in (90, 80, 70, 50, 10):
            ms = int((now - timedelta(minutes=minutes)).timestamp() * 1000)
            redis_conn.xadd(stream.key, {"m": str(minutes)}, id=f"{ms}-0")
        result = fold_then_trim(redis_conn, stream, archive, MaxAge("1h", approx=False), now)
        assert result.fold.entries == 3 and result.removed == 3 and redis_conn.xlen(stream.key) == 2
        assert [fields[b"m"] for _, fields in read(redis_conn, stream, archive)] == [b"90", b"80", b"70", b"50", b"10"]

    def test_limit(self, redis_conn, archive, stream, append, node_size):
        """limit=0 trims the whole archived backlog at once; the server's cap (None) leaves the rest for later."""
        node_size(10)  # the server's cap per ~ trim: 1,000
        appended = append(stream, 3_000)
        capped = fold_then_trim(redis_conn, stream, archive, MaxLen(100))
        assert (capped.fold.entries, capped.removed) == (2_900, 1_000)
        whole = fold_then_trim(redis_conn, stream, archive, MaxLen(100), limit=0)
        assert (whole.fold.entries, whole.removed, redis_conn.xlen(stream.key)) == (0, 1_900, 100)
        assert ids_of(read(redis_conn, stream, archive)) == appended
        with pytest.raises(InvalidWindow, match="limit"):
            fold_then_trim(redis_conn, stream, archive, MaxLen(100), limit=-1)

    def test_stream_refs_only(self, redis_conn):
        """A malformed window or stream is refused before any I/O."""
        with pytest.raises(InvalidWindow):
            fold_then_trim(redis_conn, StreamRef("g", "s"), Archive("memory://"), "10")  # type: ignore[arg-type]


class TestFlatCostWhoeverWrites:
    """Direct folds checkpoint and compact at the table's checkpoint interval, with no driver to maintain it."""

    @staticmethod
    def every_four(conn, stream, tmp_path) -> Archive:
        archive = Archive(str(tmp_path / "scripts"))
        conn.xadd(stream.key, {"a": "0"})
        fold(conn, stream, archive)  # the table exists (version 0)
        archive.set_properties({"delta.checkpointInterval": "4"})  # version 1
        return archive

    def test_direct_folds_checkpoint_at_the_interval(self, redis_conn, stream, tmp_path):
        """A table written by 2 x interval direct folds has checkpoints and a _last_checkpoint at the interval."""
        archive = self.every_four(redis_conn, stream, tmp_path)
        for index in range(8):
            redis_conn.xadd(stream.key, {"a": str(index)})
            fold(redis_conn, stream, archive)
        log = tmp_path / "scripts" / "_delta_log"
        checkpoints = sorted(path.name for path in log.glob("*.checkpoint.parquet"))
        assert checkpoints and (log / "_last_checkpoint").exists()
        assert all((int(name.split(".")[0]) + 1) % 4 == 0 for name in checkpoints)

    def test_fold_then_trim_compacts_every_tenth_checkpoint(self, redis_conn, stream, tmp_path):
        """fold_then_trim's small files are compacted at every tenth checkpoint interval: the files stay few,
        and the merge-read whole."""
        archive = self.every_four(redis_conn, stream, tmp_path)
        appended = [str(archive.watermark(stream)).encode()]
        for index in range(82):
            appended += [redis_conn.xadd(stream.key, {"a": str(index), "b": ""}) for _ in range(3)]
            fold_then_trim(redis_conn, stream, archive, MaxLen(1))
        assert len(archive.state(stream).files) < 10 and archive.state(stream).rewrites == 2  # 82 without
        assert [entry_id for entry_id, _ in read(redis_conn, stream, archive)] == appended
