"""The retain pass on a real store: docs/logd-retain.md's example, the pass sentence by sentence, and its invariants."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from retain.errors import InvalidRetain, NotFound, ReadBudgetExceeded, SchemaViolation, StorageError
from retain.logd import RetainResult, run_retain
from retain.logd.draft import record_key
from retain.logd.paths import parse
from retain.logd.retain import tries
from retain.logd.verbs import Context, handle
from retain.wire import AutoId, LogdKey, Raw, load
from tests.helpers.seed004 import JOBS_RULE, NOW, SEED_REQUEST, SEED_RESULT, ago, request, seed_scene
from tests.strategies import retain_stamps


class TestSeedExample:
    def test_the_request_as_written(self, store):
        """The seed's request, read as docs/logd-retain.md writes it, answers exactly the answer's braced shape."""
        seed_scene(store)
        result = run_retain(store.session(), load(SEED_REQUEST)[0]["retain"])
        assert result.to_document() == SEED_RESULT
        jobs = store.session().list("jobs.*").items
        assert set(jobs) == {"epoch", "dateonly", "future"} | {f"r{i:02d}" for i in range(20)} | \
            {f"y{i:02d}" for i in range(20)}
        assert [event["id"] for event in store.session().list("events(*)").items] == [f"n{i:03d}" for i in range(30)]

    def test_through_the_verb_table(self, store):
        """The retain verb answers {result: {retain: ...}} in the braced shape; the commits carry its author."""
        seed_scene(store)
        answer = handle(Context(store, store.session(author="someone")), load(SEED_REQUEST)[0])
        assert answer == {"result": {"retain": SEED_RESULT}}
        log = list(store.backend.commits(4, (0,)))
        assert [record.author for record in log] == ["verse/retention"] * 3
        assert [len(record.ops) for record in log] == [256, 44, 12]

    def test_result_round_trips(self, store):
        """A client reads the answer back into the same result (less what stays off the wire)."""
        seed_scene(store)
        document = run_retain(store.session(), load(SEED_REQUEST)[0]["retain"]).to_document()
        assert RetainResult.from_document(document).to_document() == document
        assert RetainResult.from_document(document).summary() == (
            "retain at 2026-09-12T08:00:00Z: deleted 312 (jobs.*: 300, 2 unreadable; events(*): 12), commit 6")


class TestResultShape:
    def test_zero_counts(self, store):
        """deleted is always there, even 0; unreadable and skipped only when not zero; rules in the order sent."""
        seed_scene(store)
        result = run_retain(store.session(), request({"path": "events(*)", "age": ".at", "after": "100y"},
                                                     {"path": "nothing.*", "age": ".at", "after": "1d"}, JOBS_RULE))
        assert result.to_document()["rules"] == [{"path": "events(*)", "deleted": 0},
                                                 {"path": "nothing.*", "deleted": 0},
                                                 {"path": "jobs.*", "deleted": 300, "unreadable": 2}]

    def test_nothing_deleted_answers_the_read_commit(self, store):
        """With nothing to delete, commit is the commit the pass read at: the head."""
        seed_scene(store)
        result = run_retain(store.session(), request({"path": "jobs.*", "age": ".updatedAt", "after": "100y"}))
        assert (result.commit, result.deleted, store.head) == (3, 0, 3)

    def test_now_from_the_server_clock(self, store, clock):
        """Without now the store's clock decides, and the answer carries the now it used."""
        seed_scene(store)
        clock.advance(timedelta(days=100))
        result = run_retain(store.session(), {"what": [{"path": "events(*)", "age": ".at", "after": "1y"}]})
        assert result.now == clock.now and result.to_document()["now"] == "2026-12-21T08:00:00Z"
        assert result.deleted == 12 + 3  # 100 days on, the events 270-290 days old are a year old too


