"""The store on real SQLite: commits, patches, reads at older commits, schema, watch deltas."""

from __future__ import annotations

import pytest
from hypothesis import assume, given

from retain.errors import (
    InvalidRequest,
    NotFound,
    PreconditionFailed,
    ReadBudgetExceeded,
    SchemaViolation,
    StorageError,
)
from retain.logd.storage import CommitRecord
from retain.logd.store import delta_for
from retain.wire import AutoId, LogdKey, Or, Raw
from tests.strategies import logd_paths

JOB = {"status": "running", "updatedAt": "2026-09-11T07:00:00Z"}


def commits(store):
    return list(store.backend.commits(1, (0,)))


class TestCommits:
    def test_numbered_without_gaps(self, store, clock):
        """Each write is one commit, 1, 2, 3 ..., with the server's time, its author and its delta."""
        ops = store.session(author="verse/ops")
        assert [ops.patch([{"set": f"jobs.j{i}", "value": JOB}]).commit for i in range(5)] == [1, 2, 3, 4, 5]
        ops.patch([{"delete": "jobs.j0"}], author="someone/else")
        log = commits(store)
        assert [c.number for c in log] == [1, 2, 3, 4, 5, 6]
        assert log[0].time == clock.now.timestamp()
        assert [c.author for c in log] == ["verse/ops"] * 5 + ["someone/else"]
        assert log[0].ops == ({"set": "jobs.j0", "value": JOB},) and log[5].ops == ({"delete": "jobs.j0"},)

    def test_times_never_run_backwards(self, store, clock):
        """A clock stepping back does not make a commit older than the one before."""
        from datetime import timedelta
        session = store.session()
        session.patch([{"set": "a", "value": 1}])
        clock.advance(timedelta(hours=-1))
        session.patch([{"set": "a", "value": 2}])
        first, second = commits(store)
        assert second.time == first.time

    def test_reopen_keeps_everything(self, open_store, tmp_path):
        """A store reopened from its file has the same head, state and schema."""
        store = open_store("x.sqlite3")
        session = store.session()
        session.set_schema({"events": LogdKey("id")})
        session.patch([{"set": "events(e1)", "value": {"at": "t"}}])
        store.close()
        again = open_store("x.sqlite3")
        assert again.head == 2
        assert again.session().get("events").value == [{"id": "e1", "at": "t"}]
        assert again.schema.keying(__import__("retain.logd.paths").logd.paths.parse("events")) == LogdKey("id")


