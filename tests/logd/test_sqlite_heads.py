"""A SQLite store's heads index selects what the record versions select, and stays so under every write.

:mod:`retain.logd.sqlite_heads` keeps, per (container, test) a pass has run, each record's stamp instant and match
as worked out when the record was written. These tests build it over random containers (odd stamps, nested maps,
keyed arrays, maps kept as leaves, records beneath items), write after it was built, and demand the selection the
versions give -- the same items, marks, unreadable count, records counted against a limit -- and a clean full check;
then that a pass builds it once, in short steps, and uses it; and that the check names a row that went wrong.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from retain.errors import InvalidSettings
from retain.logd import Store, sqlite_heads, sqlite_pages
from retain.logd import sqlite as sqlite_module
from retain.logd.retain import run_retain
from retain.logd.retain_rules import cutoff, parse_retain
from retain.logd.settings import Settings
from retain.logd.storage import ItemTest, Selected
from tests.logd.test_sqlite_items import BIG, NOW, RACES, STAMPS, in_ranges, race, select_both
from tests.strategies import odd_stamps, retain_scenes

JOBS = "\x1fjobs"


@pytest.fixture
def store(tmp_path) -> Iterator[Store]:
    """A store on a SQLite file: the index is SQLite's (PostgreSQL keeps none)."""
    with Store.open(str(tmp_path / "s.sqlite3"), settings=Settings(synchronous="off")) as opened:
        yield opened


def build_heads(store: Store, container: str, test: ItemTest) -> int:
    """Build the index of ``test`` over ``container`` as a pass does, step by step; the steps taken."""
    steps = 1
    while store._keep_heads(container, test):
        steps += 1
    return steps


def select_from_versions(store: Store, monkeypatch, *args) -> Selected | None:
    """The selection as the record versions give it, the index left aside."""
    with monkeypatch.context() as patched:
        patched.setattr(sqlite_heads, "find", lambda *_: None)
        with store.backend.reading() as reader:
            return reader.select_items(*args)


def select_now(store: Store, *args) -> Selected | None:
    with store.backend.reading() as reader:
        return reader.select_items(*args)


def same_answer(got: Selected | None, expected: Selected | None) -> None:
    assert got is not None and expected is not None
    assert (got.selection, got.records, got.beneath) == (expected.selection, expected.records, expected.beneath)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(scene=retain_scenes(NOW), races=st.lists(RACES, max_size=8), limit=st.sampled_from([3, 7, BIG]),
       data=st.data())
def test_the_index_selects_what_the_versions_select(tmp_path_factory, monkeypatch, scene, races, limit, data):
    """Built over a scene's container, then written under (stamps, statuses, deletes, records beneath the items),
    the index gives the selection the versions give, at every limit, and the full check finds nothing wrong."""
    with Store.open(str(tmp_path_factory.mktemp("heads") / "h.sqlite3"), settings=Settings(synchronous="off")) as store:
        both = select_both(store, scene)
        if both is None or both.selected is None or both.session.scope_id != 0:
            return
        rule = both.rule
        if not sqlite_heads.indexable(rule.test):
            assert both.selected.indexed  # nothing to build: the pass builds nothing
            return
        assert not both.selected.indexed
        with monkeypatch.context() as patched:
            patched.setattr(sqlite_heads, "CHUNK", data.draw(st.integers(1, 4), label="chunk"))
            build_heads(store, both.key, rule.test)
        names = [name for name, _ in both.expected.expired] or [name for name in scene["values"]]
        for name, kind in zip(names, races, strict=False):
            race(both.session, str(rule.item(name)), {"status": "done", "updatedAt": "2026-09-10T08:00:00Z"}, kind,
                 data.draw(odd_stamps(NOW), label="stamp"))
        args = (0, both.key, store.head, rule.test, cutoff(NOW, rule.after), limit)
        with monkeypatch.context() as patched:
            patched.setattr(sqlite_pages, "PAGE", data.draw(st.sampled_from([1, 2, 5, 32768]), label="page"))
            got = select_now(store, *args)
        assert got is not None and got.indexed
        same_answer(got, select_from_versions(store, monkeypatch, *args))
        assert store.backend.check(full=True) == []
        event(f"compared, {len(got.selection.expired)} expired, {got.selection.unreadable} unreadable")


