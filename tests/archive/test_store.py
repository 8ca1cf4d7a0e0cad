"""retain.archive.store: the Archive over local, memory and S3 stores alike; create-only is the fence."""

from __future__ import annotations

import threading
from datetime import timedelta

import obstore
import pytest

from retain.archive import Archive, Manifest, StreamId
from retain.archive.segments import SegmentWriter
from retain.errors import (
    ArchiveAccessDenied,
    ArchiveCorrupt,
    ArchiveObjectExists,
    ArchiveObjectMissing,
    ArchiveUnavailable,
    InvalidArchive,
    InvalidStreamName,
)
from retain.servers import free_port
from retain.streams import RawKey
from tests.helpers.archive import SHARED_STORES, open_archive


def encoded(stream, entries):
    writer = SegmentWriter(stream.key)
    writer.add(entries)
    return writer.finish()


class TestOpening:
    @pytest.mark.parametrize(("url", "options", "message"), [
        ("", {}, "non-empty string"),
        ("ftp://host/x", {}, "file://, memory:// or s3://"),
        ("file://relative/path", {}, "absolute path"),
        ("memory://", {"endpoint": "http://x"}, "apply to s3:// archives only"),
        ("/tmp/x", {"region": "us-east-1"}, "apply to s3:// archives only"),
        ("s3:///prefix", {}, "names a bucket"),
        ("s3://bucket/p", {"no_such_option": "1"}, "cannot open"),
    ])
    def test_refusals_before_io(self, url, options, message):
        """A URL or option that cannot name a store is InvalidArchive, a ValueError."""
        with pytest.raises(InvalidArchive, match=message) as caught:
            Archive(url, **options)
        assert isinstance(caught.value, ValueError)

    def test_plain_path_is_a_local_directory(self, tmp_path):
        """A path without a scheme is a local directory, made when missing."""
        archive = Archive(str(tmp_path / "a" / "b"))
        assert (tmp_path / "a" / "b").is_dir() and archive.manifest(RawKey("k")).number == 0

    def test_stream_must_be_a_stream(self):
        """A stream is a StreamRef or RawKey, refused before any I/O otherwise."""
        with pytest.raises(InvalidStreamName):
            Archive("memory://").manifest("emq:{q}:stream:s")  # type: ignore[arg-type]


class TestFence:
    def test_manifest_number_is_written_once(self, archive, stream):
        """A second writer of manifest n fails with ArchiveObjectExists; the first one stays."""
        first = Manifest(stream.key).advance(encoded_info(archive, stream, "1-0"), "writer-a")
        rival = Manifest(stream.key).advance(encoded_info(archive, stream, "1-0"), "writer-b")
        archive.put_manifest(first)
        with pytest.raises(ArchiveObjectExists) as caught:
            archive.put_manifest(rival)
        assert isinstance(caught.value, FileExistsError)
        assert archive.manifest(stream) == first and archive.manifest(stream).writer == "writer-a"

    def test_same_writer_again_is_no_conflict(self, archive, stream):
        """A retried write of the very same manifest (a lost reply) is accepted."""
        manifest = Manifest(stream.key).advance(encoded_info(archive, stream, "1-0"), "writer-a")
        archive.put_manifest(manifest)
        archive.put_manifest(manifest)
        assert archive.manifest(stream).number == 1

    def test_racing_threads_one_winner(self, archive, stream):
        """Eight threads write manifest 1 at once: exactly one succeeds, on every store."""
        info = encoded_info(archive, stream, "1-0")
        outcomes: list[str] = []
        barrier = threading.Barrier(8)

        def write(index: int) -> None:
            barrier.wait()
            try:
                archive.put_manifest(Manifest(stream.key).advance(info, f"writer-{index}"))
                outcomes.append("won")
            except ArchiveObjectExists:
                outcomes.append("lost")

        threads = [threading.Thread(target=write, args=(index,)) for index in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(outcomes) == ["lost"] * 7 + ["won"]

    def test_segment_is_checked_not_overwritten(self, archive, stream, redis_conn):
        """A segment under its name already: same rows are accepted, other rows are ArchiveCorrupt."""
        for index in range(10):
            redis_conn.xadd(stream.key, {"i": str(index)}, id=f"{index + 1}-0")
        entries = redis_conn.xrange(stream.key)
        segment = encoded(stream, entries)
        info = archive.put_segment(stream, segment)
        assert archive.put_segment(stream, segment) == info
        changed = list(entries)
        changed[4] = (changed[4][0], {b"i": b"tampered"})
        with pytest.raises(ArchiveCorrupt, match="already stored with other rows"):
            archive.put_segment(stream, encoded(stream, changed))
        stored = bytes(obstore.get(archive.store, archive.segment_path(stream, info)).bytes())
        assert stored == segment.data


def encoded_info(archive, stream, entry_id):
    writer = SegmentWriter(stream.key)
    writer.add([(entry_id.encode(), {b"a": b"1"})])
    return archive.put_segment(stream, writer.finish())


class TestReading:
    @pytest.mark.parametrize("kind", SHARED_STORES)
    def test_highest_manifest_wins_across_instances(self, kind, tmp_path, request, stream):
        """A reader takes the highest manifest, including ones another Archive wrote after it looked."""
        seaweed = request.getfixturevalue("seaweed_server") if kind == "s3" else None
        writer, url, options = open_archive(kind, tmp_path, seaweed)
        reader = Archive(url, **options)
        state = Manifest(stream.key)
        for ms in (1, 2, 3):
            state = state.advance(encoded_info(writer, stream, f"{ms}-0"), "w")
            writer.put_manifest(state)
            assert reader.manifest(stream).number == ms and reader.manifest(stream).watermark == StreamId(ms, 0)
        assert reader.manifest_at(stream, 2).watermark == StreamId(2, 0)
        assert reader.streams() == [stream.key]

    def test_missing_manifest(self, archive, stream):
        """Asking for a manifest that was never written is ArchiveObjectMissing."""
        with pytest.raises(ArchiveObjectMissing):
            archive.manifest_at(stream, 7)


class TestStoreErrors:
    def test_wrong_credentials(self, seaweed_server, stream):
        """S3 refusing the signature is ArchiveAccessDenied, a PermissionError."""
        archive = Archive(seaweed_server.archive_url("denied"),
                          **{**seaweed_server.archive_options(), "secret_access_key": "wrong"})
        with pytest.raises(ArchiveAccessDenied) as caught:
            archive.manifest(stream)
        assert isinstance(caught.value, PermissionError) and caught.value.__cause__ is not None

    def test_nothing_listening(self, stream):
        """An S3 endpoint nobody serves is ArchiveUnavailable, a ConnectionError, after the retries."""
        archive = Archive("s3://retain/x", endpoint=f"http://127.0.0.1:{free_port()}", region="us-east-1",
                          access_key_id="a", secret_access_key="b",
                          retry_config={"max_retries": 1, "retry_timeout": timedelta(seconds=2)})
        with pytest.raises(ArchiveUnavailable) as caught:
            archive.manifest(stream)
        assert isinstance(caught.value, ConnectionError)
        assert "obstore" not in type(caught.value).__module__
