"""retain.archive.files: XRANGE entries to Parquet data files and back, checked, against a real Redis."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import redis
from hypothesis import given, settings
from hypothesis import strategies as st

from retain.archive.columns import FILE_SCHEMA, STREAM_FIELD
from retain.archive.files import FileWriter, encode_runs, open_parquet, read_entries, read_tables
from retain.errors import ArchiveCorrupt, UnarchivableEntry
from retain.ids import StreamId

WHOLE = (StreamId(0, 0), StreamId(2**64 - 1, 2**64 - 1))


def flat_reader(conn: redis.Redis) -> redis.Redis:
    """A client whose XRANGE replies are the server's flat lists, as a fold reads them."""
    reader = redis.Redis(connection_pool=conn.connection_pool)
    reader.set_response_callback("XRANGE", lambda response, **options: response)
    return reader


def file_of(chunks, row_group_rows=10_000, encoder=None, stream="emq:{g}:stream:s"):
    writer = FileWriter(stream, row_group_rows=row_group_rows, encoder=encoder)
    for chunk in chunks:
        writer.add(chunk)
    return writer.finish()


def everything(data: bytes, low=WHOLE[0], high=WHOLE[1], text=None):
    parquet = open_parquet(pa.BufferReader(data), "test.parquet")
    return [entry for group in read_entries(parquet, "test.parquet", low, high, text) for entry in group]