class TestThePass:
    def test_items_deleted_whole(self, store):
        """An item goes whole, with every record beneath it; a field of a kept item is never touched."""
        ops = store.session()
        ops.patch([{"set": "jobs", "value": {
            "j1": {"status": "done", "updatedAt": ago(days=3), "steps": {"s1": {"ok": True}, "s2": {"ok": False}}},
            "j2": {"status": "running", "updatedAt": ago(days=3), "steps": {"s1": {"ok": True}}}}}])
        run_retain(ops, request(JOBS_RULE))
        assert ops.get("jobs").value == {"j2": {"status": "running", "updatedAt": ago(days=3),
                                                "steps": {"s1": {"ok": True}}}}
        assert list(store.backend.commits(2, (0,)))[0].ops == ({"delete": "jobs.j1"},)

    def test_batches(self, store):
        """Deletes go in commits of at most batch items, in container order."""
        ops = store.session()
        ops.patch([{"set": "jobs", "value": {f"j{i:02d}": {"updatedAt": ago(days=2)} for i in range(23)}}])
        result = run_retain(ops, request({"path": "jobs.*", "age": ".updatedAt", "after": "1d"}, batch=5))
        log = list(store.backend.commits(2, (0,)))
        assert [len(record.ops) for record in log] == [5, 5, 5, 5, 3]
        assert [op["delete"] for record in log for op in record.ops] == [f"jobs.j{i:02d}" for i in range(23)]
        assert result.rules[0].commits == (2, 3, 4, 5, 6) and result.commit == 6

    def test_keyed_arrays_by_key(self, store):
        """events(*) ages a keyed array's elements and deletes them by key (generated keys too)."""
        ops = store.session()
        ops.set_schema({"runs": AutoId("id")})
        ops.patch([{"append": "runs", "value": {"at": ago(days=days)}} for days in (400, 380, 10)])
        result = run_retain(ops, request({"path": "runs(*)", "age": ".at", "after": "1y"}))
        assert result.deleted == 2
        assert list(store.backend.commits(3, (0,)))[0].ops == ({"delete": "runs(0000000002-0001)"},
                                                               {"delete": "runs(0000000002-0002)"})

    def test_author(self, store):
        """The deletes carry the request's author, else the session's."""
        ops = store.session(author="verse/ops")
        ops.patch([{"set": "jobs", "value": {"a": {"updatedAt": ago(days=2)}, "b": {"updatedAt": ago(days=3)}}}])
        run_retain(ops, request({"path": "jobs.*", "age": ".updatedAt", "after": "60h"}))
        run_retain(ops, request({"path": "jobs.*", "age": ".updatedAt", "after": "47h"}, author="verse/retention"))
        assert [(record.author, record.ops) for record in store.backend.commits(2, (0,))] == [
            ("verse/ops", ({"delete": "jobs.b"},)), ("verse/retention", ({"delete": "jobs.a"},))]

    def test_rules_in_order(self, store):
        """Rules run in the order sent: a later rule reads what an earlier one left."""
        ops = store.session()
        ops.patch([{"set": "jobs", "value": {"a": {"updatedAt": ago(days=2), "status": "done"}}}])
        result = run_retain(ops, request({"path": "jobs.*", "age": ".updatedAt", "after": "1d"}, JOBS_RULE))
        assert [rule.deleted for rule in result.rules] == [1, 0]
        assert result.rules[1].read_at == 2

    def test_read_budget(self, open_store):
        """A container larger than storage.readBudget is a storage_error naming the budget; nothing is deleted."""
        store = open_store(read_budget=10)
        ops = store.session()
        ops.patch([{"set": "jobs", "value": {f"j{i}": {"updatedAt": ago(days=2)} for i in range(20)}}])
        with pytest.raises(ReadBudgetExceeded) as refused:
            run_retain(ops, request({"path": "jobs.*", "age": ".updatedAt", "after": "1d"}))
        assert refused.value.code == "storage_error"
        assert "storage.readBudget = 10); raise storage.readBudget or split the collection" in str(refused.value)
        assert store.head == 1

    def test_raw_is_never_looked_inside(self, store):
        """Items whose timestamp lies inside !raw are kept as unreadable; a container inside !raw is refused."""
        ops = store.session()
        ops.set_schema({"blobs.*": Raw(), "jobs.*.meta": Raw()})
        ops.patch([{"set": "blobs", "value": {"b1": {"at": ago(days=9)}}},
                   {"set": "jobs", "value": {"j1": {"meta": {"at": ago(days=9)}, "at": ago(days=9)}}}])
        result = run_retain(ops, request({"path": "blobs.*", "age": ".at", "after": "1d"},
                                         {"path": "jobs.*", "age": ".meta.at", "after": "1d"},
                                         {"path": "jobs.*", "age": ".at", "after": "1d", "match": {"meta": {}}}))
        assert [rule.to_document() for rule in result.rules] == [
            {"path": "blobs.*", "deleted": 0, "unreadable": 1}, {"path": "jobs.*", "deleted": 0, "unreadable": 1},
            {"path": "jobs.*", "deleted": 0, "unreadable": 1}]
        with pytest.raises(InvalidRetain, match="inside the !raw subtree blobs.b1; retain never looks inside"):
            run_retain(ops, request({"path": "blobs.b1.*", "age": ".at", "after": "1d"}))