class TestPatch:
    def test_set_creates_missing_maps(self, store):
        """Setting a deep path makes the maps on the way."""
        session = store.session()
        session.patch([{"set": "a.b.c", "value": 1}])
        assert session.get().value == {"a": {"b": {"c": 1}}}

    def test_set_replaces_whole(self, store):
        """Setting a map replaces it: children not in the new value are gone, at every depth."""
        session = store.session()
        session.patch([{"set": "job", "value": {"status": "x", "steps": {"s1": {"ok": True}}, "n": 1}}])
        session.patch([{"set": "job", "value": {"status": "y"}}])
        assert session.get("job").value == {"status": "y"}
        session.patch([{"set": "job", "value": 5}])
        assert session.get("job").value == 5
        session.patch([{"set": "job", "value": {"again": {"deep": 1}}}])
        assert session.get().value == {"job": {"again": {"deep": 1}}}

    def test_delete(self, store):
        """Delete removes a leaf, a record and its subtree; a missing place is not_found."""
        session = store.session()
        session.patch([{"set": "jobs", "value": {"j1": {"status": "x", "deep": {"a": 1}}, "n": 2}}])
        session.patch([{"delete": "jobs.j1"}, {"delete": "jobs.n"}])
        assert session.get("jobs").value == {}
        with pytest.raises(NotFound, match="jobs.j1 does not exist"):
            session.patch([{"delete": "jobs.j1"}])

    def test_all_or_nothing(self, store):
        """A patch whose later op fails writes nothing of its earlier ops."""
        session = store.session()
        session.patch([{"set": "a", "value": 1}])
        with pytest.raises(NotFound):
            session.patch([{"set": "a", "value": 2}, {"set": "b", "value": 3}, {"delete": "nope"}])
        assert store.head == 1 and session.get().value == {"a": 1}

    def test_precondition(self, store):
        """A precondition that holds lets the patch through; one that fails writes nothing."""
        session = store.session()
        session.patch([{"set": "jobs.j1", "value": JOB}])
        session.patch([{"set": "jobs.j1.status", "value": "done"}],
                      precondition={"jobs.j1": {"status": Or(("running", "queued"))}})
        with pytest.raises(PreconditionFailed, match="precondition on jobs.j1 failed at commit 2"):
            session.patch([{"delete": "jobs.j1"}], precondition={"jobs.j1": {"status": "running"}})
        with pytest.raises(PreconditionFailed, match="jobs.j9 failed at commit 2: it does not exist"):
            session.patch([{"delete": "jobs.j1"}], precondition={"jobs.j9": {}})
        assert store.head == 2 and session.get("jobs.j1.status").value == "done"

    def test_precondition_on_every_entry(self, store):
        """Every entry of the precondition must hold, not just one."""
        session = store.session()
        session.patch([{"set": "a", "value": 1}, {"set": "b", "value": 2}])
        with pytest.raises(PreconditionFailed, match="on b"):
            session.patch([{"set": "c", "value": 3}], precondition={"a": 1, "b": 3})
        assert store.head == 1

    @pytest.mark.parametrize(("ops", "error", "message"), [
        ([], InvalidRequest, "non-empty list"),
        ([{"set": "a"}], InvalidRequest, "set needs a value"),
        ([{"delete": "a", "value": 1}], InvalidRequest, "takes no value"),
        ([{"set": "a", "delete": "b"}], InvalidRequest, "an op is"),
        ([{"put": "a", "value": 1}], InvalidRequest, "an op is"),
        ([{"set": "jobs.*", "value": 1}], InvalidRequest, "wildcard"),
        ([{"set": "a..b", "value": 1}], InvalidRequest, "'..'"),
        ([{"set": "a", "value": {"b c": 1}}], InvalidRequest, "contains ' '"),
        ([{"set": "a", "value": float("nan")}], InvalidRequest, "not a number JSON can carry"),
        ([{"set": "a", "value": Or((1,))}], InvalidRequest, "tags such as !or are for patterns"),
        (["set a"], InvalidRequest, "an op is"),
    ])
    def test_refused_before_any_write(self, store, ops, error, message):
        """Malformed ops are refused whole with a message naming what was wrong."""
        with pytest.raises(error, match=message):
            store.session().patch(ops)
        assert store.head == 0


class TestReads:
    def test_at_older_commits(self, store):
        """A read at an older commit sees the tree as it was then, and says which commit it read."""
        session = store.session()
        session.patch([{"set": "jobs.j1", "value": JOB}])
        session.patch([{"set": "jobs.j1.status", "value": "done"}, {"set": "jobs.j2", "value": JOB}])
        session.patch([{"delete": "jobs.j1"}])
        assert session.get("jobs.j1", at=1).value == JOB
        assert session.get("jobs.j1.status", at=2).value == "done"
        assert session.list("jobs.*", at=2).items == {"j1": {**JOB, "status": "done"}, "j2": JOB}
        current = session.list("jobs.*")
        assert current.commit == 3 and current.items == {"j2": JOB}
        with pytest.raises(NotFound, match="at commit 3"):
            session.get("jobs.j1")
        assert session.get("jobs.j1", at=2).commit == 2

    @pytest.mark.parametrize("at", [0, 4, -1, "1", 1.0, True])
    def test_at_must_be_a_commit(self, store, at):
        """at is a commit number from 1 to the head."""
        session = store.session()
        for value in range(3):
            session.patch([{"set": "a", "value": value}])
        with pytest.raises(InvalidRequest, match="at must be a commit number from 1 to the head 3"):
            session.get("a", at=at)

    def test_list_fits_the_container(self, store):
        """list's wildcard must fit the container; get refuses wildcards."""
        session = store.session()
        session.set_schema({"events": LogdKey("id")})
        session.patch([{"set": "jobs.j1", "value": JOB}, {"append": "events", "value": {"id": "e1"}},
                       {"set": "list", "value": [1, 2]}, {"set": "n", "value": 3}])
        assert session.list("events(*)").items == [{"id": "e1"}]
        assert session.list("list[*]").items == [1, 2]
        assert session.list("jobs.j1.*").items == JOB
        for path, message in [("events.*", r"keyed array; list events\(\*\)"), ("jobs(*)", r"map; list jobs.\*"),
                              ("jobs[*]", r"map; list jobs.\*"), ("list.*", r"dense array; list list\[\*\]"),
                              ("n.*", "not a container"), ("jobs", r"list takes a container's children")]:
            with pytest.raises(InvalidRequest, match=message):
                session.list(path)
        with pytest.raises(InvalidRequest, match="get names one place"):
            session.get("jobs.*")
        with pytest.raises(NotFound):
            session.list("nothing.*")

    def test_read_budget(self, open_store):
        """A read that would assemble more records than storage.readBudget fails naming the budget."""
        store = open_store(read_budget=10)
        session = store.session()
        session.patch([{"set": f"jobs.j{i}", "value": JOB} for i in range(9)])
        assert len(session.list("jobs.*").items) == 9  # 9 jobs + the container: 10 records
        session.patch([{"set": "jobs.j9", "value": JOB}])
        with pytest.raises(ReadBudgetExceeded, match=r"storage.readBudget = 10\); raise storage.readBudget") as caught:
            session.list("jobs.*")
        assert caught.value.code == "storage_error" and isinstance(caught.value, StorageError)
        assert session.get("jobs.j3").value == JOB