class TestRoundTrip:
    @pytest.mark.parametrize("flat", [False, True], ids=["dicts", "flat-lists"])
    def test_bytes(self, redis_conn, flat):
        """Entries come back exactly as conn.xrange returned them: ids, names, binary values."""
        for index in range(250):
            redis_conn.xadd("s", {"i": str(index), "bin": bytes([index % 256, 0, 255]), "é": "ü" * (index % 3)})
        expected = redis_conn.xrange("s")
        source = flat_reader(redis_conn) if flat else redis_conn
        chunks = [source.xrange("s", "-", "+")[start:start + 100] for start in range(0, 250, 100)]
        encoded = file_of(chunks, row_group_rows=64)
        assert (encoded.first, encoded.last, encoded.count) == (StreamId.parse(expected[0][0]),
                                                               StreamId.parse(expected[-1][0]), 250)
        assert everything(encoded.data) == expected
        assert pq.ParquetFile(pa.BufferReader(encoded.data)).num_row_groups > 1

    def test_encoded_on_a_worker(self, redis_conn):
        """Row groups encoded on an executor make the same file as encoded at once."""
        from concurrent.futures import ThreadPoolExecutor

        for index in range(300):
            redis_conn.xadd("s", {"i": str(index)})
        chunks = [redis_conn.xrange("s")[start:start + 50] for start in range(0, 300, 50)]
        with ThreadPoolExecutor(1) as encoder:
            off = file_of(chunks, row_group_rows=64, encoder=encoder)
        assert everything(off.data) == everything(file_of(chunks, row_group_rows=64).data) == redis_conn.xrange("s")

    def test_text(self, redis_server):
        """A connection that decodes gets str back from files too, as XRANGE would give it."""
        conn = redis_server.client(decode_responses=True)
        conn.flushall()
        for index in range(50):
            conn.xadd("s", {"player": "ada", "n": str(index)})
        expected = conn.xrange("s")
        assert everything(file_of([conn.xrange("s")]).data, text=("utf-8", "strict")) == expected
        conn.close()

    def test_uneven_fields(self, redis_conn):
        """Entries with different numbers of fields keep each its own."""
        for index in range(30):
            redis_conn.xadd("s", {f"f{k}": str(k) for k in range(index % 4 + 1)})
        expected = redis_conn.xrange("s")
        assert everything(file_of([flat_reader(redis_conn).xrange("s")]).data) == expected

    def test_schema_metadata_and_statistics(self, redis_conn):
        """The table's columns, zstd, page checksums, the stream key recorded; Delta's statistics per file."""
        redis_conn.xadd("s", {"a": "1"}, id="1789-5")
        redis_conn.xadd("s", {"a": b"\xff"}, id="1790-0")
        encoded = file_of([redis_conn.xrange("s")])
        parquet = pq.ParquetFile(pa.BufferReader(encoded.data))
        assert parquet.schema_arrow.remove_metadata().equals(pa.schema([STREAM_FIELD, *FILE_SCHEMA]))
        assert parquet.schema_arrow.metadata[b"retain.stream"] == b"emq:{g}:stream:s"
        assert parquet.schema_arrow.metadata[b"retain.format"] == b"3"
        assert pq.read_table(pa.BufferReader(encoded.data)).column("stream").to_pylist() == ["emq:{g}:stream:s"] * 2
        stream_stats = parquet.metadata.row_group(0).column(0).statistics
        assert (stream_stats.min, stream_stats.max) == ("emq:{g}:stream:s", "emq:{g}:stream:s")
        assert parquet.metadata.row_group(0).column(0).compression == "ZSTD"
        rows = pq.read_table(pa.BufferReader(encoded.data)).to_pylist()
        assert [(row["id"], row["ms"], row["seq"], row["fields"], row["fields_binary"]) for row in rows] == [
            ("1789-5", 1789, 5, [("a", "1")], None), ("1790-0", 1790, 0, None, [("a", b"\xff")])]
        assert json.loads(encoded.stats) == {
            "numRecords": 2,
            "minValues": {"stream": "emq:{g}:stream:s", "id": "1789-5", "ms": 1789, "seq": 0,
                          "ts": "1970-01-01T00:00:01.789Z"},
            "maxValues": {"stream": "emq:{g}:stream:s", "id": "1790-0", "ms": 1790, "seq": 5,
                          "ts": "1970-01-01T00:00:01.790Z"},
            "nullCount": {"stream": 0, "id": 0, "ms": 0, "seq": 0, "ts": 0, "fields": 1, "fields_binary": 1}}

    def test_tables_gather_into_row_groups(self, redis_conn):
        """Many small tables (a compaction's files) make full row groups, not one each."""
        for index in range(100):
            redis_conn.xadd("s", {"i": str(index)})
        table = pq.read_table(pa.BufferReader(file_of([redis_conn.xrange("s")]).data))
        writer = FileWriter("emq:{g}:stream:s", row_group_rows=40)
        for start in range(0, 100, 5):
            writer.add_table(table.slice(start, 5))
        merged = writer.finish()
        assert pq.ParquetFile(pa.BufferReader(merged.data)).metadata.num_rows == 100
        assert [pq.ParquetFile(pa.BufferReader(merged.data)).metadata.row_group(i).num_rows
                for i in range(3)] == [40, 40, 20]
        assert everything(merged.data) == redis_conn.xrange("s")


class TestRanges:
    def test_bounds_included_and_groups_skipped(self, redis_conn):
        """Only ids within low..high come back, both ends included, across row groups."""
        for ms in range(1, 101):
            for seq in range(3):
                redis_conn.xadd("s", {"v": f"{ms}-{seq}"}, id=f"{ms}-{seq}")
        data = file_of([redis_conn.xrange("s")], row_group_rows=30).data
        got = [entry_id for entry_id, _ in everything(data, StreamId(20, 1), StreamId(40, 1))]
        assert got == [f"{ms}-{seq}".encode() for ms in range(20, 41) for seq in range(3)
                       if (20, 1) <= (ms, seq) <= (40, 1)]
        assert everything(data, StreamId(101, 0), StreamId(200, 0)) == []


class TestRefusals:
    def test_field_name_not_utf8(self, redis_conn):
        """A field name the string column cannot hold is UnarchivableEntry, naming it."""
        redis_conn.xadd("s", {b"\xff\xfe": b"v"})
        with pytest.raises(UnarchivableEntry, match="not UTF-8"):
            file_of([flat_reader(redis_conn).xrange("s")])

    def test_id_past_int64(self, redis_conn):
        """An id past 2^63-1 does not fit the int64 columns: UnarchivableEntry."""
        redis_conn.xadd("s", {"a": "1"}, id=f"{2**63}-0")
        with pytest.raises(UnarchivableEntry, match="does not fit"):
            file_of([redis_conn.xrange("s")])


