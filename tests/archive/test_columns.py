"""retain.archive.columns: entries into the table's columns and back (pure)."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from retain.archive.columns import FILE_SCHEMA, chunk_arrays, entries_of, entries_table, from_binary_map
from retain.errors import UnarchivableEntry

field_names = st.text(st.characters(blacklist_categories=["Cs"]), min_size=1, max_size=5)
values = st.binary(max_size=6) | st.text(max_size=6).map(str.encode)
flat_entries = st.lists(st.lists(st.tuples(field_names.map(str.encode), values), min_size=1, max_size=4),
                        min_size=1, max_size=12)


def flat(pairs_per_entry):
    """Entries as the server sends them: ids counting up, fields as flat [name, value, ...] lists."""
    return [(f"{index + 1}-{index % 3}".encode(), [part for pair in pairs for part in pair])
            for index, pairs in enumerate(pairs_per_entry)]


class TestTheColumns:
    def test_utf8_and_binary_entries(self):
        """An all-UTF-8 entry is text in ``fields``; one with any other value keeps every field as bytes."""
        table = entries_table([chunk_arrays(flat([[(b"a", b"1"), (b"b", "é".encode())],
                                                  [(b"a", b"2"), (b"b", b"\xff")]]))], "k")
        assert table.schema == FILE_SCHEMA
        assert table.to_pylist() == [
            {"id": "1-0", "ms": 1, "seq": 0, "ts": table.column("ts")[0].as_py(), "fields": [("a", "1"), ("b", "é")],
             "fields_binary": None},
            {"id": "2-1", "ms": 2, "seq": 1, "ts": table.column("ts")[1].as_py(), "fields": None,
             "fields_binary": [("a", b"2"), ("b", b"\xff")]}]
        assert table.column("ts")[1].as_py().timestamp() == 0.002

    @given(flat_entries)
    def test_lossless(self, pairs_per_entry):
        """Every entry comes back byte for byte, whichever column holds it, as bytes and as text."""
        entries = flat(pairs_per_entry)
        table = entries_table([chunk_arrays(entries)], "k")
        expected = [(entry_id, dict(zip(fields[::2], fields[1::2], strict=False))) for entry_id, fields in entries]
        assert list(entries_of(table, None)) == expected
        decoded = [(entry_id.decode(), {name.decode(): value.decode("utf-8", "replace") for name, value in pairs.items()})
                   for entry_id, pairs in expected]
        assert list(entries_of(table, ("utf-8", "replace"))) == decoded
        assert table.column("fields").null_count + table.column("fields_binary").null_count == table.num_rows

    def test_dicts_and_str_as_redis_py_gives_them(self):
        """``conn.xrange`` dicts, bytes or str, convert as the flat lists do."""
        as_bytes = entries_table([chunk_arrays([(b"5-0", {b"a": b"1"})])], "k")
        as_str = entries_table([chunk_arrays([("5-0", {"a": "1"})])], "k")
        assert as_bytes.equals(as_str) and as_bytes.column("fields").to_pylist() == [[("a", "1")]]

    def test_format_one_rows(self):
        """Format 1's (ms, seq, map of bytes) rows become the same columns."""
        fields = pa.array([[("a", b"1")], [("b", b"\xfe")]], pa.map_(pa.string(), pa.binary()))
        table = from_binary_map(pa.array([7, 7], pa.int64()), pa.array([0, 1], pa.int64()), fields, "k")
        assert [(row["id"], row["fields"], row["fields_binary"]) for row in table.to_pylist()] == [
            ("7-0", [("a", "1")], None), ("7-1", None, [("b", b"\xfe")])]

    def test_refusals(self):
        """Names that are not UTF-8 and ids past int64 are UnarchivableEntry."""
        with pytest.raises(UnarchivableEntry, match="not UTF-8"):
            entries_table([chunk_arrays([(b"1-0", [b"\xff", b"v"])])], "k")
        with pytest.raises(UnarchivableEntry, match="does not fit"):
            entries_table([chunk_arrays([(f"{2**63}-0".encode(), [b"a", b"v"])])], "k")
