"""The retain test on PostgreSQL gives the pure Python answer: the selection, and each batch's guard.

The same scenes as ``test_sqlite_items`` (random containers of odd stamps, nested maps, scopes, maps kept as
leaves), on one PostgreSQL database emptied between examples: where the backend selects (a flat test: the age
one name, the match scalars) it selects the items the pure select does, with the same unreadable count and the
stamps read as marks; elsewhere it answers None and the general path selects. Each guard, after writers came
in between, holds exactly when the general path's precondition does.
"""

from __future__ import annotations

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from retain.logd import Store, run_retain
from retain.logd.postgres import _flat_fields
from tests.logd.test_sqlite_items import NOW, RACES, check_guards, select_both
from tests.strategies import retain_scenes


@pytest.fixture(scope="module")
def empty_database(pg_databases):
    """``empty_database()``: the URL of a database of this module's, emptied (the schema stays)."""
    url = pg_databases.create("items")
    Store.open(url).close()

    def empty() -> str:
        with psycopg.connect(url, autocommit=True) as raw:
            raw.execute("TRUNCATE nodes, commits, scopes, snapshots, meta")
            raw.execute("UPDATE head SET number = 0, time = 0, generation = generation + 1")
        return url

    yield empty
    pg_databases.drop(url)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(scene=retain_scenes(NOW))
def test_sql_selects_what_select_selects(empty_database, scene):
    """Over the same container, in the baseline or a scope, the backend selects the items the pure select does,
    in the same order, with the same unreadable count and the same stamps; None only for a test it cannot say."""
    with Store.open(empty_database()) as store:
        both = select_both(store, scene)
        if both is None:
            return
        if both.selected is None:
            assert _flat_fields(both.rule.test) is None, f"refused the flat test {both.rule.test!r}"
            return
        assert both.selected.selection.expired == both.expected.expired
        assert both.selected.selection.unreadable == both.expected.unreadable


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(scene=retain_scenes(NOW), races=st.lists(RACES, min_size=1, max_size=8), data=st.data())
def test_guard_agrees_with_the_precondition(empty_database, scene, races, data):
    """After writers touched the selected items, each item's guard holds exactly when the precondition the
    general path asserts (the match, with the stamp read) holds of it."""
    with Store.open(empty_database()) as store:
        check_guards(store, scene, races, data)


def test_a_nul_in_a_value_goes_the_general_way(store):
    """A value holding \\u0000 (jsonb refuses it) in an item or beneath one: the pass answers as the pure
    selection does, on both backends (PostgreSQL's selection hands such a rule to the general path)."""
    old = "2026-09-10T08:00:00Z"
    store.session().patch([{"set": "jobs", "value": {"j1": {"updatedAt": old, "note": "a\x00b"},
                                                    "j2": {"updatedAt": old},
                                                    "j3": {"updatedAt": old, "timing": {"at": "\x00"}},
                                                    "j4": {"updatedAt": "\x00"}}}])
    result = run_retain(store.session(), {"now": NOW, "what": [{"path": "jobs.*", "age": ".updatedAt",
                                                               "after": "1d"}]})
    assert (result.rules[0].deleted, result.rules[0].unreadable) == (3, 1)
    assert list(store.session().list("jobs.*").items) == ["j4"]
