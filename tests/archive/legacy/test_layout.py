"""retain.archive.legacy.layout: format 1's object names (pure)."""

from __future__ import annotations

from hypothesis import given

from retain.archive.legacy.layout import manifest_number, manifest_path, segment_name
from retain.ids import StreamId
from tests.strategies import stream_ids


class TestNames:
    @given(stream_ids, stream_ids)
    def test_segment_names_sort_as_ids(self, a, b):
        """Zero-padded names sort as their first ids do."""
        assert (segment_name(a, a) < segment_name(b, b)) == (a < b)

    def test_manifest_names(self):
        """Manifests are numbered with 20 digits; the number reads back from the path."""
        path = manifest_path("emq:{q}:stream:s", 42)
        assert path == "emq!3A!7Bq!7D!3Astream!3As/manifest/00000000000000000042.json"
        assert manifest_number(path) == 42
        assert manifest_number("x/manifest/42.json") is None
        assert segment_name(StreamId(1, 2), StreamId(3, 4)) == (
            "segments/00000000000000000001-00000000000000000002_00000000000000000003-00000000000000000004.parquet")