class TestStoreRefusals:
    @pytest.mark.parametrize(("path", "message"), [
        ("runs.*", "runs.*: runs is a keyed array; write the rule over its elements as runs(*)"),
        ("list(*)", "list(*): the schema gives list no identity: it is a dense array"),
        ("list.*", "list.*: the schema gives list no identity"),
        ("jobs(*)", "jobs(*): jobs is a map; write the rule over its children as jobs.*"),
        ("jobs.j1.status.*", "jobs.j1.status.*: list.*"),
    ])
    def test_rule_and_schema_disagree(self, store, path, message):
        """A rule that disagrees with the store it meets is invalid_retain when it runs, naming the right form."""
        ops = store.session()
        ops.set_schema({"runs": LogdKey("id")})
        ops.patch([{"set": "runs", "value": [{"id": "r1", "at": ago(days=9)}]},
                   {"set": "list", "value": [{"at": ago(days=9)}]},
                   {"set": "jobs", "value": {"j1": {"status": "done", "at": ago(days=9)}}}])
        with pytest.raises(InvalidRetain) as refused:
            run_retain(ops, request({"path": path, "age": ".at", "after": "1d"}))
        assert message.replace(": list.*", "") in str(refused.value) and refused.value.code == "invalid_retain"
        assert store.head == 2

    def test_refused_before_any_rule_runs(self, store):
        """A bad rule anywhere in the request refuses it whole: the good rules before it delete nothing."""
        seed_scene(store)
        with pytest.raises(InvalidRetain, match=r"retain what\[1\]"):
            run_retain(store.session(), request(JOBS_RULE, {"path": "list[*]", "age": ".at", "after": "1d"}))
        assert store.head == 3

    def test_an_error_says_what_ran_before_it(self, store):
        """A delete the schema forbids fails visibly; the error says which earlier rules already committed."""
        seed_scene(store)
        ops = store.session()
        ops.set_schema({"events": LogdKey("id"), "jobs": {"minItems": 100}})  # commit 4
        with pytest.raises(SchemaViolation) as refused:
            run_retain(ops, request({"path": "events(*)", "age": ".at", "after": "1y"}, JOBS_RULE, batch=200))
        message = str(refused.value)
        assert message.startswith("retain rule 2 of 2 (jobs.*) failed: jobs: 43 items, fewer than 100 "
                                  "(schema rule jobs: minItems 100)")
        assert message.endswith("The rules before it ran and their deletes are committed: events(*) deleted 12 "
                                "(commit 5); this rule's earlier batches deleted 200 (commit 6).")
        assert refused.value.code == "schema_violation" and store.head == 6
        assert len(ops.list("jobs.*").items) == 143  # 200 deleted in commit 6, the batch of 100 refused whole

    def test_first_rule_failing(self, store):
        """An error in the first rule says nothing ran before it."""
        store.session().patch([{"set": "list", "value": [1]}])
        with pytest.raises(InvalidRetain, match="No rule ran before it."):
            run_retain(store.session(), request({"path": "list(*)", "age": ".at", "after": "1d"}))


