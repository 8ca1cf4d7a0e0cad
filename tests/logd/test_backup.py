"""Backups of a running store, and restores of them: SQLite's online backup at one commit (retain.logd.backup and
its commands), and PostgreSQL's pg_dump/pg_restore procedure as docs/operating.md writes it."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from retain.cli import main
from retain.errors import InvalidBackup, StorageError, StoreDamaged
from retain.logd import Store, backup, restore
from retain.logd.client import Client
from retain.logd.server import ServerThread
from retain.logd.settings import Settings
from retain.servers import free_port
from tests.helpers.waiting import wait_for

ITEMS = 1500


def filled(path: Path | str, clock=None) -> Store:
    """A store of ITEMS jobs in 15 commits (some hundreds of pages), and a scope's own commit."""
    store = Store.open(str(path), settings=Settings(synchronous="normal"), **({"clock": clock} if clock else {}))
    session = store.session(author="filler")
    for first in range(0, ITEMS, 100):
        session.patch([{"set": f"jobs.j{index:05d}", "value": {"status": "done", "n": index, "pad": "x" * 200}}
                       for index in range(first, first + 100)])
    store.session(author="trial", scope="trial-1").patch([{"set": "jobs.j00000.status", "value": "scoped"}])
    return store


def rows(path: Path | str, upto: int) -> tuple[list[tuple], list[tuple], list[tuple]]:
    """Every record version and commit numbered up to ``upto`` in the SQLite store at ``path``, and its scopes, as
    the file holds them."""
    with sqlite3.connect(path) as db:
        return (db.execute("SELECT scope, key, rev, kind, value FROM nodes WHERE rev <= ? ORDER BY scope, key, rev",
                           (upto,)).fetchall(),
                db.execute("SELECT number, time, author, scope, ops FROM commits WHERE number <= ? ORDER BY number",
                           (upto,)).fetchall(),
                db.execute("SELECT id, name, created FROM scopes ORDER BY id").fetchall())


class Writer(threading.Thread):
    """Single-item patches through a served store, one after another, until stopped; the commits acknowledged."""

    def __init__(self, address: tuple[str, int]) -> None:
        super().__init__(daemon=True)
        self.address, self.acked, self.stopping = address, [], threading.Event()

    def run(self) -> None:
        with Client(self.address, author="writer") as logd:
            while not self.stopping.is_set():
                count = len(self.acked)
                self.acked.append(logd.patch([{"set": f"jobs.w{count:05d}", "value": {"n": count}}]).commit)

    def stop(self) -> None:
        self.stopping.set()
        self.join(timeout=60)