class TestKeyedAndDense:
    def test_keyed_by_field(self, store):
        """!logd-key: elements carry their key; the path names it; a mismatch is a schema_violation."""
        session = store.session()
        session.set_schema({"events": LogdKey("id")})
        session.patch([{"set": "events", "value": [{"id": "e2", "at": 2}, {"id": "e1", "at": 1}]}])
        session.patch([{"set": "events(e3)", "value": {"at": 3}}])
        assert session.get("events(e3)").value == {"id": "e3", "at": 3}
        assert [e["id"] for e in session.list("events(*)").items] == ["e1", "e2", "e3"]
        with pytest.raises(SchemaViolation, match="key field 'id' says 'e9'"):
            session.patch([{"set": "events(e4)", "value": {"id": "e9"}}])
        with pytest.raises(SchemaViolation, match="lacks its key field 'id'"):
            session.patch([{"append": "events", "value": {"at": 4}}])
        with pytest.raises(SchemaViolation, match="two elements with key 'x'"):
            session.patch([{"set": "events", "value": [{"id": "x"}, {"id": "x"}]}])
        with pytest.raises(PreconditionFailed, match=r"events\(e1\) already exists"):
            session.patch([{"append": "events", "value": {"id": "e1"}}])
        with pytest.raises(InvalidRequest, match=r"name its elements events\(key\)"):
            session.get("events.e1")

    def test_auto_id(self, store):
        """!logd-auto-id: the store generates a key that sorts by arrival, and records the op as applied."""
        session = store.session()
        session.set_schema({"runs": AutoId("id")})
        session.patch([{"append": "runs", "value": {"n": 1}}])
        session.patch([{"append": "runs", "value": {"n": 2}}, {"append": "runs", "value": {"n": 3}},
                       {"append": "runs", "value": {"id": "mine", "n": 4}}])
        runs = session.list("runs(*)").items
        assert [r["n"] for r in runs] == [1, 2, 3, 4]
        assert runs[1]["id"] == "0000000003-0001" and runs[3]["id"] == "mine"
        assert commits(store)[2].ops[0] == {"set": "runs(0000000003-0001)", "value": {"id": "0000000003-0001", "n": 2}}

    def test_dense(self, store):
        """An array no rule keys is dense: positions, append at the end, delete shifts."""
        session = store.session()
        session.patch([{"set": "list", "value": ["a", {"b": 1}, "c"]}])
        session.patch([{"append": "list", "value": "d"}, {"delete": "list[0]"}, {"set": "list[0].b", "value": 2}])
        assert session.get("list").value == [{"b": 2}, "c", "d"]
        assert session.get("list[2]").value == "d"
        with pytest.raises(NotFound, match="no position 7"):
            session.patch([{"set": "list[7]", "value": 1}])
        with pytest.raises(NotFound, match="no position 3"):
            session.get("list[3]")

    def test_keyed_inside_records(self, store):
        """A keyed array nested in a map value is stored as records too, its elements keyed."""
        session = store.session()
        session.set_schema({"jobs.*.steps": LogdKey("name")})
        session.patch([{"set": "jobs.j1", "value": {"steps": [{"name": "build"}, {"name": "test", "ok": True}]}}])
        assert session.get("jobs.j1.steps(test).ok").value is True
        session.patch([{"delete": "jobs.j1.steps(build)"}])
        assert session.get("jobs.j1").value == {"steps": [{"name": "test", "ok": True}]}


