"""retain.archive.table: the Archive over local, memory and S3 stores alike; the commit of W is the fence."""

from __future__ import annotations

import re
import shutil
import threading
from datetime import timedelta

import obstore
import pytest

from retain.archive import Archive, StreamId, read
from retain.archive.files import FileWriter
from retain.archive.table import Advance, Fence
from retain.errors import (
    ArchiveAccessDenied,
    ArchiveConflict,
    ArchiveCorrupt,
    ArchiveError,
    ArchiveFenced,
    ArchiveObjectExists,
    ArchiveObjectMissing,
    ArchiveUnavailable,
    InvalidArchive,
    InvalidStreamName,
)
from retain.servers import free_port
from retain.streams import RawKey
from tests.helpers.archive import SHARED_STORES, open_archive, table_of


def stored(archive, stream, *ids):
    """A data file of ``stream`` holding entries with ``ids``, stored and not yet committed."""
    writer = FileWriter(stream.key)
    writer.add([(entry_id.encode(), {b"a": b"1"}) for entry_id in ids])
    return archive.put_file(stream, writer.finish())


def advance(archive, stream, before, *ids):
    file = stored(archive, stream, *ids)
    return Advance(stream.key, before, file.last, (file,))


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
        """A path without a scheme is a local directory, made when missing; the table comes with the first commit."""
        archive = Archive(str(tmp_path / "a" / "b"))
        assert (tmp_path / "a" / "b").is_dir() and archive.watermark(RawKey("k")) is None
        assert archive.version == -1 and not (tmp_path / "a" / "b" / "_delta_log").exists()

    def test_stream_must_be_a_stream(self):
        """A stream is a StreamRef or RawKey, refused before any I/O otherwise."""
        with pytest.raises(InvalidStreamName):
            Archive("memory://").watermark("emq:{q}:stream:s")  # type: ignore[arg-type]