class TestBackupWhileServing:
    def test_the_copy_is_one_commit_of_the_source(self, tmp_path):
        """A backup taken in small steps while a client commits between every two of them: the copy's head is a
        commit of the source, SQLite's check and logd's pass, and every record version and commit up to it is the
        source's, byte for byte; reads at that commit answer the same."""
        source = filled(tmp_path / "logd.sqlite3")
        with ServerThread(source, listen=("127.0.0.1", 0)) as served:
            writer = Writer(served.server.address)
            writer.start()
            steps: list[int] = []

            def between_steps(remaining: int, total: int) -> None:
                seen = len(writer.acked)
                steps.append(remaining)
                # A copy that starts over whenever the source changes never ends under a writer: fail, not hang.
                assert len(steps) <= total // 16 + 1, "the copy starts over under the writer"
                wait_for(lambda: len(writer.acked) > seen, what="a commit between two backup steps")

            try:
                wait_for(lambda: len(writer.acked) >= 3, what="the writer's first commits")
                taken = backup(str(tmp_path / "logd.sqlite3"), tmp_path / "copy.sqlite3", step_pages=16,
                               progress=between_steps)
            finally:
                writer.stop()
        assert len(steps) > 10 and steps[-1] == 0
        assert any(commit > taken.commit for commit in writer.acked)  # the writer went on past the copy's commit
        result = CliRunner().invoke(main, ["logd", "check", "--db", taken.path])
        assert result.exit_code == 0 and result.output.strip() == f"{taken.path}: ok"
        assert rows(taken.path, taken.commit) == rows(tmp_path / "logd.sqlite3", taken.commit)
        assert rows(taken.path, sys.maxsize)[1][-1][0] == taken.commit  # nothing past it
        with Store.open(taken.path) as copy:
            assert copy.head == taken.commit
            assert copy.session().get().value == source.session().get(at=taken.commit).value
            assert copy.session(scope="trial-1").get("jobs.j00000").value["status"] == "scoped"
        source.close()

    def test_a_restore_into_a_fresh_path_serves_it(self, tmp_path):
        """A copy restored where no store was: served, it answers the copy's reads and takes the next commit."""
        source = filled(tmp_path / "logd.sqlite3")
        taken = backup(str(tmp_path / "logd.sqlite3"), tmp_path / "copy.sqlite3")
        (tmp_path / "fresh").mkdir()
        done = restore(taken.path, f"sqlite:{tmp_path / 'fresh' / 'logd.sqlite3'}")
        assert (done.commit, done.replaced) == (taken.commit, False)
        with Store.open(str(tmp_path / "fresh" / "logd.sqlite3")) as fresh, \
                ServerThread(fresh, listen=("127.0.0.1", 0)) as served, Client(served.server.address) as logd:
            assert logd.get("jobs").value == source.session().get("jobs").value
            assert logd.patch([{"set": "jobs.new", "value": {"n": 0}}]).commit == taken.commit + 1
        source.close()

    def test_a_restore_with_force_replaces_a_store(self, tmp_path):
        """--force replaces a store that holds other commits: afterwards it holds the copy's, and only those."""
        filled(tmp_path / "logd.sqlite3").close()
        taken = backup(str(tmp_path / "logd.sqlite3"), tmp_path / "copy.sqlite3")
        with Store.open(str(tmp_path / "other.sqlite3")) as other:
            for index in range(40):
                other.session().patch([{"set": f"other.o{index}", "value": index}])
        done = restore(taken.path, str(tmp_path / "other.sqlite3"), force=True)
        assert (done.commit, done.replaced) == (taken.commit, True)
        assert rows(tmp_path / "other.sqlite3", sys.maxsize) == rows(tmp_path / "logd.sqlite3", sys.maxsize)


