"""The PostgreSQL backend's own business: the URL, the versioned schema, two stores on one database
re-validating what they cache, every store's commits told to listeners in order."""

from __future__ import annotations

from datetime import timedelta

import psycopg
import pytest

from retain.errors import Compacted, PreconditionFailed, SchemaViolation, StorageError
from retain.logd import PostgresBackend, Store
from retain.logd.postgres import SCHEMA_VERSION, is_postgres_url, redacted
from retain.logd.settings import Settings
from retain.logd.sqlite import SqliteBackend
from retain.logd.storage import CommitRecord
from retain.wire import LogdKey


@pytest.fixture
def url(pg_databases):
    made = pg_databases.create("backend")
    yield made
    pg_databases.drop(made)


class TestUrls:
    def test_the_url_picks_the_backend(self, url, tmp_path):
        """postgresql:// is PostgreSQL; a plain path or sqlite:PATH is a SQLite file."""
        with Store.open(url) as shared:
            assert isinstance(shared.backend, PostgresBackend)
        with Store.open(f"sqlite:{tmp_path / 'a.sqlite3'}") as local:
            assert isinstance(local.backend, SqliteBackend)
            assert local.backend.path == str(tmp_path / "a.sqlite3")
        assert is_postgres_url("postgres://u@h/d") and not is_postgres_url("logd.sqlite3")

    def test_password_is_redacted(self):
        """A URL shown in a message or log carries no password."""
        assert redacted("postgresql://logd:s3cret@db:5432/logd") == "postgresql://logd:***@db:5432/logd"
        assert redacted("postgresql://logd@db/logd") == "postgresql://logd@db/logd"

    def test_unreachable_is_unavailable(self):
        """No server at the URL: StorageUnavailable (`unavailable`), not a psycopg error."""
        with pytest.raises(StorageError) as failed:
            PostgresBackend("postgresql://nobody@127.0.0.1:9/none", connect_timeout=2)
        assert failed.value.code == "unavailable"


class TestSchemaVersion:
    def test_made_on_first_open_and_kept(self, url):
        """The first open makes the tables at the current version; a second open finds them and keeps the data."""
        with Store.open(url) as store:
            store.session().patch([{"set": "a", "value": 1}])
        with psycopg.connect(url) as raw:
            assert raw.execute("SELECT version FROM logd_version").fetchone()[0] == SCHEMA_VERSION
        with Store.open(url) as again:
            assert again.session().get("a").value == 1

    def test_a_newer_schema_is_refused(self, url):
        """A database a newer retain wrote is refused, naming both versions."""
        Store.open(url).close()
        with psycopg.connect(url, autocommit=True) as raw:
            raw.execute("UPDATE logd_version SET version = %s", (SCHEMA_VERSION + 1,))
        with pytest.raises(StorageError, match=f"schema version {SCHEMA_VERSION + 1}; this retain knows up to"):
            Store.open(url)