class TestHistory:
    def test_older_commits_still_show_the_records(self, store):
        """INV-HISTORY: a read at the commit before the retain still shows every record it deleted."""
        seed_scene(store)
        before = store.session().list("jobs.*").items
        run_retain(store.session(), load(SEED_REQUEST)[0]["retain"])
        assert store.session().list("jobs.*", at=3).items == before
        assert len(store.session().list("events(*)", at=3).items) == 42
        assert len(store.session().list("jobs.*").items) == len(before) - 300

    def test_watchers_see_deltas_with_the_author(self, store):
        """Watchers see the deletes as deltas carrying the request's author."""
        seed_scene(store)
        run_retain(store.session(author="ops"), load(SEED_REQUEST)[0]["retain"])
        deltas = list(store.session().deltas("events", first=4))
        assert [(delta.commit, delta.author) for delta in deltas] == [(6, "verse/retention")]
        assert deltas[0].ops[0] == {"delete": "events(e000)"}

    def test_compaction_keeps_them_until_the_horizon(self, open_store, clock):
        """The deletes free no history by themselves: past the horizon the old versions are gone."""
        store = open_store(cutoff=timedelta(hours=1), horizon=timedelta(days=2))
        seed_scene(store)  # commits 1-3 in the 08:00 era
        clock.advance(timedelta(hours=1))
        run_retain(store.session(), load(SEED_REQUEST)[0]["retain"])  # commits 4-6 in the 09:00 era
        clock.advance(timedelta(hours=2))
        store.session().patch([{"set": "tick", "value": 1}])
        store.compact()
        assert len(store.session().list("jobs.*", at=3).items) == 343  # a kept snapshot still holds them
        clock.advance(timedelta(days=3))
        store.session().patch([{"set": "tick", "value": 2}])
        store.compact()
        with pytest.raises(Exception, match="compacted"):
            store.session().list("jobs.*", at=3)


class TestScopes:
    def test_the_scope_loses_the_records_the_baseline_keeps_them(self, store):
        """In a scoped session the pass reads the scope's view and deletes in the scope only."""
        seed_scene(store)
        trial = store.session(scope="trial-1")
        trial.patch([{"set": "jobs.j000.status", "value": "running"}])  # the scope's own change: kept there
        result = run_retain(trial, load(SEED_REQUEST)[0]["retain"])
        assert result.to_document()["rules"] == [{"path": "jobs.*", "deleted": 299, "unreadable": 2},
                                                 {"path": "events(*)", "deleted": 12}]
        assert len(trial.list("jobs.*").items) == 343 - 299 and "j000" in trial.list("jobs.*").items
        baseline = store.session()
        assert len(baseline.list("jobs.*").items) == 343 and len(baseline.list("events(*)").items) == 42
        assert all(record.scope != 0 for record in store.backend.commits(4, (0, trial.scope_id)))


