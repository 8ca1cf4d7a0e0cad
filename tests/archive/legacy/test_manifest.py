"""retain.archive.legacy.manifest: format 1's numbered manifest and its JSON (pure)."""

from __future__ import annotations

import json

import pytest

from retain.archive.legacy.manifest import FORMAT_VERSION, Manifest, SegmentInfo
from retain.errors import ArchiveCorrupt
from retain.ids import StreamId


def segment(first: int, last: int, count: int = 2) -> SegmentInfo:
    return SegmentInfo(f"segments/{first}_{last}.parquet", StreamId(first, 0), StreamId(last, 0), count, 100)


class TestManifest:
    def test_empty(self):
        """Manifest 0 has no segments and no watermark."""
        empty = Manifest("k")
        assert (empty.number, empty.watermark, empty.entries, empty.size) == (0, None, 0, 0)

    def test_advance(self):
        """Each step adds one segment, numbers the next manifest and moves W to its end."""
        one = Manifest("k").advance(segment(1, 5), "w1")
        two = one.advance(segment(6, 9, count=3), "w2")
        assert (two.number, two.watermark, two.entries, two.size, two.writer) == (2, StreamId(9, 0), 5, 200, "w2")

    def test_advance_refuses_overlap(self):
        """A segment that does not start after W cannot be listed."""
        with pytest.raises(ArchiveCorrupt, match="not after the watermark"):
            Manifest("k").advance(segment(1, 5), "w").advance(segment(5, 9), "w")

    def test_covering(self):
        """Segments are pruned by id range, both ends included."""
        manifest = Manifest("k", 3, (segment(1, 5), segment(6, 9), segment(10, 20)))
        assert [s.first.ms for s in manifest.covering(StreamId(5, 0), StreamId(6, 0))] == [1, 6]
        assert [s.first.ms for s in manifest.covering(StreamId(21, 0), StreamId(30, 0))] == []
        assert [s.first.ms for s in manifest.covering(StreamId(0, 0), StreamId(0, 9))] == []

    def test_json_round_trip(self):
        """The stored JSON reads back to the same manifest and carries the format version."""
        manifest = Manifest("emq:{q}:stream:s", 2, (segment(1, 5), segment(6, 9)), "token")
        document = json.loads(manifest.to_json())
        assert document["format"] == FORMAT_VERSION and document["watermark"] == "9-0"
        assert document["entries"] == 4 and document["bytes"] == 200
        assert Manifest.from_json(manifest.to_json(), stream="emq:{q}:stream:s", number=2) == manifest

    def test_stored_form_is_format_1(self):
        """Sizes are ``size`` in Python and ``"bytes"`` on disk: a stored manifest reads, and writes, byte for byte."""
        stored = (b'{"format":1,"stream":"k","number":1,"watermark":"5-0","entries":2,"bytes":100,'
                  b'"segments":[{"name":"segments/1_5.parquet","first":"1-0","last":"5-0","count":2,"bytes":100}],'
                  b'"writer":"w"}')
        manifest = Manifest.from_json(stored, stream="k", number=1)
        assert (manifest.size, manifest.segments[0].size) == (100, 100)
        assert manifest.to_json() == stored

    @pytest.mark.parametrize(("change", "message"), [
        (lambda d: d.update(format=2), "has format 2"),
        (lambda d: d.update(number=3), "says it is manifest 3"),
        (lambda d: d.update(stream="other"), "of 'other'"),
        (lambda d: d.update(watermark="5-0"), "has watermark"),
        (lambda d: d["segments"].reverse(), "out of order"),
        (lambda d: d["segments"][0].pop("count"), "malformed"),
        (lambda d: d["segments"][0].update(first="x"), "malformed"),
    ])
    def test_corrupt_is_refused(self, change, message):
        """A manifest that does not hold what its name says is ArchiveCorrupt, never half-read."""
        document = json.loads(Manifest("k", 2, (segment(1, 5), segment(6, 9)), "t").to_json())
        change(document)
        with pytest.raises(ArchiveCorrupt, match=message):
            Manifest.from_json(json.dumps(document).encode(), stream="k", number=2)

    def test_not_json(self):
        """Bytes that are not JSON are ArchiveCorrupt."""
        with pytest.raises(ArchiveCorrupt, match="not JSON"):
            Manifest.from_json(b"\xff{", stream="k", number=1)
