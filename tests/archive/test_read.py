"""retain.archive.read: the merge-read, on every store kind, against a real Redis (INV-MERGE)."""

from __future__ import annotations

import itertools
import threading
import uuid
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retain.archive import FILE_SCHEMA, Archive, StreamId, fold, fold_then_trim, read, read_arrow
from retain.errors import InvalidInput, InvalidStreamId, WrongTypeError
from retain.streams import StreamRef
from retain.windows import MaxLen
from tests.helpers.streams import ms_of


def ids_of(entries) -> list[bytes]:
    return [entry_id for entry_id, _ in entries]


@pytest.fixture
def half_archived(redis_conn, archive, stream):
    """1000 entries at ids <ms>-<seq> for ms 1..500, seq 0..1; the older 600 folded and trimmed away.

    A copy of the whole stream, never trimmed, answers what XRANGE would have.
    """
    copy = StreamRef("game", f"copy-{uuid.uuid4().hex[:8]}")
    pipe = redis_conn.pipeline(transaction=False)
    for ms in range(1, 501):
        for seq in range(2):
            for key in (stream.key, copy.key):
                pipe.xadd(key, {"v": f"{ms}-{seq}", "bin": b"\x00\xff"}, id=f"{ms}-{seq}")
    pipe.execute()
    fold_then_trim(redis_conn, stream, archive, MaxLen(400, approx=False), count=64, segment_entries=100)
    assert redis_conn.xlen(stream.key) == 400 and archive.watermark(stream) == StreamId(300, 1)
    return copy


class TestRead:
    @pytest.mark.parametrize(("start", "end"), [
        (None, None), ("1-0", "500-1"), ("250", "350"), ("300-1", "301-0"), ("300-0", "300-1"),
        ("301-0", None), (None, "300-1"), ("42-1", "42-1"), ("0-0", "1"), ("499", "100000"),
        (datetime.fromtimestamp(0.299, UTC), datetime.fromtimestamp(0.302, UTC)),
    ])
    def test_same_as_xrange_never_trimmed(self, redis_conn, archive, stream, half_archived, start, end):
        """Archive and live read as one log: the same entries as XRANGE over an untrimmed copy."""
        low = "-" if start is None else start if isinstance(start, str) else f"{int(start.timestamp() * 1000)}"
        high = "+" if end is None else end if isinstance(end, str) else f"{int(end.timestamp() * 1000)}"
        expected = redis_conn.xrange(half_archived.key, low, high)
        assert list(read(redis_conn, stream, archive, start, end, count=37)) == expected

    def test_leftovers_at_or_below_w_come_once(self, redis_conn, archive, stream, append):
        """Entries both archived and still live (a ~ trim's leftovers) come once, from the archive."""
        ids = append(stream, 500)
        fold(redis_conn, stream, archive, ids[299])
        assert redis_conn.xlen(stream.key) == 500
        assert ids_of(read(redis_conn, stream, archive, count=64)) == ids

    def test_empty_range(self, redis_conn, archive, stream, half_archived):
        """start after end reads nothing."""
        assert list(read(redis_conn, stream, archive, "400-0", "10-0")) == []

    def test_files_pruned(self, redis_conn, stream, half_archived, tmp_path):
        """Only files whose id range meets the read's are opened."""
        opened = []

        class Counting(Archive):
            def open_file(self, file):
                opened.append(file.path)
                return super().open_file(file)

        archive = Counting(str(tmp_path / "counted"))
        other = StreamRef("game", f"pruned-{uuid.uuid4().hex[:8]}")
        for entry_id, fields in redis_conn.xrange(half_archived.key):
            redis_conn.xadd(other.key, fields, id=entry_id)
        fold(redis_conn, other, archive, "300-1", segment_entries=100)
        assert len(archive.state(other).files) == 6
        assert ids_of(read(redis_conn, other, archive, "120-0", "130-1")) == [
            f"{ms}-{seq}".encode() for ms in range(120, 131) for seq in range(2)]
        assert len(opened) == 1

    def test_refusals_at_the_call(self, redis_conn, archive, stream):
        """Bad bounds are refused when read is called, before any I/O."""
        with pytest.raises(InvalidStreamId):
            read(redis_conn, stream, archive, start="yesterday")
        with pytest.raises(InvalidInput):
            read(redis_conn, stream, archive, count=0)

    def test_wrong_type(self, redis_conn, archive, stream):
        """A key that is no stream is WrongTypeError while iterating."""
        redis_conn.set(stream.key, "x")
        with pytest.raises(WrongTypeError):
            list(read(redis_conn, stream, archive))


def arrow_ids(batches) -> list[bytes]:
    return [entry_id.encode() for batch in batches for entry_id in batch.column("id").to_pylist()]


class TestReadArrow:
    @pytest.mark.parametrize(("start", "end"), [(None, None), ("250", "350"), ("300-1", "301-0"), ("301-0", None)])
    def test_same_rows_as_read(self, redis_conn, archive, stream, half_archived, start, end):
        """Archived and live rows as record batches of the table's columns: the entries read gives, in order."""
        batches = list(read_arrow(redis_conn, stream, archive, start, end, count=37))
        assert all(batch.schema == FILE_SCHEMA for batch in batches)
        rows = [row for batch in batches for row in batch.to_pylist()]
        expected = list(read(redis_conn, stream, archive, start, end, count=37))
        assert [row["id"].encode() for row in rows] == [entry_id for entry_id, _ in expected]
        for row, (_, fields) in zip(rows, expected, strict=False):
            pairs = row["fields_binary"] if row["fields"] is None else [(k, v.encode()) for k, v in row["fields"]]
            assert {name.encode(): value for name, value in pairs} == fields
            assert row["ts"].timestamp() * 1000 == row["ms"]

    def test_refusals_at_the_call(self, redis_conn, archive, stream):
        """Bad bounds are refused when read_arrow is called, before any I/O."""
        with pytest.raises(InvalidStreamId):
            read_arrow(redis_conn, stream, archive, start="yesterday")
        with pytest.raises(InvalidInput):
            read_arrow(redis_conn, stream, archive, count=0)