class TestDamage:
    def test_a_damaged_page_is_corrupt_naming_the_file(self, redis_conn):
        """A flipped byte inside a page fails its checksum: ArchiveCorrupt naming the object, the cause kept."""
        for index in range(2000):
            redis_conn.xadd("s", {"i": str(index), "v": "x" * (index % 50)})
        data = bytearray(file_of([redis_conn.xrange("s")]).data)
        data[len(data) // 3] ^= 0xFF
        with pytest.raises(ArchiveCorrupt, match="stream=x/damaged.parquet") as caught:
            parquet = open_parquet(pa.BufferReader(bytes(data)), "stream=x/damaged.parquet")
            list(read_tables(parquet, "stream=x/damaged.parquet", *WHOLE))
        assert caught.value.__cause__ is not None

    def test_not_parquet(self):
        """Bytes that are no Parquet file are ArchiveCorrupt, not a pyarrow error."""
        with pytest.raises(ArchiveCorrupt, match="junk.parquet"):
            open_parquet(pa.BufferReader(b"not parquet at all" * 10), "junk.parquet")


field_names = st.text(st.characters(blacklist_categories=["Cs"]), min_size=1, max_size=4).map(str.encode)
field_values = st.binary(max_size=5) | st.text(max_size=5).map(str.encode)
runs_of_pairs = st.lists(st.lists(st.lists(st.tuples(field_names, field_values), min_size=1, max_size=3),
                                  min_size=1, max_size=6), min_size=1, max_size=6)


def flat_runs(runs):
    """Each run a stream's entries as the server sends them, ids counting up (seq past 9 in some)."""
    return [(f"emq:{{g}}:stream:s{number}",
             [(f"{1000 + index}-{index * 7 % 12}".encode(), [part for pair in pairs for part in pair])
              for index, pairs in enumerate(run)])
            for number, run in enumerate(runs)]


class TestEncodeRuns:
    """encode_runs makes, for many streams at once, exactly the files FileWriter makes one by one."""

    @given(runs_of_pairs)
    @settings(max_examples=60, deadline=None)
    def test_the_files_of_file_writer(self, runs):
        """Same ids, counts, Delta statistics, rows and key-value metadata, text and binary values alike."""
        runs = flat_runs(runs)
        together = encode_runs(runs)
        assert len(together) == len(runs)
        for (stream, entries), made in zip(runs, together, strict=False):
            alone = file_of([entries], stream=stream)
            assert (made.first, made.last, made.count, json.loads(made.stats)) == \
                (alone.first, alone.last, alone.count, json.loads(alone.stats))
            ours, theirs = (open_parquet(pa.BufferReader(data), "f") for data in (made.data, alone.data))
            assert ours.read().equals(theirs.read())
            assert ours.schema_arrow.metadata == theirs.schema_arrow.metadata
            assert ours.metadata.num_row_groups == theirs.metadata.num_row_groups

    def test_empty_runs_make_no_file(self):
        """A run without entries makes no file; no runs, no files."""
        assert encode_runs([]) == []
        assert [made.count for made in encode_runs([("a", []), *flat_runs([[[(b"k", b"v")]]])])] == [1]

    def test_an_entry_no_file_can_hold_fails_them_all(self):
        """A field name that is not UTF-8 in any run is UnarchivableEntry (the fold then makes each stream's
        file alone, so that only that stream fails: tests/archive/test_fold.py)."""
        runs = flat_runs([[[(b"k", b"v")]], [[(b"\xff", b"v")]]])
        with pytest.raises(UnarchivableEntry, match="not UTF-8"):
            encode_runs(runs)
