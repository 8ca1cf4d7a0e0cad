"""Framing on a stream, pure: documents ended by a line '...', however the bytes are cut; bounded memory."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from retain.wire import ByteBudget
from retain.wire.bounds import TooLarge
from retain.wire.framing import END, Framer, frame


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


class TestLinear:
    def test_many_reads_of_one_document_are_searched_once(self):
        """240 reads of 64 KiB, one document: every byte is searched about once, not once per read
        (the framer searched its whole buffer on every read, 3.5 s for these reads)."""
        framer, chunk = Framer(32 * 1024 * 1024), b"x" * 65535 + b"\n"
        for _ in range(240):
            assert framer.feed(chunk) == []
        found = framer.feed(END)
        total = 240 * len(chunk) + len(END)
        assert found == [chunk * 240] and framer.examined <= total + 240 * len(END)

    def test_drips_onto_a_big_document_search_only_what_arrived(self):
        """4 MiB of a document, then 2,000 one-byte drips: each drip is searched with the few bytes before it,
        not the 4 MiB again (the issue's 8 x 4 MiB and drips held another client 10-13 s)."""
        framer = Framer(16 * 1024 * 1024)
        framer.feed(b"x" * (4 * 1024 * 1024))
        before = framer.examined
        for _ in range(2000):
            assert framer.feed(b"y") == []
        assert framer.examined - before <= 2000 * (len(END) + 1)

    def test_an_end_line_straddling_reads_is_found(self):
        """An end line cut anywhere across reads still ends its document, and only it."""
        stream = b"a: 1\n...\nb: 2\n...\n"
        for cut in range(1, len(stream)):
            framer = Framer(1000)
            assert framer.feed(stream[:cut]) + framer.feed(stream[cut:]) == [b"a: 1\n", b"b: 2\n"]

    def test_a_kept_document_keeps_its_reservation(self):
        """With keep, a document handed out stays reserved until the caller gives it back; the rest is freed."""
        budget = ByteBudget(1000)
        framer = Framer(100, budget, keep=True)
        assert framer.feed(b"a: 1\n...\nb:") == [b"a: 1\n"]
        assert budget.used == len(b"a: 1\n") + len(b"b:")
        framer.close()
        assert budget.used == len(b"a: 1\n")