class TestRefusals:
    def test_before_anything_is_read_or_written(self, tmp_path):
        """What cannot mean what it says is refused naming what is wrong and what was expected; no file is made."""
        filled(tmp_path / "logd.sqlite3").close()
        (tmp_path / "taken.sqlite3").write_bytes(b"keep me")
        before = sorted(path.name for path in tmp_path.iterdir())
        cases = [
            (lambda: backup("postgresql://logd@db/logd", tmp_path / "x"), "back it up with pg_dump"),
            (lambda: backup(str(tmp_path / "missing.sqlite3"), tmp_path / "x"), "no store to back up at"),
            (lambda: backup(":memory:", tmp_path / "x"), "must be a SQLite file path"),
            (lambda: backup(str(tmp_path / "logd.sqlite3"), tmp_path / "taken.sqlite3"), "exists: pass --force"),
            (lambda: backup(str(tmp_path / "logd.sqlite3"), tmp_path / "logd.sqlite3", force=True),
             "is its own source"),
            (lambda: backup(str(tmp_path / "logd.sqlite3"), tmp_path / "no" / "x"), "does not exist"),
            (lambda: backup(str(tmp_path / "logd.sqlite3"), tmp_path, force=True), "is a directory"),
            (lambda: backup(str(tmp_path / "logd.sqlite3"), tmp_path / "x", step_pages=0), "at least 1 page"),
            (lambda: restore(tmp_path / "taken.sqlite3", "postgresql://logd@db/logd"), "pg_restore"),
            (lambda: restore(tmp_path / "missing.sqlite3", str(tmp_path / "x")), "no backup to restore at"),
            (lambda: restore(tmp_path / "logd.sqlite3", str(tmp_path / "taken.sqlite3")), "exists: pass --force"),
        ]
        for call, message in cases:
            with pytest.raises(InvalidBackup, match=message):
                call()
        assert sorted(path.name for path in tmp_path.iterdir()) == before
        assert (tmp_path / "taken.sqlite3").read_bytes() == b"keep me"

    def test_a_backup_that_is_no_logd_store_or_damaged(self, tmp_path):
        """A SQLite file without logd's tables, or one that fails SQLite's check, is not restored; nothing is
        left where it would have gone."""
        with sqlite3.connect(tmp_path / "plain.sqlite3") as db:
            db.execute("CREATE TABLE t (x)")
        with pytest.raises(StorageError, match="is no logd store"):
            restore(tmp_path / "plain.sqlite3", str(tmp_path / "new.sqlite3"))
        assert not (tmp_path / "new.sqlite3").exists()
        filled(tmp_path / "logd.sqlite3").close()
        data = bytearray((tmp_path / "logd.sqlite3").read_bytes())
        data[4096 * 3:4096 * 3 + 64] = b"\xff" * 64  # a page of the table, scribbled over
        (tmp_path / "damaged.sqlite3").write_bytes(bytes(data))
        with pytest.raises(StoreDamaged, match="is damaged"):
            restore(tmp_path / "damaged.sqlite3", str(tmp_path / "new.sqlite3"))
        assert not (tmp_path / "new.sqlite3").exists()

    def test_a_store_in_use_is_never_replaced(self, tmp_path):
        """With --force too: a store a logd serves (a process of its own) or one open in this process is refused,
        and keeps its commits."""
        filled(tmp_path / "logd.sqlite3").close()
        taken = backup(str(tmp_path / "logd.sqlite3"), tmp_path / "copy.sqlite3")
        other = tmp_path / "served.sqlite3"
        with Store.open(str(other)) as store:
            store.session().patch([{"set": "mine", "value": 1}])
            with pytest.raises(StorageError, match="is in use"):
                restore(taken.path, str(other), force=True)
        port = free_port()
        process = subprocess.Popen([sys.executable, "-c", "from retain.cli import main; main()", "logd", "serve",
                                    "--db", str(other), "--listen", f"127.0.0.1:{port}"], stderr=subprocess.PIPE)
        try:
            wait_for(lambda: _answers(port), what="the served logd", timeout=30.0, child=process)
            with pytest.raises(StorageError, match="is in use"):
                restore(taken.path, str(other), force=True)
        finally:
            process.terminate()
            assert process.wait(timeout=30) == 0
        with Store.open(str(other)) as store:
            assert store.session().get("mine").value == 1 and store.head == 1


def _answers(port: int) -> bool:
    try:
        with Client(("127.0.0.1", port)) as logd:
            return logd.get("mine").value == 1
    except OSError:
        return False


class TestCommands:
    def test_backup_and_restore(self, tmp_path):
        """The commands say what they did; a refusal is one line and exit status 1."""
        filled(tmp_path / "logd.sqlite3").close()
        runner = CliRunner()
        result = runner.invoke(main, ["logd", "backup", "--db", str(tmp_path / "logd.sqlite3"),
                                      str(tmp_path / "copy.sqlite3"), "--step-pages", "8"])
        assert result.exit_code == 0, result.output
        head = ITEMS // 100 + 1
        assert result.output.startswith(f"{tmp_path / 'copy.sqlite3'}: commit {head}, ")
        result = runner.invoke(main, ["logd", "backup", "--db", str(tmp_path / "logd.sqlite3"),
                                      str(tmp_path / "copy.sqlite3")])
        assert result.exit_code == 1 and "exists: pass --force" in result.output
        result = runner.invoke(main, ["logd", "restore", str(tmp_path / "copy.sqlite3"), "--db",
                                      str(tmp_path / "back.sqlite3")])
        assert result.exit_code == 0 and result.output.strip() == \
            f"{tmp_path / 'back.sqlite3'}: restored at commit {head}"
        result = runner.invoke(main, ["logd", "restore", str(tmp_path / "copy.sqlite3"), "--db",
                                      str(tmp_path / "back.sqlite3"), "--force"])
        assert result.exit_code == 0 and result.output.strip().endswith("(replaced the store there)")


