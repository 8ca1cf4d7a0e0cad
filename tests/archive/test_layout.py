"""retain.archive.layout: object names (pure)."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from retain.ids import StreamId
from retain.archive.layout import key_of_dir, manifest_number, manifest_path, segment_name, stream_dir
from tests.strategies import stream_ids


class TestStreamDir:
    def test_example(self):
        """A layout key becomes one readable path segment."""
        assert stream_dir("emq:{codemojex}:stream:activity") == "emq!3A!7Bcodemojex!7D!3Astream!3Aactivity"

    @given(st.text(min_size=1, max_size=40))
    def test_round_trip_and_safe(self, key):
        """Any key maps to one segment of A-Z a-z 0-9 . _ - ! and back, so no two keys share a folder."""
        folder = stream_dir(key)
        assert re.fullmatch(r"[A-Za-z0-9._!-]+", folder)
        assert key_of_dir(folder) == key


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