@pytest.mark.parametrize("stamp", STAMPS)
def test_odd_stamps_in_the_index(store, monkeypatch, stamp):
    """Each edge of RFC 3339, written after the index was built, is read as the versions read it."""
    test = ItemTest(("updatedAt",))
    store.session().patch([{"set": "jobs", "value": {"a": {"updatedAt": "2026-09-11T08:00:00Z"}}}])
    build_heads(store, JOBS, test)
    store.session().patch([{"set": "jobs.j", "value": {"updatedAt": stamp}}])
    for when in (NOW.replace(day=11), NOW, None):
        args = (0, JOBS, store.head, test, when, BIG)
        got = select_now(store, *args)
        assert got is not None and got.indexed
        same_answer(got, select_from_versions(store, monkeypatch, *args))


REQUEST = {"now": "2026-09-12T08:00:00Z", "batch": 4, "what": [
    {"path": "jobs.*", "match": {"status": "done"}, "age": ".updatedAt", "after": "1d"}]}


def jobs(count: int, stamp: str = "2026-09-10T08:00:00Z") -> dict:
    return {f"j{i:03}": {"status": "done" if i % 2 else "running", "updatedAt": stamp} for i in range(count)}


class TestThePass:
    def test_a_pass_builds_the_index_in_steps_and_the_next_one_selects_from_it(self, store, monkeypatch):
        monkeypatch.setattr(sqlite_heads, "CHUNK", 7)
        session = store.session(author="writer")
        session.patch([{"set": "jobs", "value": jobs(40)}])
        built: list[bool] = []
        keep = store._keep_heads
        monkeypatch.setattr(store, "_keep_heads", lambda *args: built.append(keep(*args)) or built[-1])
        first = run_retain(session, REQUEST)
        assert first.rules[0].deleted == 20
        # One step registers it, then a chunk of 7 keys a step over the 40 (the 20 deleted ones' tombstones too),
        # then one that finds no more.
        assert built == [True] * 7 + [False]
        session.patch([{"set": "jobs", "value": jobs(40, "2026-09-01T00:00:00Z")}])

        def from_versions(*_):
            raise AssertionError("selected from the versions, not from the index")
        monkeypatch.setattr(sqlite_module, "_selecting", from_versions)
        built.clear()
        second = run_retain(session, REQUEST)
        assert second.rules[0].deleted == 20
        assert built == []  # built already: the pass takes no step for it
        assert store.backend.check(full=True) == []

    def test_a_scoped_pass_builds_nothing(self, store):
        store.session().patch([{"set": "jobs", "value": jobs(10)}])
        scoped = store.session(author="writer", scope="trial")
        assert run_retain(scoped, REQUEST).rules[0].deleted == 5
        assert store.backend._db.execute("SELECT count(*) FROM retain_indexes").fetchone() == (0,)

    def test_past_the_most_indexes_a_test_is_selected_from_the_versions(self, store, monkeypatch):
        monkeypatch.setattr(sqlite_heads, "MOST", 1)
        session = store.session(author="writer")
        session.patch([{"set": "jobs", "value": jobs(10)}])
        run_retain(session, REQUEST)
        other = {**REQUEST, "what": [{**REQUEST["what"][0], "match": {"status": "running"}}]}
        assert run_retain(session, other).rules[0].deleted == 5
        assert store.backend._db.execute("SELECT count(*) FROM retain_indexes").fetchone() == (1,)

    def test_compaction_leaves_the_index_as_the_versions_say(self, store, monkeypatch):
        session = store.session(author="writer")
        session.patch([{"set": "jobs", "value": jobs(30)}])
        run_retain(session, REQUEST)
        for round_ in range(3):
            session.patch([{"set": f"jobs.j{i:03}.status", "value": f"r{round_}"} for i in range(0, 30, 3)])
        store.compact(datetime(2100, 1, 1, tzinfo=UTC))
        assert store.backend.check(full=True) == []
        args = (0, JOBS, store.head, parse_retain(REQUEST).rules[0].test, NOW, BIG)
        same_answer(select_now(store, *args), select_from_versions(store, monkeypatch, *args))

    def test_another_process_writing_the_file_keeps_the_index(self, tmp_path, monkeypatch):
        """The trigger is in the file: a writer that is not this store's (another process, another retain)
        keeps the index as well."""
        path = str(tmp_path / "s.sqlite3")
        with Store.open(path, settings=Settings(synchronous="off")) as store:
            session = store.session(author="writer")
            session.patch([{"set": "jobs", "value": jobs(10)}])
            run_retain(session, REQUEST)
        raw = sqlite3.connect(path, isolation_level=None)
        raw.execute("INSERT INTO nodes (scope, key, rev, kind, value) VALUES (0, ?, 99, 2, ?)",
                    (JOBS + "\x1fj000", '{"status":"done","updatedAt":"2026-09-01T00:00:00Z"}'))
        raw.close()
        with Store.open(path, settings=Settings(synchronous="off")) as store:
            row = store.backend._db.execute("SELECT rev, matched FROM retain_heads WHERE key = ?",
                                            (JOBS + "\x1fj000",)).fetchone()
            assert row == (99, 1)