class TestTwoStoresOneDatabase:
    def test_a_schema_set_by_one_binds_the_other(self, url):
        """A store re-reads the schema in the transaction of its write when another store changed it."""
        with Store.open(url) as first, Store.open(url) as second:
            second.session().patch([{"set": "events", "value": []}])
            first.session().set_schema({"events": LogdKey("id")})
            with pytest.raises(SchemaViolation):
                second.session().patch([{"set": "events", "value": [{"no_id": 1}]}])
            assert second.schema.to_document() == first.schema.to_document()

    def test_compaction_by_one_is_seen_by_the_other(self, url):
        """A read on one store at a commit another store compacted away answers `compacted`."""
        settings = Settings(cutoff=timedelta(hours=1), tiers=())
        with Store.open(url, settings=settings) as first, Store.open(url, settings=settings) as second:
            for n in range(3):
                first.session().patch([{"set": "n", "value": n}])
            assert second.session().get("n", at=1).value == 0
            first.compact(first.clock() + timedelta(days=1))
            with pytest.raises(Compacted):
                second.session().get("n", at=1)

    def test_listeners_hear_every_store_in_order(self, url):
        """A store's listeners are told of the other store's commits too, in order, each once -- before its own."""
        heard: list[int] = []
        with Store.open(url) as first, Store.open(url) as second:
            first.listen(lambda record: heard.append(record.number))
            second.session().patch([{"set": "a", "value": 1}])
            second.session().patch([{"set": "b", "value": 2}])
            first.session().patch([{"set": "c", "value": 3}])  # told of 1 and 2 first
            second.session().patch([{"set": "d", "value": 4}])
            assert first.catch_up() == 4
            assert first.catch_up() == 4
        assert heard == [1, 2, 3, 4]

    def test_commit_numbers_interleave_without_gaps(self, url):
        """Writes from two stores take numbers from one counter: gapless, in the order they committed."""
        with Store.open(url) as first, Store.open(url) as second:
            numbers = [(first if n % 2 else second).session().patch([{"set": f"k{n}", "value": n}]).commit
                       for n in range(10)]
            assert numbers == list(range(1, 11))
            log: list[CommitRecord] = list(first.backend.commits(1, (0,)))
            assert [record.number for record in log] == numbers


class TestCheck:
    def test_a_consistent_store_has_no_problems(self, url):
        """A store written normally checks clean, quick and full."""
        with Store.open(url) as store:
            store.session().patch([{"set": "a", "value": 1}])
            assert store.backend.check() == [] and store.backend.check(full=True) == []

    def test_damage_is_named(self, url):
        """A head row out of step with the log, a gap in it: each named."""
        with Store.open(url) as store:
            for n in range(3):
                store.session().patch([{"set": "a", "value": n}])
            with psycopg.connect(url, autocommit=True) as raw:
                raw.execute("DELETE FROM commits WHERE number = 2")
                raw.execute("UPDATE head SET number = 5")
            assert store.backend.check() == ["the head row says commit 5 but the log ends at 3"]
            assert "the commit log has gaps: 2 commits numbered up to 3" in store.backend.check(full=True)


class TestOneRoundTripLess:
    """A patch of new records reads ahead with the lock, and a one-row commit's statement goes with COMMIT: both
    statements prepared once per connection. psycopg may answer a rollback with DEALLOCATE ALL; whatever it did,
    the next patches still commit."""

    def test_patches_after_rollbacks_commit(self, url):
        with Store.open(url) as store:
            session = store.session()
            session.patch([{"set": "jobs", "value": {}}, {"set": "counter", "value": 0}])
            for n in range(12):
                session.patch([{"set": f"jobs.j{n}", "value": {"n": n}}])
                # the same read again and again: past psycopg's prepare threshold it prepares statements of its
                # own, and then answers a ROLLBACK with DEALLOCATE ALL
                assert session.get(f"jobs.j{n}").value == {"n": n}
                with pytest.raises(PreconditionFailed):  # a rolled-back transaction
                    session.patch([{"set": "counter", "value": n + 1}], precondition={"counter": -1})
            assert sorted(session.list("jobs.*").items) == sorted(f"j{n}" for n in range(12))
            prepared = [row[0] for row in store.backend._conn().execute(
                "SELECT name FROM pg_prepared_statements WHERE name LIKE 'logd%' ORDER BY name")]
            assert prepared == ["logd_append_one", "logd_latest_absent_0"]

    def test_one_round_trip_reads_what_two_would(self, url):
        """What the read ahead answers is what latest_absent reads alone: the parent's record, whether the keys
        were ever written -- so a set over a key written before goes the general way and replaces it."""
        with Store.open(url) as store:
            session = store.session()
            session.patch([{"set": "jobs", "value": {}}])
            session.patch([{"set": "jobs.j1", "value": {"n": 1, "old": True}}])
            session.patch([{"set": "jobs.j1", "value": {"n": 2}}])
            session.patch([{"set": "jobs.j2", "value": {"n": 3}}])
            assert session.get("jobs").value == {"j1": {"n": 2}, "j2": {"n": 3}}
