"""Views: a read walks down a path in one look-up, and reads what it read record by record."""

from __future__ import annotations

import pytest

from retain.errors import InvalidRequest, NotFound
from retain.logd import Store
from retain.logd.paths import parse
from retain.logd.view import View, list_items, read_value

TREE = {"jobs": {"j1": {"status": "new", "tags": ["a", "b"], "runs": [{"n": 1}]}, "j2": {"status": "done"}},
        "events": [], "top": 7}


class RowByRow(View):
    """A view that reads each record alone, as views did before they read a path's records at once."""

    def prefetch(self, path):
        pass


class TestPrefetch:
    @pytest.mark.parametrize("path", ["jobs", "jobs.j1", "jobs.j1.status", "jobs.j1.tags[1]", "jobs.j1.runs[0].n",
                                      "top", "jobs.j9", "jobs.j1.status.deeper", "missing.a.b", "jobs(j1)"])
    def test_reads_what_record_by_record_reads(self, store, path):
        """Every get answers (or refuses) as a view reading one record at a time does."""
        store.session().patch([{"set": key, "value": value} for key, value in TREE.items()])
        store.session().patch([{"set": "jobs.j1.status", "value": "running"}, {"delete": "jobs.j2"}])
        place = parse(path)
        outcomes = []
        for view in (View(store.backend, store.head), RowByRow(store.backend, store.head)):
            try:
                outcomes.append(read_value(view, place))
            except (NotFound, InvalidRequest) as exc:
                outcomes.append((type(exc), str(exc)))
        assert outcomes[0] == outcomes[1]

    def test_at_an_older_commit(self, store):
        """Read ahead at an older commit: the versions of that commit, not the newest."""
        store.session().patch([{"set": "jobs", "value": {"j1": {"status": "new"}}}])
        store.session().patch([{"set": "jobs.j1.status", "value": "done"}])
        assert read_value(View(store.backend, 1), parse("jobs.j1.status")) == "new"
        assert list_items(View(store.backend, 2), parse("jobs.*")) == {"j1": {"status": "done"}}

    def test_a_small_get_is_five_statements(self, tmp_path):
        """A get of one record on a snapshot: begin, the head, the records down the path in one, the record's
        subtree, commit (it was eight: a look-up per record on the way and a statement to start the snapshot)."""
        store = Store.open(str(tmp_path / "logd.sqlite3"))
        store.session().patch([{"set": key, "value": value} for key, value in TREE.items()])
        with store.backend.reading(keep=True):
            pass  # the reader connection made
        statements: list[str] = []
        store.backend._kept.db.set_trace_callback(statements.append)
        with store.backend.reading(keep=True) as reads:
            assert store.session().on(reads).get("jobs.j1").value["status"] == "new"
        assert len(statements) == 5, statements
        store.close()

    def test_a_small_patch_reads_its_path_in_one_statement(self, tmp_path):
        """A patch of one leaf on the writer: begin, the head, the records down its path in one, the leaf's
        subtree, its two inserts, commit (it was ten: a look-up per record on the way)."""
        store = Store.open(str(tmp_path / "logd.sqlite3"))
        store.session().patch([{"set": key, "value": value} for key, value in TREE.items()])
        statements: list[str] = []
        store.backend._db.set_trace_callback(statements.append)
        store.session().patch([{"set": "jobs.j1.status", "value": "done"}])
        assert len(statements) == 7, statements
        store.close()