class TestSchemaOnWrites:
    def test_delete_breaking_required_fails_visibly(self, store):
        """A delete that would leave a job without a required child is a schema_violation; nothing written."""
        session = store.session()
        session.set_schema({"jobs.*": {"required": ["status", "updatedAt"]}, "jobs": {"minItems": 1}})
        session.patch([{"set": "jobs.j1", "value": JOB}, {"set": "jobs.j2", "value": JOB}])
        with pytest.raises(SchemaViolation, match="jobs.j1: required child 'status' is missing"):
            session.patch([{"delete": "jobs.j1.status"}])
        session.patch([{"delete": "jobs.j1"}])
        with pytest.raises(SchemaViolation, match=r"jobs: 0 items, fewer than 1 \(schema rule jobs: minItems 1\)"):
            session.patch([{"delete": "jobs.j2"}])
        assert session.list("jobs.*").items == {"j2": JOB} and store.head == 3

    def test_checked_on_the_result_of_the_whole_patch(self, store):
        """Constraints hold of the state a patch leaves, not of each op on the way."""
        session = store.session()
        session.set_schema({"jobs.*": {"required": ["status", "updatedAt"]}})
        session.patch([{"set": "jobs.j1.status", "value": "x"}, {"set": "jobs.j1.updatedAt", "value": "t"}])
        with pytest.raises(SchemaViolation, match="required child 'updatedAt'"):
            session.patch([{"set": "jobs.j2.status", "value": "x"}])

    def test_raw(self, store):
        """!raw: carried whole, any keys inside; no paths into it."""
        session = store.session()
        session.set_schema({"blobs.*.doc": Raw()})
        doc = {"weird key!": [1, {"x y": None}], "n": 1}
        session.patch([{"set": "blobs.b1.doc", "value": doc}])
        assert session.get("blobs.b1.doc").value == doc
        with pytest.raises(SchemaViolation, match="goes inside the !raw subtree blobs.b1.doc"):
            session.patch([{"set": "blobs.b1.doc.n", "value": 2}])
        with pytest.raises(SchemaViolation, match="inside the !raw subtree"):
            session.patch([{"delete": "blobs.b1.doc.n"}])

    def test_keyed_value_must_be_a_list(self, store):
        """A keyed array set to something else is refused."""
        session = store.session()
        session.set_schema({"events": LogdKey("id")})
        with pytest.raises(SchemaViolation, match=r"events is a keyed array \(!logd-key id\)"):
            session.patch([{"set": "events", "value": {"e1": {}}}])


class TestDeltas:
    def test_watch_backlog_carries_author_and_filters_prefix(self, store):
        """Deltas from a commit on, in order, only the ops touching the prefix, each with its author."""
        alice, bob = store.session(author="alice"), store.session(author="bob")
        alice.patch([{"set": "jobs.j1", "value": JOB}, {"set": "other", "value": 1}])
        bob.patch([{"set": "other", "value": 2}])
        bob.patch([{"delete": "jobs"}])
        alice.patch([{"set": "jobs.j1.status", "value": "done"}], author="verse/retention")
        deltas = list(alice.deltas("jobs.j1", first=1))
        assert [(d.commit, d.author) for d in deltas] == [(1, "alice"), (3, "bob"), (4, "verse/retention")]
        assert deltas[0].ops == ({"set": "jobs.j1", "value": JOB},)
        assert deltas[1].ops == ({"delete": "jobs"},)
        assert [d.commit for d in alice.deltas("jobs", first=4)] == [4]
        assert list(alice.deltas("jobs")) == []


class TestListeners:
    def test_called_after_each_commit(self, store):
        """Listeners see every commit record; one that fails does not turn a durable commit into an error."""
        seen = []
        store.listen(lambda record: seen.append((record.number, record.author)))
        store.listen(lambda record: 1 / 0)
        assert store.session(author="a").patch([{"set": "x", "value": 1}]).commit == 1
        assert seen == [(1, "a")] and store.head == 1


@given(place=logd_paths(), prefix=logd_paths())
def test_delta_for_compares_places(place, prefix):
    """A watcher of ``prefix`` sees an op exactly when its place is at, above or below the prefix: the text
    comparison delta_for makes is the segment comparison of the parsed paths."""
    assume(not place.is_wild)
    record = CommitRecord(1, 0.0, "a", 0, ({"delete": str(place)},))
    assert (delta_for(record, prefix) is not None) == (place.startswith(prefix) or prefix.startswith(place))
