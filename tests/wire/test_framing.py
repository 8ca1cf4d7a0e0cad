"""Framing on a stream, pure: documents ended by a line '...', however the bytes are cut; bounded memory."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from retain.wire import END, Framer, TooLarge, frame


class TestFramer:
    @given(st.lists(st.binary(max_size=40).filter(lambda b: b"\n..." not in b and not b.startswith(b"...")),
                    max_size=6),
           st.lists(st.integers(1, 50), min_size=1, max_size=20))
    def test_any_chunking(self, documents, cuts):
        """However the stream is cut into chunks, the same documents come out in order."""
        stream = b"".join(document + b"\n" + END for document in documents)
        framer, found, position = Framer(1000), [], 0
        for cut in cuts * (len(stream) // sum(cuts) + 1):
            found += framer.feed(stream[position:position + cut])
            position += cut
        assert found == [document + b"\n" for document in documents]

    def test_oversized_is_dropped_and_reported(self):
        """A document over the limit is dropped as it arrives and reported in its place."""
        framer = Framer(10)
        found = framer.feed(b"a: 1\n...\n" + b"x" * 25)
        found += framer.feed(b"y" * 100)
        found += framer.feed(b"\n...\nb: 2\n...\n")
        assert found[0] == b"a: 1\n" and isinstance(found[1], TooLarge) and found[2] == b"b: 2\n"
        assert found[1].size >= 126 and len(framer._buffer) == 0

    def test_frame(self):
        """A framed document is the document and the end line."""
        assert frame({"a": 1}, "json") == b'{"a":1}\n...\n'