class TestWatchFromPastTheHead:
    def test_refused(self, served, store):
        """A watch from past the next commit -- a watcher that saw commits a restore took back -- is refused,
        saying to read at the head; from the next commit it is taken."""
        store.session().patch([{"set": "jobs", "value": {}}])
        with Client(served.server.address) as logd:
            answer = logd.request({"watch": {"path": "jobs", "from": 5}})
            assert answer["error"]["code"] == "invalid_request"
            assert "past the next commit 2" in answer["error"]["message"]
            assert logd.watch("jobs", first=2)["commit"] == 1


class TestPostgresProcedure:
    def test_pg_dump_and_pg_restore_while_writers_commit(self, pg_databases, postgres_server, tmp_path):
        """docs/operating.md's procedure, while a writer commits: pg_dump's one snapshot holds one commit of the
        source; restored into a new database, `retain logd check` passes, every record version and commit up to it
        is the source's, and the restored store serves it and takes the next commit."""
        source_url = pg_databases.create("backup_source")
        source = filled(source_url)
        tools = postgres_server.bin_dir
        restored_name = "backup_restored"
        pg_databases.drop(postgres_server.database_url(restored_name))
        with ServerThread(source, listen=("127.0.0.1", 0)) as served:
            writer = Writer(served.server.address)
            writer.start()
            try:
                wait_for(lambda: len(writer.acked) >= 3, what="the writer's first commits")
                dump = tmp_path / "logd.dump"
                subprocess.run([str(tools / "pg_dump"), "--format=custom", f"--file={dump}", source_url],
                               check=True, capture_output=True)
                seen = len(writer.acked)
                wait_for(lambda: len(writer.acked) > seen + 3, what="commits after the dump")
            finally:
                writer.stop()
        try:
            subprocess.run([str(tools / "createdb"), f"--maintenance-db={postgres_server.url}", "--template=template0",
                            restored_name], check=True, capture_output=True)
            restored_url = postgres_server.database_url(restored_name)
            subprocess.run([str(tools / "pg_restore"), "--no-owner", "--exit-on-error", f"--dbname={restored_url}",
                            str(dump)], check=True, capture_output=True)
            result = CliRunner().invoke(main, ["logd", "check", "--db", restored_url])
            assert result.exit_code == 0, result.output
            with Store.open(restored_url) as copy:
                head = copy.head
                assert 0 < head < writer.acked[-1]
                assert _pg_rows(restored_url, head) == _pg_rows(source_url, head)
                assert copy.session().get().value == source.session().get(at=head).value
                assert copy.session().patch([{"set": "after", "value": 1}]).commit == head + 1
        finally:
            source.close()
            pg_databases.drop(postgres_server.database_url(restored_name))


def _pg_rows(url: str, upto: int) -> tuple[list[tuple], list[tuple]]:
    import psycopg

    with psycopg.connect(url) as db:
        return (db.execute("SELECT scope, key, rev, kind, value FROM nodes WHERE rev <= %s ORDER BY scope, key, rev",
                           (upto,)).fetchall(),
                db.execute("SELECT number, time, author, scope, ops FROM commits WHERE number <= %s ORDER BY number",
                           (upto,)).fetchall())


def test_pg_dump_is_there(postgres_server):
    """The procedure's tools come with the server the tests run."""
    assert all(shutil.which(name, path=str(postgres_server.bin_dir)) for name in ("pg_dump", "pg_restore",
                                                                                 "createdb"))
