"""Content checksums: a byte changed inside a stored value, its length kept, was served and
passed `retain logd check`, because the databases check their pages, not what the pages hold. Every value and delta
now carries the CRC-32 of its bytes; a read and the check compare them, and a mismatch is StoreDamaged (the wire's
storage_error) naming the record and its commit. Stores made before get theirs in a forward migration."""

from __future__ import annotations

import re
import sqlite3
import tempfile
import zlib
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from retain.cli import main
from retain.errors import StorageError, StoreDamaged
from retain.logd import Client, ServerThread, Store, backup, checksums, restore
from retain.logd.postgres import SCHEMA_VERSION as PG_VERSION
from retain.logd.settings import Settings
from retain.logd.sqlite import SCHEMA_VERSION as SQLITE_VERSION
from tests.strategies import logd_scalars

RECORDS = 60
OWNER = b'"owner":"team-0042"'
CHANGED = b'"owner":"team-0043"'  # the same length: SQLite's page checks cannot see it
J42 = "\x1fjobs\x1fj42"


def written(target: str) -> None:
    """RECORDS records, one commit each: jobs.jN is written by commit N + 1 (jobs.j42 by commit 43)."""
    with Store.open(target, settings=Settings(synchronous="normal")) as store:
        for number in range(RECORDS):
            store.session().patch([{"set": f"jobs.j{number}",
                                    "value": {"owner": f"team-{number:04d}", "status": "done"}}])


def settled(path: str) -> bytes:
    """The store's WAL copied into its file, as a stopped store's file is; the file's bytes."""
    db = sqlite3.connect(path)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    return Path(path).read_bytes()


def change_in_file(path: str, *, delta: bool) -> None:
    """Change "team-0042" to "team-0043" in the file's bytes, in the record's value (``delta`` False) or in the
    delta of the commit that wrote it: both hold the same text, the delta inside ``"value":{``."""
    data = bytearray(settled(path))
    found = [match.start() for match in re.finditer(re.escape(OWNER), data)
             if (data[match.start() - 9:match.start()] == b'"value":{') == delta]
    assert len(found) == 1, found
    data[found[0]:found[0] + len(CHANGED)] = CHANGED
    Path(path).write_bytes(data)


def check(target: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["logd", "check", "--db", target])
    return result.exit_code, result.output


class TestSqliteChangedByte:
    def test_a_changed_value_is_refused_on_read_and_by_check(self, tmp_path):
        """The attack as made: "team-0042" to "team-0043" in the closed store's file. `get` of the record, of its
        container and over the wire is the damage error naming the record and commit 43; `retain logd check`
        exits 1 naming them; the records beside it are served."""
        path = str(tmp_path / "logd.sqlite3")
        written(path)
        assert check(path) == (0, f"{path}: ok\n")
        change_in_file(path, delta=False)
        with Store.open(path) as store:
            with pytest.raises(StoreDamaged, match="the value of record jobs.j42 .* at commit 43 does not match "
                                                   "its checksum"):
                store.session().get("jobs.j42")
            with pytest.raises(StoreDamaged, match="record jobs.j42 "):
                store.session().get("jobs")
            assert store.session().get("jobs.j41.owner").value == "team-0041"
            with ServerThread(store, listen=("127.0.0.1", 0)) as running, Client(running.address) as client:
                with pytest.raises(StorageError, match="record jobs.j42 .* at commit 43"):
                    client.get("jobs.j42")
                assert client.get("jobs.j43.owner").value == "team-0043"
        code, output = check(path)
        assert code == 1, output
        assert "the value of record jobs.j42 (key '\\x1fjobs\\x1fj42') at commit 43 does not match" in output
        assert "is damaged: 1 problem(s)" in output

    def test_a_changed_delta_is_refused_on_read_and_by_check(self, tmp_path):
        """The same change in the delta of commit 43: reading the deltas is the damage error naming the commit;
        check exits 1 naming it."""
        path = str(tmp_path / "logd.sqlite3")
        written(path)
        change_in_file(path, delta=True)
        with Store.open(path) as store:
            assert store.session().get("jobs.j42.owner").value == "team-0042"
            with pytest.raises(StoreDamaged, match="the delta of commit 43 does not match its checksum"):
                list(store.session().deltas("jobs", first=1))
        code, output = check(path)
        assert code == 1 and "the delta of commit 43 does not match its checksum" in output, output

    def test_a_changed_byte_that_is_no_utf8_is_named_too(self, tmp_path):
        """A byte changed to one no UTF-8 text holds: named as the record's damage, not a bare decode error."""
        path = str(tmp_path / "logd.sqlite3")
        written(path)
        data = bytearray(settled(path))
        at = data.index(b"team-0042\",\"status\"")
        data[at] = 0xFF
        Path(path).write_bytes(data)
        with Store.open(path) as store, pytest.raises(StoreDamaged, match="record jobs.j42 .* at commit 43"):
            store.session().get("jobs.j42")
        code, output = check(path)
        assert code == 1 and "record jobs.j42" in output, output

    def test_a_backup_carries_the_checksums(self, tmp_path):
        """A backup and its restore keep each value's checksum: the restored store checks ok, and a value changed
        in it after is found."""
        path, copy, restored = (str(tmp_path / name) for name in ("logd.sqlite3", "copy.sqlite3", "back.sqlite3"))
        written(path)
        backup(path, copy)
        restore(copy, restored)
        assert check(restored) == (0, f"{restored}: ok\n")
        change_in_file(restored, delta=False)
        code, output = check(restored)
        assert code == 1 and "record jobs.j42" in output, output