class TestReadOrder:
    @pytest.mark.parametrize("approx", [True, False], ids=["~", "="])
    def test_fold_and_trim_between_every_step(self, redis_server, redis_conn, tmp_path, stream, append, approx):
        """The worst schedule: right after each W the reader takes, a fold and a trim run. The order
        live range, then W, then archive still yields every entry once; reading W first would not."""
        appended = append(stream, 1200)
        folder_conn = redis_server.client()

        class FoldsUnderTheReader(Archive):
            busy = False

            def watermark(self, stream):
                answer = super().watermark(stream)
                if not self.busy:
                    self.busy = True
                    try:
                        fold_then_trim(folder_conn, stream, self, MaxLen(max(0, redis_conn.xlen(stream.key) - 150),
                                                                         approx=approx), count=40, segment_entries=60)
                    finally:
                        self.busy = False
                return answer

        archive = FoldsUnderTheReader(str(tmp_path / "under"))
        got = ids_of(read(redis_conn, stream, archive, count=50))
        assert redis_conn.xlen(stream.key) < 1200 and archive.state(stream).entries > 0
        assert got == appended
        folder_conn.close()


# -- INV-MERGE under concurrency -----------------------------------------------------------------

workloads = st.fixed_dictionaries({
    "batches": st.lists(st.lists(st.integers(1, 40), min_size=1, max_size=8), min_size=1, max_size=3),
    "keep": st.integers(0, 60),
    "approx": st.booleans(),
    "count": st.integers(3, 40),
    "segment_entries": st.integers(5, 80),
    "read_count": st.integers(2, 50),
    "readers": st.integers(1, 2),
    "arrow": st.booleans(),
})
_examples = itertools.count()


class TestMergeUnderFoldAndTrim:
    @settings(max_examples=12)
    @given(workload=workloads)
    def test_no_gap_no_duplicate_order_kept(self, redis_server, tmp_path, workload):  # noqa: C901 -- one scene, its actors closures over it
        """Producers append, a folder folds and trims, readers merge-read (as entries or Arrow batches), all at
        once: each read yields every entry appended before it began, none twice, none unappended, in id order."""
        stream = StreamRef("game", f"merge-{next(_examples)}")
        archive = Archive(str(tmp_path / stream.name))
        appended: list[bytes] = []
        lock = threading.Lock()
        producing = threading.Event()
        failures: list[BaseException] = []
        reads: list[tuple[set[bytes], list[bytes]]] = []

        def guarded(function):
            def run() -> None:
                try:
                    function()
                except BaseException as exc:  # noqa: BLE001 - reported on the test's thread
                    failures.append(exc)
            return run

        def producer(sizes: list[int]) -> None:
            with redis_server.client() as conn:
                for size in sizes:
                    pipe = conn.pipeline(transaction=False)
                    for _ in range(size):
                        pipe.xadd(stream.key, {"p": "x"})
                    ids = pipe.execute()
                    with lock:
                        appended.extend(ids)

        def folder() -> None:
            with redis_server.client() as conn:
                window = MaxLen(workload["keep"], approx=workload["approx"])
                while producing.is_set():
                    fold_then_trim(conn, stream, archive, window, count=workload["count"],
                                   segment_entries=workload["segment_entries"])
                fold_then_trim(conn, stream, archive, window, count=workload["count"],
                               segment_entries=workload["segment_entries"])

        def reader() -> None:
            with redis_server.client() as conn:
                while True:
                    last_round = not producing.is_set()
                    with lock:
                        before = set(appended)
                    if workload["arrow"]:
                        got = arrow_ids(read_arrow(conn, stream, archive, count=workload["read_count"]))
                    else:
                        got = ids_of(read(conn, stream, archive, count=workload["read_count"]))
                    reads.append((before, got))
                    if last_round:
                        return

        producing.set()
        producers = [threading.Thread(target=guarded(lambda sizes=sizes: producer(sizes)))
                     for sizes in workload["batches"]]
        others = [threading.Thread(target=guarded(folder))] + [
            threading.Thread(target=guarded(reader)) for _ in range(workload["readers"])]
        for thread in producers + others:
            thread.start()
        for thread in producers:
            thread.join(60)
        producing.clear()
        for thread in others:
            thread.join(60)
        assert not failures, failures
        everything = set(appended)
        for before, got in reads:
            assert len(got) == len(set(got)), "an entry came twice"
            assert [ms_of(entry_id) for entry_id in got] == sorted(ms_of(entry_id) for entry_id in got)
            assert before <= set(got), f"missed {sorted(before - set(got))[:5]}"
            assert set(got) <= everything
        with redis_server.client() as conn:
            final = ids_of(read(conn, stream, archive))
            assert sorted(final, key=ms_of) == final and set(final) == everything
            assert conn.xlen(stream.key) >= min(workload["keep"], len(everything))  # INV-WINDOW
            conn.delete(stream.key)