def test_the_check_names_a_row_that_differs(tmp_path):
    path = str(tmp_path / "s.sqlite3")
    with Store.open(path, settings=Settings(synchronous="off")) as store:
        session = store.session(author="writer")
        session.patch([{"set": "jobs", "value": jobs(10)}])
        run_retain(session, REQUEST)
        assert store.backend.check(full=True) == []
        store.backend._db.execute("UPDATE retain_heads SET matched = 1 - matched WHERE key = ?", (JOBS + "\x1fj004",))
        store.backend._db.execute("DELETE FROM retain_heads WHERE key = ?", (JOBS + "\x1fj006",))
        problems = store.backend.check(full=True)
    assert problems == ["heads index 1 of 'jobs': the row of 'jobs.j004' differs from its record's newest version",
                        "heads index 1 of 'jobs': the row of 'jobs.j006' differs from its record's newest version"]
    assert sqlite_module.check_file(path) == problems


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(scene=retain_scenes(NOW), ranges=st.integers(2, 4), limit=st.sampled_from([3, 7, BIG]))
def test_ranges_of_the_index_change_no_answer(tmp_path_factory, monkeypatch, scene, ranges, limit):
    """Cut into key ranges, the first read here and each other by a worker process, a selection from the index is
    the one read in one range."""
    path = str(tmp_path_factory.mktemp("ranges") / "r.sqlite3")
    with Store.open(path, settings=Settings(synchronous="off")) as store:
        both = select_both(store, scene)
        if both is None or both.selected is None or both.session.scope_id != 0 or both.selected.indexed:
            return
        build_heads(store, both.key, both.rule.test)
        args = (0, both.key, store.head, both.rule.test, cutoff(NOW, both.rule.after), limit)
        whole = select_now(store, *args)
        with monkeypatch.context() as patched:
            answers = in_ranges(patched, ranges)
            cut = select_now(store, *args)
    assert cut is not None and whole is not None and cut.records == whole.records
    if whole.records < limit:  # at the limit the selection is not to be used: the ranges stopped at other records
        assert cut == whole
    assert None not in answers  # each worker answered for its range: nothing committed since the read
    if whole.records >= 2 * ranges:
        assert answers, "a container of several records is read in ranges"


def test_an_index_worker_declines_a_commit_that_is_not_the_head(store):
    """The index holds the head only: a worker whose snapshot is at another commit than the reader's says so, and
    the reader reads its range itself."""
    test = parse_retain(REQUEST).rules[0].test
    store.session().patch([{"set": "jobs", "value": jobs(20)}])
    build_heads(store, JOBS, test)
    heads = sqlite_heads.find(store.backend._db, JOBS, test)
    assert heads is not None and heads.usable
    statement, params = sqlite_heads.selecting(heads, JOBS, NOW)
    span = (JOBS + "\x1f", JOBS + "\x20")
    for at, answered in ((store.head - 1, False), (store.head, True)):
        worker = sqlite_pages.Worker.start(store.backend.path, at, statement, params, *span, BIG, index=True)
        try:
            part = worker.result(60)
        finally:
            worker.stop()
        assert (part is not None) == answered
    assert part is not None and [name for name, _ in part.expired] == [f"j{i:03}" for i in range(1, 20, 2)]


