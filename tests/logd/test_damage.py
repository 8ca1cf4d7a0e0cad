"""Damage is detected, never served: a store whose file fails its integrity check is
refused at open, naming the file; `retain logd check` runs the full check; a row that does not decode is a
storage_error naming its key. On PostgreSQL (the same damage checks hold) the head row
and the commit log must agree at open, and the full check finds gaps, versions past the head and rows that
do not decode."""

from __future__ import annotations

import os
import sqlite3
import zlib
from collections.abc import Iterator

import psycopg
import pytest
from click.testing import CliRunner

from retain.cli import main
from retain.errors import StorageError, StoreDamaged
from retain.logd import Client, ServerThread, Store
from retain.logd.settings import Settings
from retain.servers import free_port

BROKEN = '{"status": "do'


def summed(text: str) -> tuple[str, int]:
    """A text and the checksum logd writes with it."""
    return text, zlib.crc32(text.encode())


def filled(path: str) -> None:
    """A stopped store with 3,000 records, its WAL copied into the file."""
    with Store.open(path, settings=Settings(synchronous="normal")) as store:
        for start in range(0, 3000, 500):
            store.session().patch([{"set": f"jobs.j{i}", "value": {"status": "done", "n": i, "pad": "p" * 200}}
                                   for i in range(start, start + 500)])
    db = sqlite3.connect(path)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()