class TestFence:
    def test_w_is_committed_once(self, archive, stream):
        """Two commits planned from the same W: the second is ArchiveConflict (a FileExistsError); the first stays."""
        first, rival = advance(archive, stream, None, "1-0"), advance(archive, stream, None, "1-0", "2-0")
        archive.commit([first])
        with pytest.raises(ArchiveConflict) as caught:
            archive.commit([rival])
        assert isinstance(caught.value, (ArchiveObjectExists, FileExistsError))
        assert archive.watermark(stream) == StreamId(1, 0) and archive.state(stream).files == first.files

    @pytest.mark.parametrize("kind", SHARED_STORES)
    def test_another_writer_is_fenced_by_the_table(self, kind, tmp_path, request, stream):
        """A writer whose snapshot predates a rival's commit of the same stream loses it in delta-rs's check."""
        seaweed = request.getfixturevalue("seaweed_server") if kind == "s3" else None
        one, url, options = open_archive(kind, tmp_path, seaweed)
        one.commit([advance(one, stream, None, "1-0")])
        two = Archive(url, **options)
        assert two.watermark(stream) == StreamId(1, 0)  # two's snapshot, before one's next commit
        one.commit([advance(one, stream, StreamId(1, 0), "2-0")])
        with pytest.raises(ArchiveConflict):  # two commits through the snapshot its W came from: the table fences
            two.commit([advance(two, stream, StreamId(1, 0), "2-0", "3-0")])
        assert Archive(url, **options).watermark(stream) == StreamId(2, 0)

    def test_w_only_grows(self, archive, stream):
        """delta-rs takes any version for an app id: a W that would not grow is refused before any commit."""
        archive.commit([advance(archive, stream, None, "5-0")])
        for ids in (("5-0",), ("3-0",)):
            file = stored(archive, stream, *ids)
            with pytest.raises(ArchiveError, match="may only grow"):
                Advance(stream.key, StreamId(5, 0), file.last, (file,))
        assert archive.version == 1

    def test_racing_threads_one_winner(self, store_kind, tmp_path, request, stream):
        """Eight writers commit the same step of W at once (separate Archives where the store is shared):
        exactly one succeeds, on every store."""
        seaweed = request.getfixturevalue("seaweed_server") if store_kind == "s3" else None
        first, url, options = open_archive(store_kind, tmp_path, seaweed)
        first.commit([advance(first, stream, None, "1-0")])  # the table exists: the race is for W alone
        writers = [first] * 8 if store_kind == "memory" else [Archive(url, **options) for _ in range(8)]
        planned = [advance(writer, stream, StreamId(1, 0), f"{index + 2}-0") for index, writer in enumerate(writers)]
        outcomes: list[str] = []
        barrier = threading.Barrier(8)

        def write(index: int) -> None:
            barrier.wait()
            try:
                writers[index].commit([planned[index]])
                outcomes.append("won")
            except ArchiveConflict:
                outcomes.append("lost")

        threads = [threading.Thread(target=write, args=(index,)) for index in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(outcomes) == ["lost"] * 7 + ["won"]
        assert len(first.state(stream).files) == 2

    def test_files_are_never_overwritten(self, archive, stream):
        """A data file's name is taken once: storing under it again is ArchiveObjectExists, the bytes stay."""
        file = stored(archive, stream, "1-0")
        before = archive.location.get(file.path)
        with pytest.raises(ArchiveObjectExists):
            archive.location.put_new(file.path, b"other bytes", "rewriting a file")
        assert archive.location.get(file.path) == before


class TestFencingToken:
    """A replica's lease token travels with its commits: a deposed replica's late commit is refused."""

    def test_a_token_below_the_tables_is_refused(self, archive):
        """Once a commit carried token 200 for a claim, one with token 100 for any stream of it is refused,
        naming the stream, and nothing is written; an equal or higher token commits."""
        one, two = RawKey("fenced:one"), RawKey("fenced:two")
        archive.commit([replace_fence(advance(archive, one, None, "1-0"), Fence("lease/shard-3", 200))])
        late = replace_fence(advance(archive, two, None, "1-0"), Fence("lease/shard-3", 100))
        with pytest.raises(ArchiveFenced) as caught:
            archive.commit([late])
        assert caught.value.streams == (two.key,) and archive.watermark(two) is None
        assert archive.version == 1
        archive.commit([replace_fence(late, Fence("lease/shard-3", 200))])
        assert archive.watermark(two) == StreamId(1, 0)

    @pytest.mark.parametrize("kind", SHARED_STORES)
    def test_a_deposed_writer_loses_even_on_another_stream(self, kind, tmp_path, request):
        """Writer two read the table before writer one (the new holder of the claim) committed another stream
        of the same shard: two's commit loses in delta-rs's check of the claim's app id alone, and read
        again it is fenced."""
        seaweed = request.getfixturevalue("seaweed_server") if kind == "s3" else None
        one, url, options = open_archive(kind, tmp_path, seaweed)
        left, right = RawKey("fenced:left"), RawKey("fenced:right")
        one.commit([replace_fence(advance(one, left, None, "1-0"), Fence("lease/shard-7", 100))])
        two = Archive(url, **options)
        assert two.watermark(right) is None  # two's snapshot, before one's next commit
        one.commit([replace_fence(advance(one, left, StreamId(1, 0), "2-0"), Fence("lease/shard-7", 200))])
        late = replace_fence(advance(two, right, None, "1-0"), Fence("lease/shard-7", 100))
        with pytest.raises(ArchiveConflict):
            two.commit([late])
        with pytest.raises(ArchiveFenced):
            two.commit([late])
        assert Archive(url, **options).watermark(right) is None

    def test_the_token_is_written_once_per_claim(self, archive):
        """Two streams of one claim in one commit write its token once, as a Delta app transaction."""
        one, two = RawKey("fenced:a"), RawKey("fenced:b")
        fence = Fence("lease/shard-1", 42)
        archive.commit([replace_fence(advance(archive, one, None, "1-0"), fence),
                        replace_fence(advance(archive, two, None, "1-0"), fence)])
        assert table_of(archive).transaction_version("lease/shard-1") == 42


def replace_fence(change: Advance, fence: Fence) -> Advance:
    return Advance(change.stream, change.before, change.after, change.files, change.ordinal, fence)


class TestReading:
    @pytest.mark.parametrize("kind", SHARED_STORES)
    def test_latest_w_across_instances(self, kind, tmp_path, request, stream):
        """A reader sees W of every commit another Archive made after it looked."""
        seaweed = request.getfixturevalue("seaweed_server") if kind == "s3" else None
        writer, url, options = open_archive(kind, tmp_path, seaweed)
        reader = Archive(url, **options)
        watermark = None
        for ms in (1, 2, 3):
            writer.commit([advance(writer, stream, watermark, f"{ms}-0")])
            watermark = StreamId(ms, 0)
            assert reader.watermark(stream) == watermark and reader.state(stream).entries == ms
        assert reader.version == 3 and reader.streams() == [stream.key]
        assert table_of(reader, 2).transaction_version(f"{stream.key}/ms") == 2

    def test_w_is_read_without_a_listing(self, redis_conn, tmp_path, stream, append):
        """Between commits, W is one stat of the next log entry away: no listing, no reading of the log."""
        checks: list[str] = []
        refreshes: list[int] = []

        class Watched(Archive):
            def _refresh(self):
                refreshes.append(self._version)
                super()._refresh()

        archive = Watched(str(tmp_path / "watched"))
        archive.commit([advance(archive, stream, None, "1-0")])
        # How long a missing entry is trusted is not what this test is about (that window is seconds): make it
        # long, so that a slow machine's appends and reads cannot outlast it.
        archive._trusted_for = 3600.0
        exists = archive.location.exists
        archive.location.exists = lambda path: checks.append(path) or exists(path)  # type: ignore[method-assign]
        archive.location.listing = None  # type: ignore[method-assign, assignment]  # a listing would fail
        refreshes.clear()
        append(stream, 500)
        assert len(list(read(redis_conn, stream, archive, count=10))) == 501
        assert refreshes == [] and len(checks) >= 50 and set(checks) == {"_delta_log/00000000000000000002.json"}

    def test_a_listed_file_missing_is_an_error(self, redis_conn, archive, stream, append):
        """INV-NOSILENTGAP: a file the log lists and the store lost is ArchiveCorrupt naming it (the merge-read
        lists the files again first, in case a vacuum took it under a slow reader), its cause ArchiveObjectMissing."""
        archive.commit([advance(archive, stream, None, "1-0", "2-0")])
        path = archive.state(stream).files[0].path
        obstore.delete(archive.store, path)
        with pytest.raises(ArchiveCorrupt, match=re.escape(path) + ".* listed by the table's log .* damaged") \
                as caught:
            list(read(redis_conn, stream, archive))
        assert isinstance(caught.value.__cause__, ArchiveObjectMissing)

    def test_a_damaged_file_is_corrupt(self, redis_conn, tmp_path, stream, append):
        """INV-NOSILENTGAP: a stored file with a flipped byte is ArchiveCorrupt naming the object, never rows."""
        archive = Archive(str(tmp_path / "damaged"))
        writer = FileWriter(stream.key)
        writer.add([(f"{ms}-0".encode(), {b"v": f"value {ms}".encode() * 20}) for ms in range(1, 2001)])
        file = archive.put_file(stream, writer.finish())
        archive.commit([Advance(stream.key, None, file.last, (file,))])
        path = tmp_path / "damaged" / file.path
        data = bytearray(path.read_bytes())
        data[len(data) // 3] ^= 0xFF
        path.write_bytes(bytes(data))
        with pytest.raises(ArchiveCorrupt, match=file.path.rsplit("/", 1)[-1]):
            list(read(redis_conn, stream, archive))


class TestStoreErrors:
    def test_wrong_credentials(self, seaweed_server, stream):
        """S3 refusing the signature is ArchiveAccessDenied, a PermissionError."""
        archive = Archive(seaweed_server.archive_url("denied"),
                          **{**seaweed_server.archive_options(), "secret_access_key": "wrong"})
        with pytest.raises(ArchiveAccessDenied) as caught:
            archive.watermark(stream)
        assert isinstance(caught.value, PermissionError) and caught.value.__cause__ is not None

    @pytest.mark.parametrize("with_table", [True, False], ids=["a table", "no table yet"])
    def test_a_local_directory_gone_is_unavailable(self, tmp_path, stream, with_table):
        """A local archive whose directory was removed (a file left in its place) answers ArchiveUnavailable,
        however fresh its snapshot: W was served from memory before (retain_archive_up stayed 1)."""
        root = tmp_path / "archive"
        archive = Archive(f"file://{root}")
        if with_table:
            archive.commit([advance(archive, stream, None, "1-0", "2-0")])
        assert archive.watermark(stream) == (StreamId.parse("2-0") if with_table else None)
        shutil.rmtree(root)
        root.write_text("not a directory")
        with pytest.raises(ArchiveUnavailable, match="is gone"):
            archive.watermark(stream)

    def test_nothing_listening(self, stream):
        """An S3 endpoint nobody serves is ArchiveUnavailable, a ConnectionError, after the retries."""
        archive = Archive("s3://retain/x", endpoint=f"http://127.0.0.1:{free_port()}", region="us-east-1",
                          access_key_id="a", secret_access_key="b",
                          retry_config={"max_retries": 1, "retry_timeout": timedelta(seconds=2)})
        with pytest.raises(ArchiveUnavailable) as caught:
            archive.watermark(stream)
        assert isinstance(caught.value, ConnectionError)
        assert "obstore" not in type(caught.value).__module__ and "deltalake" not in type(caught.value).__module__