@pytest.mark.parametrize("ops", [
    [{"set": "jobs", "value": {"n1": {"status": "done", "updatedAt": "2026-09-01T00:00:00Z"}}}],
    [{"delete": "jobs"}],
    [{"delete": "jobs"}, {"set": "jobs", "value": {"j001": {"status": "done", "updatedAt": "bad"}}}],
    [{"set": "jobs.j001.sub", "value": {"status": "done", "updatedAt": "2026-09-01T00:00:00Z"}}],
    [{"delete": "jobs.j001.sub"}],
])
def test_the_container_replaced_or_deleted(store, monkeypatch, ops):
    """The container set anew, deleted, deleted and made again, a record made and taken beneath an item: the index
    says what the versions say."""
    test = parse_retain(REQUEST).rules[0].test
    session = store.session()
    session.patch([{"set": "jobs", "value": jobs(10)}, {"set": "jobs.j001.sub", "value": {"x": 1}}])
    build_heads(store, JOBS, test)
    session.patch(ops)
    args = (0, JOBS, store.head, test, NOW, BIG)
    same_answer(select_now(store, *args), select_from_versions(store, monkeypatch, *args))
    assert store.backend.check(full=True) == []


def test_with_retain_indexes_off_the_store_keeps_none_and_drops_those_it_kept(tmp_path, monkeypatch):
    """``storage.retainIndexes`` off: a pass builds nothing and selects from the versions, and opening a store that
    kept indexes drops them -- their triggers too, so that no write pays a rule's test any more."""
    path = str(tmp_path / "s.sqlite3")
    with Store.open(path, settings=Settings(synchronous="off")) as store:
        session = store.session(author="writer")
        session.patch([{"set": "jobs", "value": jobs(10)}])
        run_retain(session, REQUEST)
        assert store.backend._db.execute("SELECT count(*) FROM retain_indexes").fetchone() == (1,)
    with Store.open(path, settings=Settings(synchronous="off", retain_indexes=False)) as store:
        db = store.backend._db
        assert db.execute("SELECT count(*) FROM sqlite_master WHERE type = 'trigger'").fetchone() == (0,)
        assert db.execute("SELECT count(*) FROM retain_heads").fetchone() == (0,)
        session = store.session(author="writer")
        session.patch([{"set": "jobs", "value": jobs(10, "2026-09-01T00:00:00Z")}])
        assert run_retain(session, REQUEST).rules[0].deleted == 5
        assert db.execute("SELECT count(*) FROM retain_indexes").fetchone() == (0,)


def test_retain_indexes_must_be_a_bool():
    with pytest.raises(InvalidSettings, match="storage.retainIndexes must be true or false"):
        Settings(retain_indexes="yes")  # type: ignore[arg-type]


def test_an_index_another_retain_built_is_built_anew(store, monkeypatch):
    """An index whose SQL is not the one this retain writes for its test (another retain built it, whose test may
    read a stamp otherwise) is not used: the pass selects from the versions and builds the index anew."""
    session = store.session(author="writer")
    session.patch([{"set": "jobs", "value": jobs(10)}])
    run_retain(session, REQUEST)
    db = store.backend._db
    db.execute("UPDATE retain_indexes SET instant = 'NULL'")  # as if its stamps were all unreadable
    db.execute("UPDATE retain_heads SET instant = NULL")
    session.patch([{"set": "jobs", "value": jobs(10, "2026-09-01T00:00:00Z")}])
    assert run_retain(session, REQUEST).rules[0].deleted == 5
    test = parse_retain(REQUEST).rules[0].test
    heads = sqlite_heads.find(db, JOBS, test)
    assert heads is not None and heads.usable
    assert store.backend.check(full=True) == []


def test_the_check_names_a_missing_trigger(store):
    session = store.session(author="writer")
    session.patch([{"set": "jobs", "value": jobs(4)}])
    run_retain(session, REQUEST)
    store.backend._db.execute("DROP TRIGGER retain_heads_1_put")
    assert store.backend.check(full=True) == [
        "heads index 1 of 'jobs': its trigger retain_heads_1_put is missing: writes no longer keep it"]
