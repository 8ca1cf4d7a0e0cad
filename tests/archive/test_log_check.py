"""retain.archive.log_check: damage to the table's log is ArchiveCorrupt naming the damaged object, on every
shared store; an outage stays ArchiveUnavailable (INV-NOSILENTGAP: never a shorter answer, never the wrong kind)."""

from __future__ import annotations

from collections.abc import Callable

import obstore
import pytest

from retain.archive import Archive, fold, read, verify
from retain.errors import ArchiveCorrupt, ArchiveUnavailable
from retain.servers import free_port
from retain.streams import RawKey
from tests.helpers.archive import SHARED_STORES, open_archive

STREAM = RawKey("damaged:log")
LOG = "_delta_log/"


def commit(version: int) -> str:
    return f"{LOG}{version:020d}.json"


def flipped(data: bytes) -> bytes:
    middle = len(data) // 2
    return data[:middle] + bytes([data[middle] ^ 0xFF]) + data[middle + 1:]


def checkpoint_of(archive: Archive) -> str:
    """The path of the log's one checkpoint."""
    return next(str(item["path"]) for item in archive.location.listing(LOG)
                if str(item["path"]).endswith(".checkpoint.parquet"))


#: how the log is damaged -> what the error must name
DAMAGE: dict[str, tuple[Callable[[Archive], None], Callable[[Archive], str]]] = {
    "a middle commit removed": (lambda archive: obstore.delete(archive.store, commit(12)),
                                lambda archive: f"{commit(12)} is missing"),
    "the newest commit but one removed": (lambda archive: obstore.delete(archive.store, commit(13)),
                                          lambda archive: f"{commit(13)} is missing"),
    "a commit truncated": (lambda archive: obstore.put(archive.store, commit(12),
                                                       archive.location.get(commit(12))[:40]),
                           lambda archive: f"{commit(12)} line 1 is not JSON"),
    "a commit overwritten with garbage": (lambda archive: obstore.put(archive.store, commit(12), b"\x00junk{{"),
                                          lambda archive: f"{commit(12)} line 1 is not JSON"),
    "a commit overwritten with bytes that are no text": (lambda archive: obstore.put(archive.store, commit(12),
                                                                                     b"\xff\xfe{{"),
                                                         lambda archive: f"{commit(12)} is not text"),
    "the checkpoint removed": (lambda archive: obstore.delete(archive.store, checkpoint_of(archive)),
                               lambda archive: "names the checkpoint of version 11, which is not in the log"),
    "a byte of the checkpoint flipped": (
        lambda archive: obstore.put(archive.store, checkpoint_of(archive),
                                    flipped(archive.location.get(checkpoint_of(archive)))),
        lambda archive: f"{checkpoint_of(archive)} is not a readable checkpoint"),
    "a bogus _last_checkpoint": (lambda archive: obstore.put(archive.store, f"{LOG}_last_checkpoint",
                                                             b'{"version": 99, "size": 5}'),
                                 lambda archive: "names the checkpoint of version 99, which is not in the log"),
}


@pytest.fixture(params=SHARED_STORES)
def written(request, tmp_path, redis_conn):
    """An archive of 15 commits with a checkpoint at version 11, and the URL and options that open it again."""
    seaweed = request.getfixturevalue("seaweed_server") if request.param == "s3" else None
    archive, url, options = open_archive(request.param, tmp_path, seaweed)
    archive.set_properties({"delta.checkpointInterval": "100"})  # versions 0 and 1; no checkpoint but ours
    for index in range(13):
        redis_conn.xadd(STREAM.key, {"i": str(index)})
        fold(redis_conn, STREAM, archive)
        if index == 9:
            archive.checkpoint()
    return archive, url, options


@pytest.mark.parametrize("damage", DAMAGE, ids=list(DAMAGE))
def test_damage_is_corrupt_and_named(written, redis_conn, damage):
    """Each damage makes reading fail with ArchiveCorrupt naming the object (delta-rs says only "Kernel error");
    `verify` reports it as damage of the log."""
    archive, url, options = written
    make, naming = DAMAGE[damage]
    named = naming(archive)
    make(archive)
    with pytest.raises(ArchiveCorrupt, match=named.replace("(", r"\(").replace(")", r"\)")):
        list(read(redis_conn, STREAM, Archive(url, **options)))
    report = verify(Archive(url, **options))
    assert not report.ok and any(named in item.problem for item in report.damage)


def test_an_unreachable_store_is_unavailable_not_corrupt():
    """A store that does not answer is an outage (ArchiveUnavailable), never reported as damage."""
    archive = Archive("s3://bucket/prefix", endpoint=f"http://127.0.0.1:{free_port()}", region="us-east-1",
                      access_key_id="a", secret_access_key="b", allow_http=True)
    with pytest.raises(ArchiveUnavailable) as caught:
        archive.watermark(STREAM)
    assert not isinstance(caught.value, ArchiveCorrupt)