class TestPrecondition:
    """INV-PRECONDITION: a writer touching an item between the read and its batch makes that batch fail, and nothing
    of it is written; its items are read again, and those the rule still takes are tried again under a guard on
    that read (INV-PROGRESS). The racing write survives."""

    def scene(self, store):
        ops = store.session()
        ops.patch([{"set": "jobs", "value": {f"j{i}": {"status": "done", "updatedAt": ago(days=2)}
                                             for i in range(6)}}])
        return ops

    @pytest.mark.parametrize(("racing", "survivor"), [
        ({"set": "jobs.j1.updatedAt", "value": "2026-09-12T07:59:00Z"},
         {"status": "done", "updatedAt": "2026-09-12T07:59:00Z"}),
        ({"set": "jobs.j1.status", "value": "running"}, {"status": "running", "updatedAt": ago(days=2)}),
        ({"delete": "jobs.j1"}, None),
    ])
    def test_a_racing_write_fails_its_batch_once(self, store, racing, survivor):
        """A writer between the read and the batch (a refreshed stamp, a status no longer matching, a delete):
        that batch writes nothing; read again, the written item is no longer taken and stays, the other is
        tried again and goes; the other batches go on."""
        ops = self.scene(store)
        writer = store.session(author="racer")
        raced: list[int] = []

        def race(index, paths):
            if [str(path) for path in paths] == ["jobs.j0", "jobs.j1"]:
                raced.append(writer.patch([racing]).commit)

        result = run_retain(ops, {**request(JOBS_RULE, batch=2)}, before_batch=race)
        assert result.rules[0].to_document() == {"path": "jobs.*", "deleted": 5, "retried": 1}
        assert len(raced) == 1
        jobs = ops.list("jobs.*").items
        assert jobs == ({} if survivor is None else {"j1": survivor})

    def test_an_item_written_before_every_try_is_skipped(self, store):
        """A writer that gives an item a new stamp, still old enough, before every delete that holds it: each read
        again takes it, each guard on that read fails; past its tries it counts as skipped and stays, its batch
        mate goes."""
        ops = self.scene(store)
        writer = store.session(author="racer")
        stamps = iter(f"2026-09-01T00:00:{second:02d}Z" for second in range(60))

        def race(index, paths):
            if "jobs.j1" in [str(path) for path in paths]:
                writer.patch([{"set": "jobs.j1.updatedAt", "value": next(stamps)}])

        result = run_retain(ops, {**request(JOBS_RULE, batch=2)}, before_batch=race)
        assert result.rules[0].to_document() == {"path": "jobs.*", "deleted": 5, "skipped": 1, "retried": 2}
        assert list(ops.list("jobs.*").items) == ["j1"]
        assert 60 - len(list(stamps)) == tries(2)  # one write per try: tries(2) tries for j1

    def test_a_sparse_batch_is_guarded_item_by_item(self, store):
        """Two expired items with a hundred kept ones between them, one batch: its span is too long to read whole,
        so each guard is looked up -- a racing write to one still fails the batch, and the other goes."""
        ops = store.session()
        ops.patch([{"set": "jobs", "value": {f"j{i:03d}": {"status": "done" if i in (0, 99) else "running",
                                                          "updatedAt": ago(days=2)} for i in range(100)}}])
        writer = store.session(author="racer")
        raced: list[int] = []

        def race(index, paths):
            if len(paths) == 2:
                raced.append(writer.patch([{"set": "jobs.j099.updatedAt", "value": "2026-09-12T07:59:00Z"}]).commit)

        result = run_retain(ops, request(JOBS_RULE, batch=2), before_batch=race)
        assert result.rules[0].to_document() == {"path": "jobs.*", "deleted": 1, "retried": 1} and len(raced) == 1
        assert "j000" not in ops.list("jobs.*").items and "j099" in ops.list("jobs.*").items

    def test_an_unrelated_write_does_not(self, store):
        """A write to an item outside the batch leaves the batch's precondition holding."""
        ops = self.scene(store)
        writer = store.session()
        result = run_retain(ops, request(JOBS_RULE, batch=2),
                            before_batch=lambda index, paths: writer.patch([{"set": "other", "value": index}]))
        assert result.deleted == 6 and result.rules[0].skipped == 0

    def test_a_record_written_beneath_an_item_goes_with_it(self, store):
        """A writer that adds a record beneath an item after the read (its stamp and match untouched): the
        batch holds, and the item goes whole, the new record with it -- nothing is left under a deleted item."""
        ops = self.scene(store)
        writer = store.session()

        def race(index, paths):
            if str(paths[0]) == "jobs.j0":
                writer.patch([{"set": "jobs.j1.steps", "value": {"s1": {"ok": True}}}])

        assert run_retain(ops, request(JOBS_RULE, batch=2), before_batch=race).deleted == 6
        assert ops.list("jobs.*").items == {}
        # every record the item had, the one written after the read among them, is a tombstone at the head
        left = [row.key for row in store.backend.scan(0, record_key(parse("jobs.j1")), store.head) if row.kind != 0]
        assert left == []

    def test_records_beneath_items_at_the_read_go_with_them(self, store):
        """Items holding maps of their own when the pass reads, and no writer between its batches: every record
        beneath a deleted item is a tombstone at the head, a sibling's kept one untouched."""
        ops = store.session()
        ops.patch([{"set": "jobs", "value": {
            f"j{i}": {"status": "done" if i < 5 else "running", "updatedAt": ago(days=2),
                      "steps": {"s1": {"ok": True}, "s2": {"ok": i % 2 == 0}}} for i in range(6)}}])
        assert run_retain(ops, request(JOBS_RULE, batch=2)).deleted == 5
        for name in ("j0", "j3", "j4"):
            left = [row.key for row in store.backend.scan(0, record_key(parse(f"jobs.{name}")), store.head)
                    if row.kind != 0]
            assert left == [], name
        assert ops.get("jobs.j5.steps.s2").value == {"ok": False}

    def test_a_record_written_beneath_an_item_between_batches_goes_with_it(self, store):
        """A writer between two batches of a container that held nothing beneath its items when the pass read,
        adding a record beneath an item of a later batch: every batch from then on looks beneath its items
        again, and the record goes with its item."""
        ops = self.scene(store)
        writer = store.session()

        def race(index, paths):
            if str(paths[0]) == "jobs.j2":  # before the second batch (j2, j3); j5 is in the third
                writer.patch([{"set": "jobs.j5.steps", "value": {"s1": {"ok": True}}}])

        assert run_retain(ops, request(JOBS_RULE, batch=2), before_batch=race).deleted == 6
        left = [row.key for row in store.backend.scan(0, record_key(parse("jobs.j5")), store.head) if row.kind != 0]
        assert left == []

    def test_a_write_the_rule_would_expire_anyway(self, store):
        """A change that leaves the stamp and the match holding (done -> canceled) does not fail the batch:
        the precondition is the rule's own test, repeatable."""
        ops = self.scene(store)
        writer = store.session()

        def race(index, paths):
            writer.patch([{"set": "jobs.j1.status", "value": "canceled"}])

        assert run_retain(ops, request(JOBS_RULE, batch=2), before_batch=race).deleted == 6


