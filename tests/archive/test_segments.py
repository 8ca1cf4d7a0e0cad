"""retain.archive.segments: XRANGE entries to Parquet and back, against a real Redis."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import redis

from retain.ids import StreamId
from retain.archive.segments import SCHEMA, SegmentWriter, read_entries, same_rows
from retain.errors import UnarchivableEntry


def flat_reader(conn: redis.Redis) -> redis.Redis:
    """A client whose XRANGE replies are the server's flat lists, as a fold reads them."""
    reader = redis.Redis(connection_pool=conn.connection_pool)
    reader.set_response_callback("XRANGE", lambda response, **options: response)
    return reader


def segment_of(chunks, row_group_rows=10_000):
    writer = SegmentWriter("emq:{g}:stream:s", row_group_rows=row_group_rows)
    for chunk in chunks:
        writer.add(chunk)
    return writer.finish()


def everything(data: bytes, low=StreamId(0, 0), high=StreamId(2**64 - 1, 2**64 - 1), text=None):
    return [entry for group in read_entries(pa.BufferReader(data), low, high, text) for entry in group]


class TestRoundTrip:
    @pytest.mark.parametrize("flat", [False, True], ids=["dicts", "flat-lists"])
    def test_bytes(self, redis_conn, flat):
        """Entries come back exactly as conn.xrange returned them: ids, names, binary values."""
        for index in range(250):
            redis_conn.xadd("s", {"i": str(index), "bin": bytes([index % 256, 0, 255]), "é": "ü" * (index % 3)})
        expected = redis_conn.xrange("s")
        source = flat_reader(redis_conn) if flat else redis_conn
        chunks = [source.xrange("s", "-", "+")[start:start + 100] for start in range(0, 250, 100)]
        segment = segment_of(chunks, row_group_rows=64)
        assert (segment.first, segment.last, segment.count) == (StreamId.parse(expected[0][0]),
                                                               StreamId.parse(expected[-1][0]), 250)
        assert everything(segment.data) == expected
        assert pq.ParquetFile(pa.BufferReader(segment.data)).num_row_groups > 1

    def test_text(self, redis_server):
        """A connection that decodes gets str back from segments too, as XRANGE would give it."""
        conn = redis_server.client(decode_responses=True)
        conn.flushall()
        for index in range(50):
            conn.xadd("s", {"player": "ada", "n": str(index)})
        expected = conn.xrange("s")
        segment = segment_of([conn.xrange("s")])
        assert everything(segment.data, text=("utf-8", "strict")) == expected
        conn.close()

    def test_uneven_fields(self, redis_conn):
        """Entries with different numbers of fields keep each its own."""
        for index in range(30):
            redis_conn.xadd("s", {f"f{k}": str(k) for k in range(index % 4 + 1)})
        expected = redis_conn.xrange("s")
        assert everything(segment_of([flat_reader(redis_conn).xrange("s")]).data) == expected

    def test_schema_and_metadata(self, redis_conn):
        """ms and seq are int64, fields map<string, binary>, zstd, and the stream key is recorded."""
        redis_conn.xadd("s", {"a": "1"}, id="1789-5")
        data = segment_of([redis_conn.xrange("s")]).data
        parquet = pq.ParquetFile(pa.BufferReader(data))
        assert parquet.schema_arrow.remove_metadata().equals(SCHEMA)
        assert parquet.schema_arrow.metadata[b"retain.stream"] == b"emq:{g}:stream:s"
        assert parquet.metadata.row_group(0).column(0).compression == "ZSTD"
        assert pq.read_table(pa.BufferReader(data)).to_pylist() == [{"ms": 1789, "seq": 5, "fields": [("a", b"1")]}]


class TestRanges:
    def test_bounds_included_and_groups_skipped(self, redis_conn):
        """Only ids within low..high come back, both ends included, across row groups."""
        for ms in range(1, 101):
            for seq in range(3):
                redis_conn.xadd("s", {"v": f"{ms}-{seq}"}, id=f"{ms}-{seq}")
        data = segment_of([redis_conn.xrange("s")], row_group_rows=30).data
        got = [entry_id for entry_id, _ in everything(data, StreamId(20, 1), StreamId(40, 1))]
        assert got == [f"{ms}-{seq}".encode() for ms in range(20, 41) for seq in range(3)
                       if (20, 1) <= (ms, seq) <= (40, 1)]
        assert everything(data, StreamId(101, 0), StreamId(200, 0)) == []


class TestRefusals:
    def test_field_name_not_utf8(self, redis_conn):
        """A field name the string column cannot hold is UnarchivableEntry, naming it."""
        redis_conn.xadd("s", {b"\xff\xfe": b"v"})
        with pytest.raises(UnarchivableEntry, match="not UTF-8"):
            segment_of([flat_reader(redis_conn).xrange("s")])

    def test_id_past_int64(self, redis_conn):
        """An id past 2^63-1 does not fit the int64 columns: UnarchivableEntry."""
        redis_conn.xadd("s", {"a": "1"}, id=f"{2**63}-0")
        with pytest.raises(UnarchivableEntry, match="does not fit"):
            segment_of([redis_conn.xrange("s")])


class TestSameRows:
    def test_compares_rows_not_bytes(self, redis_conn):
        """Two encodings of the same rows are the same; other rows are not."""
        for index in range(20):
            redis_conn.xadd("s", {"i": str(index)})
        entries = redis_conn.xrange("s")
        one = segment_of([entries]).data
        two = segment_of([entries[:7], entries[7:]], row_group_rows=5).data
        assert one != two and same_rows(one, two)
        assert not same_rows(one, segment_of([entries[:19]]).data)