def flip_middle(path: str, size: int = 4096) -> None:
    """Flip every bit of ``size`` bytes in the middle of the file, as the attack did."""
    length = os.path.getsize(path)
    with open(path, "r+b") as file:
        file.seek(length // 2 // 4096 * 4096)
        data = file.read(size)
        file.seek(length // 2 // 4096 * 4096)
        file.write(bytes(byte ^ 0xFF for byte in data))


class TestDamagedFile:
    def test_a_damaged_store_is_refused_at_open(self, tmp_path):
        """4 KiB flipped in the middle of a stopped store: serve used to start and answer gets with records
        missing; now opening it is refused, naming the file and the check."""
        path = str(tmp_path / "logd.sqlite3")
        filled(path)
        flip_middle(path)
        with pytest.raises(StoreDamaged, match=f"the store {path} is damaged \\(PRAGMA quick_check"):
            Store.open(path)

    def test_serve_refuses_and_check_reports(self, tmp_path):
        """`retain logd serve` exits with the error naming the file; `retain logd check` lists the problems and
        exits 1; on a whole store it says ok."""
        path = str(tmp_path / "logd.sqlite3")
        filled(path)
        runner = CliRunner()
        whole = runner.invoke(main, ["logd", "check", "--db", path])
        assert whole.exit_code == 0 and whole.output.strip() == f"{path}: ok"
        flip_middle(path)
        checked = runner.invoke(main, ["logd", "check", "--db", path])
        assert checked.exit_code == 1 and f"{path} is damaged" in checked.output
        served = runner.invoke(main, ["logd", "serve", "--db", path, "--listen", f"127.0.0.1:{free_port()}"])
        assert served.exit_code != 0 and "is damaged" in str(served.output) + str(served.exception)

    def test_a_whole_store_opens(self, tmp_path):
        """The check at open passes a whole store (and a new one)."""
        path = str(tmp_path / "logd.sqlite3")
        filled(path)
        with Store.open(path) as store:
            assert store.backend.check(full=True) == []
            assert store.session().get("jobs.j2999.n").value == 2999


class TestUndecodableRow:
    def test_a_row_that_does_not_decode_is_a_storage_error_naming_its_key(self, tmp_path):
        """A record whose stored JSON was damaged answers storage_error naming the record, over the wire too, and
        the connection goes on."""
        path = str(tmp_path / "logd.sqlite3")
        with Store.open(path) as store:
            store.session().patch([{"set": "jobs.j1", "value": {"status": "done"}},
                                   {"set": "jobs.j2", "value": {"status": "new"}}])
        db = sqlite3.connect(path)
        # The checksum written with it: a value stored undecodable, not damaged since (that is TestChecksums').
        db.execute("UPDATE nodes SET value = ?, crc = ? WHERE key = ?", (*summed(BROKEN), "\x1fjobs\x1fj1"))
        db.commit()
        db.close()
        with Store.open(path) as store:
            with pytest.raises(StoreDamaged, match="the record jobs.j1 .* does not decode"):
                store.session().get("jobs.j1")
            with pytest.raises(StoreDamaged, match="jobs.j1"):
                store.session().get("jobs")
            with ServerThread(store, listen=("127.0.0.1", 0)) as running, Client(running.address) as client:
                with pytest.raises(StorageError, match="the record jobs.j1"):
                    client.get("jobs.j1")
                assert client.get("jobs.j2").value == {"status": "new"}


class TestDamagedDatabase:
    """The PostgreSQL store, damaged by SQL as a bad restore or a hand edit would leave it."""

    @pytest.fixture
    def url(self, pg_databases) -> Iterator[str]:
        url = pg_databases.create("damage")
        with Store.open(url) as store:
            for number in range(3):
                store.session().patch([{"set": f"jobs.j{number}", "value": {"status": "done", "n": number}}])
        yield url
        pg_databases.drop(url)

    def test_a_whole_database_opens_and_checks_ok(self, url):
        """The check at open passes a whole store; `retain logd check` says ok."""
        with Store.open(url) as store:
            assert store.backend.check(full=True) == []
        checked = CliRunner().invoke(main, ["logd", "check", "--db", url])
        assert checked.exit_code == 0 and checked.output.strip() == f"{url}: ok"

    def test_a_head_past_the_log_is_refused_at_open(self, url):
        """A head row ahead of the commit log (a log restored older than its tables): opening and serving are
        refused naming both numbers; nothing was written."""
        with psycopg.connect(url, autocommit=True) as raw:
            raw.execute("UPDATE head SET number = 7")
        with pytest.raises(StoreDamaged, match="the head row says commit 7 but the log ends at 3"):
            Store.open(url)
        served = CliRunner().invoke(main, ["logd", "serve", "--db", url, "--listen", f"127.0.0.1:{free_port()}"])
        assert served.exit_code != 0 and "is damaged" in str(served.output) + str(served.exception)
        with psycopg.connect(url, autocommit=True) as raw:
            assert raw.execute("SELECT count(*) FROM commits").fetchone() == (3,)

    def test_check_names_every_problem(self, url):
        """A gap in the log, a version past the head and undecodable rows: each named, exit status 1."""
        with psycopg.connect(url, autocommit=True) as raw:
            raw.execute("DELETE FROM commits WHERE number = 2")
            # Each written with its checksum: undecodable as stored, not damaged since (that is TestChecksums').
            raw.execute("UPDATE commits SET ops = %s, ops_crc = %s WHERE number = 1", summed('[{"set'))
            raw.execute("UPDATE nodes SET value = %s, crc = %s WHERE key = chr(31) || 'jobs' || chr(31) || 'j0'",
                        summed(BROKEN))
            raw.execute("INSERT INTO nodes (scope, key, rev, kind, value, crc) VALUES (0, chr(31) || 'late', 9, 1, "
                        "%s, %s)", summed("1"))
        checked = CliRunner().invoke(main, ["logd", "check", "--db", url])
        assert checked.exit_code == 1
        for problem in ("the commit log has gaps: 2 commits numbered up to 3",
                        "1 record versions are past the head commit 3",
                        "the delta of commit 1 does not decode",
                        "the value of record 'jobs.j0' at commit 1 does not decode",
                        "is damaged: 4 problem(s)"):
            assert problem in checked.output, checked.output

    def test_check_names_a_database_without_logd(self, pg_databases):
        """A database logd never opened is a problem, and the check makes no table there."""
        url = pg_databases.create("empty")
        try:
            checked = CliRunner().invoke(main, ["logd", "check", "--db", url])
            assert checked.exit_code == 1 and "no logd tables in this database" in checked.output
            with psycopg.connect(url, autocommit=True) as raw:
                assert raw.execute("SELECT to_regclass('logd_version')").fetchone() == (None,)
        finally:
            pg_databases.drop(url)
