"""The bulk write path writes what the draft writes: the same rows, the same delta, the same answer.

A patch of whole new records skips the draft (:mod:`retain.logd.bulk`); anything else goes the
general way. Run every patch both ways over the same store -- new keys and taken ones, keys a delete
left behind, leaves of the same name, nested maps, values the tree refuses, schemas, scopes -- and
the stores must hold the same bytes.
"""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from retain.errors import LogdError
from retain.logd import Store, bulk
from retain.logd import store as store_module
from retain.logd.settings import Settings
from retain.wire import LogdKey

NAMES = ["j0", "j1", "j2", "j10", "leaf", "gone", "status"]
leaves_ = st.one_of(st.none(), st.booleans(), st.integers(-2, 2), st.sampled_from([1.5, float("nan"), "x", "é"]),
                    st.lists(st.sampled_from([1, "a", {"k": 1}, {"a b": 1}]), max_size=2))
values = st.recursive(leaves_, lambda inner: st.dictionaries(st.sampled_from(["status", "at", "a b", "n", "sub"]),
                                                             inner, max_size=3), max_leaves=6)
records = st.dictionaries(st.sampled_from(["status", "at", "n", "sub"]), values, max_size=3)
places = st.one_of(st.sampled_from(NAMES).map(lambda name: f"jobs.{name}"), st.sampled_from(["jobs", "other"]),
                   st.sampled_from(NAMES).map(lambda name: f"jobs.{name}.sub"), st.just("missing.j0"))
patches = st.lists(st.builds(lambda place, value: {"set": place, "value": value}, places,
                             st.one_of(records, records, values)), min_size=1, max_size=6)
SCHEMAS = [None, {"jobs.*": {"required": ["status"]}}, {"jobs.*.sub": LogdKey("id")}, {"jobs": {"minItems": 1}}]


def prepare(store: Store, scoped: bool, schema):
    baseline = store.session(author="setup")
    baseline.patch([{"set": "jobs", "value": {"j0": {"status": "done"}, "gone": {"n": 1}, "leaf": 3}}])
    baseline.patch([{"delete": "jobs.gone"}])  # a key a delete left behind: not new
    if schema is not None:
        baseline.set_schema(schema)  # for what comes after (a schema is not migrated onto what is there)
    return store.session(author="writer", scope="trial") if scoped else store.session(author="writer")


def outcome(store: Store, session, patch):
    try:
        answer = session.patch(patch).commit
    except LogdError as exc:
        answer = (exc.code, str(exc))
    rows = store.backend._db.execute("SELECT scope, key, rev, kind, value FROM nodes ORDER BY scope, key, rev").fetchall()
    deltas = [(record.number, record.author, record.scope, record.ops) for record in store.backend.commits(1, (0, 1))]
    return answer, rows, deltas


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(patch=patches, scoped=st.booleans(), schema=st.sampled_from(SCHEMAS))
def test_bulk_writes_what_the_draft_writes(tmp_path_factory, monkeypatch, patch, scoped, schema):
    """Every patch answers and writes byte for byte the same with the bulk path as without it."""
    directory = tmp_path_factory.mktemp("bulk")
    results = []
    for name, plan in (("bulk", bulk.plan_bulk), ("draft", lambda *args, **kwargs: None)):
        monkeypatch.setattr(store_module, "plan_bulk", plan)
        with Store.open(str(directory / f"{name}.sqlite3"), settings=Settings(synchronous="off")) as store:
            results.append(outcome(store, prepare(store, scoped, schema), json.loads(json.dumps(patch))))
    assert results[0] == results[1]


def test_new_records_go_in_bulk(store, monkeypatch):
    """A producer's patch of new records is written without a draft; one that replaces a record is not."""
    planned = []

    def spy(*args, **kwargs):
        planned.append(bulk.plan_bulk(*args, **kwargs))
        return planned[-1]

    monkeypatch.setattr(store_module, "plan_bulk", spy)
    ops = store.session()
    ops.patch([{"set": "jobs", "value": {}}])
    ops.patch([{"set": f"jobs.j{i}", "value": {"status": "done", "n": i, "tags": [1, "a"]}} for i in range(100)])
    ops.patch([{"set": "jobs.j1", "value": {"status": "running"}}])
    assert [plan is not None for plan in planned] == [True, True, False]
    assert ops.get("jobs.j1").value == {"status": "running"} and ops.get("jobs.j99").value["n"] == 99
    assert list(store.backend.commits(2, (0,)))[0].ops[0] == {"set": "jobs.j0", "value": {"status": "done", "n": 0,
                                                                                           "tags": [1, "a"]}}
