"""Sessions and scopes: a scope reads the baseline overlaid with its own writes, which stay in it."""

from __future__ import annotations

import pytest

from retain.errors import InvalidPath, InvalidRequest, NotFound

JOB = {"status": "done", "updatedAt": "2026-09-11T07:00:00Z"}


@pytest.fixture
def seeded(store):
    base = store.session(author="verse/ops")
    base.patch([{"set": "jobs", "value": {"j1": JOB, "j2": JOB, "j3": JOB}}])
    return store, base


class TestScopes:
    def test_writes_stay_in_the_scope(self, seeded):
        """A scope's writes are invisible to the baseline and to other scopes; it sees its own."""
        store, base = seeded
        trial, other = store.session(scope="trial-1"), store.session(scope="trial-2")
        trial.patch([{"delete": "jobs.j1"}, {"set": "jobs.j2.status", "value": "again"},
                     {"set": "jobs.j4", "value": JOB}])
        assert trial.list("jobs.*").items == {"j2": {**JOB, "status": "again"}, "j3": JOB, "j4": JOB}
        assert base.list("jobs.*").items == {"j1": JOB, "j2": JOB, "j3": JOB}
        assert other.list("jobs.*").items == base.list("jobs.*").items

    def test_baseline_shows_through(self, seeded):
        """Baseline writes after the scope began show in the scope wherever the scope has not written."""
        store, base = seeded
        trial = store.session(scope="trial-1")
        trial.patch([{"set": "jobs.j1.status", "value": "mine"}])
        base.patch([{"set": "jobs.j5", "value": JOB}, {"set": "jobs.j1.status", "value": "theirs"}])
        items = trial.list("jobs.*").items
        assert items["j5"] == JOB and items["j1"]["status"] == "mine"

    def test_scope_removal_hides_later_baseline_children(self, seeded):
        """A record the scope deleted stays deleted there, even when the baseline writes beneath it later."""
        store, base = seeded
        trial = store.session(scope="trial-1")
        trial.patch([{"delete": "jobs"}])
        base.patch([{"set": "jobs.j1.nested", "value": {"deep": 1}}])
        with pytest.raises(NotFound):
            trial.get("jobs")
        with pytest.raises(NotFound):
            trial.get("jobs.j1.nested")
        assert base.get("jobs.j1.nested.deep").value == 1

    def test_scope_reads_at_older_commits(self, seeded):
        """Scoped reads at an older commit see baseline and scope as they were then."""
        store, base = seeded
        trial = store.session(scope="trial-1")
        first = trial.patch([{"delete": "jobs.j1"}]).commit
        base.patch([{"delete": "jobs.j2"}])
        trial.patch([{"delete": "jobs.j3"}])
        assert set(trial.list("jobs.*", at=first).items) == {"j2", "j3"}
        assert trial.list("jobs.*").items == {}
        assert set(base.list("jobs.*", at=first).items) == {"j1", "j2", "j3"}

    def test_one_commit_series(self, seeded):
        """Scoped and baseline commits share one gapless numbering; deltas follow each view."""
        store, base = seeded
        trial = store.session(author="trial", scope="trial-1")
        trial.patch([{"delete": "jobs.j1"}])
        base.patch([{"delete": "jobs.j2"}])
        assert store.head == 3
        assert [d.commit for d in base.deltas("jobs", first=1)] == [1, 3]
        assert [(d.commit, d.author) for d in trial.deltas("jobs", first=1)] == [
            (1, "verse/ops"), (2, "trial"), (3, "verse/ops")]

    def test_list_and_drop(self, seeded):
        """Scopes are listed with the commit they began at; dropping one removes its records only."""
        store, base = seeded
        store.session(scope="trial-1").patch([{"delete": "jobs.j1"}])
        store.session(scope="trial-2")
        assert [(s.name, s.created) for s in store.scopes()] == [("trial-1", 1), ("trial-2", 2)]
        store.drop_scope("trial-1")
        assert [s.name for s in store.scopes()] == ["trial-2"]
        assert set(store.session(scope="trial-1").list("jobs.*").items) == {"j1", "j2", "j3"}
        with pytest.raises(NotFound, match="no scope named 'nope'"):
            store.drop_scope("nope")
        assert store.backend.commits(1, (0, 1, 2, 3)).__next__().number == 1  # the log keeps every number

    @pytest.mark.parametrize(("kwargs", "error", "message"), [
        ({"author": ""}, InvalidRequest, "an author is a string"),
        ({"author": 7}, InvalidRequest, "an author is a string"),
        ({"scope": "a b"}, InvalidPath, "contains ' '"),
    ])
    def test_session_refusals(self, store, kwargs, error, message):
        """A session needs a real author and a scope name from the key set."""
        with pytest.raises(error, match=message):
            store.session(**kwargs)