class TestReproducible:
    """INV-REPRO: a pass given an explicit now is a function of the state and the request."""

    @settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(stamps=st.lists(retain_stamps(NOW), min_size=1, max_size=40),
           statuses=st.lists(st.sampled_from(["done", "canceled", "running"]), min_size=40, max_size=40),
           batch=st.integers(1, 7), after=st.sampled_from(["1h", "1d", "2w", "1y6w"]))
    def test_two_stores_same_commits_same_deletes(self, tmp_path_factory, stamps, statuses, batch, after):
        """Two stores with the same commits and the same request (with now) delete the same items, in the
        same commits, and answer the same result."""
        from retain.logd import Store
        from retain.logd.settings import Settings
        directory = tmp_path_factory.mktemp("repro")
        jobs = {f"j{i:02d}": {"status": status, "updatedAt": stamp} | ({} if stamp is not None else {})
                for i, (stamp, status) in enumerate(zip(stamps, statuses[:len(stamps)], strict=True))}
        sent = request({**JOBS_RULE, "after": after}, batch=batch)
        outcomes = []
        for name, clock_offset in (("a", 0), ("b", 86400 * 365)):  # the servers' clocks disagree; now decides
            with Store.open(str(directory / f"{name}.sqlite3"), settings=Settings(synchronous="off"),
                            clock=lambda offset=clock_offset: NOW + timedelta(seconds=offset)) as store:
                ops = store.session(author="x")
                for chunk in range(0, len(jobs), 10):
                    ops.patch([{"set": f"jobs.{key}", "value": value} for key, value in list(jobs.items())[chunk:
                                                                                                     chunk + 10]])
                result = run_retain(ops, sent)
                outcomes.append((result.to_document(), [record.ops for record in store.backend.commits(1, (0,))],
                                 ops.get().value))
        assert outcomes[0] == outcomes[1]


def test_nothing_there(store):
    """A rule over a container that does not exist has nothing to age: deleted 0, no commit."""
    result = run_retain(store.session(), request({"path": "jobs.*", "age": ".at", "after": "1d"}))
    assert result.to_document() == {"now": "2026-09-12T08:00:00Z", "commit": 0, "deleted": 0,
                                    "rules": [{"path": "jobs.*", "deleted": 0}]}
    with pytest.raises(NotFound):
        store.session().get("jobs")


def test_storage_errors_are_storage_errors():
    """The storage_error family is what a budget refusal belongs to (clients catch StorageError)."""
    assert issubclass(ReadBudgetExceeded, StorageError)
