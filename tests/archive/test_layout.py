"""retain.archive.layout: the table's file names and app transaction ids (pure)."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from retain.archive.layout import (
    commit_path,
    expired_txn,
    file_name,
    file_range,
    key_of_dir,
    rewrite_txn,
    stream_dir,
    watermark_txns,
)
from retain.ids import StreamId
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


class TestFileNames:
    def test_example(self):
        """A data file lives in its stream's partition folder, named by the ids it holds and a token."""
        path = file_name("emq:{q}:stream:s", StreamId(1, 2), StreamId(3, 4), "ab12")
        assert path == "stream_digest=sha256-716c9482b68e28ff/1-2_3-4.ab12.parquet"
        assert file_range(path) == (StreamId(1, 2), StreamId(3, 4))
        old = file_name("emq:{q}:stream:s", StreamId(1, 2), StreamId(3, 4), "ab12", table_format=2)
        assert old == "stream=emq!3A!7Bq!7D!3Astream!3As/1-2_3-4.ab12.parquet"
        assert file_range(old) == (StreamId(1, 2), StreamId(3, 4))
        assert file_range("stream=x/part-0001.snappy.parquet") is None

    @given(stream_ids, stream_ids)
    def test_names_read_back(self, a, b):
        """A name gives back the range it was made from, whatever the ids."""
        low, high = min(a, b), max(a, b)
        assert file_range(file_name("k", low, high, "ff")) == (low, high)


class TestLog:
    def test_commit_paths_and_app_ids(self):
        """Commits are numbered with 20 digits; each stream's state has its app ids."""
        assert commit_path(42) == "_delta_log/00000000000000000042.json"
        assert watermark_txns("emq:{q}:stream:s") == ("emq:{q}:stream:s/ms", "emq:{q}:stream:s/seq")
        assert (rewrite_txn("k"), expired_txn("k")) == ("k/rewrite", "k/expired")