class TestPostgresChangedByte:
    """The same change made behind the store's back with an UPDATE of the stored text."""

    @pytest.fixture
    def url(self, pg_databases) -> Iterator[str]:
        url = pg_databases.create("checksums")
        written(url)
        yield url
        pg_databases.drop(url)

    def test_a_changed_value_is_refused_on_read_and_by_check(self, url):
        assert check(url) == (0, f"{url}: ok\n")
        with psycopg.connect(url, autocommit=True) as raw:
            raw.execute("UPDATE nodes SET value = replace(value, 'team-0042', 'team-0043') WHERE key = %s", (J42,))
        with Store.open(url) as store:
            with pytest.raises(StoreDamaged, match="the value of record jobs.j42 .* at commit 43 does not match"):
                store.session().get("jobs.j42")
            with pytest.raises(StoreDamaged, match="record jobs.j42 "):
                store.session().get("jobs")
            with pytest.raises(StoreDamaged, match="record jobs.j42 "):  # the read a patch sends with its lock
                store.session().patch([{"set": "jobs.j42.status", "value": "new"}])
            assert store.session().get("jobs.j41.owner").value == "team-0041"
        code, output = check(url)
        assert code == 1 and "the value of record jobs.j42 (key '\\x1fjobs\\x1fj42') at commit 43" in output, output

    def test_a_changed_delta_is_refused_on_read_and_by_check(self, url):
        with psycopg.connect(url, autocommit=True) as raw:
            raw.execute("UPDATE commits SET ops = replace(ops, 'team-0042', 'team-0043') WHERE number = 43")
        with Store.open(url) as store, pytest.raises(StoreDamaged, match="the delta of commit 43 does not match"):
            list(store.session().deltas("jobs", first=1))
        code, output = check(url)
        assert code == 1 and "the delta of commit 43 does not match its checksum" in output, output


class TestMigration:
    def test_a_sqlite_store_without_checksums_gets_them(self, tmp_path):
        """A store as retain wrote it before checksums (no crc columns, user_version 0) is migrated at open:
        every value and delta gets its checksum, the store checks ok, and a change made after is found."""
        path = str(tmp_path / "logd.sqlite3")
        written(path)
        old = sqlite3.connect(path)
        old.executescript("ALTER TABLE nodes DROP COLUMN crc; ALTER TABLE commits DROP COLUMN ops_crc; "
                          "PRAGMA user_version = 0")
        assert "crc" not in {row[1] for row in old.execute("PRAGMA table_info(nodes)")}
        old.close()
        assert check(path) == (0, f"{path}: ok\n")  # nothing to compare yet: not damage
        with Store.open(path) as store:
            assert store.session().get("jobs.j42.owner").value == "team-0042"
            assert store.backend.check(full=True) == []
        migrated = sqlite3.connect(path)
        assert migrated.execute("PRAGMA user_version").fetchone() == (SQLITE_VERSION,)
        assert migrated.execute("SELECT count(*) FROM nodes WHERE value IS NOT NULL AND crc IS NULL").fetchone() == (0,)
        assert migrated.execute("SELECT count(*) FROM commits WHERE ops_crc IS NULL").fetchone() == (0,)
        migrated.close()
        change_in_file(path, delta=False)
        code, output = check(path)
        assert code == 1 and "record jobs.j42" in output, output

    def test_a_newer_sqlite_store_is_refused(self, tmp_path):
        path = str(tmp_path / "logd.sqlite3")
        written(path)
        newer = sqlite3.connect(path)
        newer.execute(f"PRAGMA user_version = {SQLITE_VERSION + 1}")
        newer.close()
        with pytest.raises(StorageError, match=f"schema version {SQLITE_VERSION + 1}; this retain knows up to"):
            Store.open(path)

    def test_a_postgres_store_without_checksums_gets_them(self, pg_databases):
        """A database at schema version 1 (no checksums) is stepped to 2: the checksums are computed, it checks ok,
        and an UPDATE behind the store's back is found."""
        url = pg_databases.create("migrated")
        try:
            written(url)
            with psycopg.connect(url, autocommit=True) as raw:
                raw.execute("ALTER TABLE nodes DROP COLUMN crc; ALTER TABLE commits DROP COLUMN ops_crc; "
                            "UPDATE logd_version SET version = 1")
            assert check(url) == (0, f"{url}: ok\n")
            with Store.open(url) as store:
                assert store.session().get("jobs.j42.owner").value == "team-0042"
            with psycopg.connect(url, autocommit=True) as raw:
                assert raw.execute("SELECT version FROM logd_version").fetchone() == (PG_VERSION,)
                assert raw.execute("SELECT count(*) FROM nodes WHERE value IS NOT NULL AND crc IS NULL"
                                   ).fetchone() == (0,)
                assert raw.execute("SELECT count(*) FROM commits WHERE ops_crc IS NULL").fetchone() == (0,)
            assert check(url) == (0, f"{url}: ok\n")
            with psycopg.connect(url, autocommit=True) as raw:
                raw.execute("UPDATE nodes SET value = replace(value, '0042', '0043') WHERE key = %s", (J42,))
            code, output = check(url)
            assert code == 1 and "record jobs.j42" in output, output
        finally:
            pg_databases.drop(url)


class TestChecksum:
    def test_it_is_the_crc32_of_the_utf8_bytes(self):
        """What is stored beside a text: zlib's CRC-32 of its UTF-8; None for no text."""
        assert checksums.checksum('{"a":"ü"}') == zlib.crc32('{"a":"ü"}'.encode()) == \
            checksums.checksum_bytes('{"a":"ü"}'.encode())
        assert checksums.checksum(None) is None

    @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(value=st.dictionaries(st.text(alphabet="abcxyz", min_size=1, max_size=6),
                                 st.one_of(logd_scalars, st.lists(logd_scalars, max_size=3)), min_size=1, max_size=4),
           data=st.data())
    def test_any_single_byte_change_of_a_stored_value_is_found(self, value, data):
        """Whatever the value, whichever byte of its stored text changes to whatever other byte: the read is the
        damage error naming the record and its commit, and the full check names it."""
        with tempfile.TemporaryDirectory() as directory:
            path = str(Path(directory) / "logd.sqlite3")
            with Store.open(path, settings=Settings(synchronous="off")) as store:
                store.session().patch([{"set": "jobs.j1", "value": value}])
                raw = sqlite3.connect(path)
                (stored,) = raw.execute("SELECT CAST(value AS BLOB) FROM nodes WHERE key = ? AND value IS NOT NULL",
                                        ("\x1fjobs\x1fj1",)).fetchone()
                at = data.draw(st.integers(0, len(stored) - 1), label="byte")
                byte = data.draw(st.integers(0, 255).filter(lambda new: new != stored[at]), label="becomes")
                changed = stored[:at] + bytes([byte]) + stored[at + 1:]
                raw.execute("UPDATE nodes SET value = CAST(? AS TEXT) WHERE key = ?", (changed, "\x1fjobs\x1fj1"))
                raw.commit()
                raw.close()
                with pytest.raises(StoreDamaged, match="record jobs.j1 .* at commit 1 "):
                    store.session().get("jobs.j1")
                assert any("record jobs.j1 " in problem for problem in store.backend.check(full=True))
