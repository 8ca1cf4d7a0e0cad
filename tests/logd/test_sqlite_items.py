"""The retain test in SQLite's SQL gives the pure Python answer: the selection, and each batch's guard.

:mod:`retain.logd.sqlite_items` restates :func:`retain.clock.parse_rfc3339`, the match language and
:func:`~retain.logd.retain_rules.select` in SQL; these tests run both over the same stores -- random
containers of odd stamps, nested maps, scopes, maps kept as leaves -- and demand the same items, the same
unreadable count, and the same verdict of every guard after a writer came in between.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from retain.clock import parse_rfc3339
from retain.errors import LogdError, NotFound
from retain.logd import Store, sqlite_pages
from retain.logd import sqlite as sqlite_module
from retain.logd.match import ABSENT, matches
from retain.logd.retain_rules import cutoff, item_pattern, parse_retain, select
from retain.logd.settings import Settings
from retain.logd.sqlite_items import compile_test
from retain.logd.storage import MAP, ItemTest, Selected, Selection
from retain.logd.view import iter_items, leaves, locate, read_value
from retain.wire import LogdKey, Or, Raw
from tests.strategies import odd_stamps, retain_scenes

NOW = datetime(2026, 9, 12, 8, tzinfo=UTC)
BIG = 10 ** 6


def build(store: Store, scene: dict):
    """Write the scene; the session the rule reads in (a scope's, when the scene is scoped)."""
    keyed, container = scene["keyed"], "events" if scene["keyed"] else "jobs"
    baseline = store.session(author="writer")
    schema = {"events": LogdKey("id")} if keyed else {}
    if scene["raw_dropped"]:  # nested maps written as leaves, then the rule that kept them so dropped
        baseline.set_schema({**schema, f"{container}{'(*)' if keyed else '.*'}.timing": Raw()})
    baseline.set_schema(schema)
    if keyed:
        baseline.patch([{"set": "events", "value": [{"id": name, **value} for name, value in scene["values"].items()]}])
    else:
        baseline.patch([{"set": "jobs", "value": scene["values"]}])
    session = store.session(author="writer", scope="trial") if scene["scoped"] else baseline
    place = (lambda name: f"events({name})") if keyed else (lambda name: f"jobs.{name}")
    for name, value in scene["scope_sets"].items():
        session.patch([{"set": place(name), "value": value}])
    for name in scene["scope_deletes"]:
        try:
            session.patch([{"delete": place(name)}])
        except NotFound:
            pass
    for name, value in scene["baseline_later"].items():
        baseline.patch([{"set": place(name), "value": value}])
    return session


@dataclass
class Both:
    """A rule over a scene's store, selected both ways: the pure select over the container's record items
    (the SQL's share of the container) and the backend's SQL (None: the SQL refused the rule)."""

    session: Any
    rule: Any
    key: str
    view: Any
    expected: Selection
    selected: Selected | None


def select_both(store: Store, scene: dict) -> Both | None:
    """None when there is no container record of the rule's kind."""
    session = build(store, scene)
    rule = parse_retain({"what": [scene["rule"]]}).rules[0]
    view = session.view()
    location = locate(view, rule.container)
    if location.depth < len(rule.container.segments) or location.row.kind == 0:
        return None
    own = leaves(location.row) if location.row.kind == MAP else {}
    items = list(iter_items(view, rule.path))[len(own):]  # a map's leaves come first (a scope may hold a record
    # of the same name as a leaf the baseline wrote later: both are items)
    with store.backend.reading() as reader:
        selected = reader.select_items(session.scope_id, location.key, view.at, rule.test, cutoff(NOW, rule.after),
                                       BIG)
    return Both(session, rule, location.key, view, select(items, rule, NOW), selected)


def unsupported(match) -> bool:
    """What the SQL refuses to say: a list pattern, or a number past 2**53."""
    stack = [match]
    while stack:
        item = stack.pop()
        if isinstance(item, list) or (isinstance(item, (int, float)) and not isinstance(item, bool)
                                      and abs(item) > 2 ** 53):
            return True
        stack.extend(item.alternatives if isinstance(item, Or) else item.values() if isinstance(item, dict) else ())
    return False


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(scene=retain_scenes(NOW))
def test_sql_selects_what_select_selects(tmp_path_factory, scene):
    """Over the same container, in the baseline or a scope, the SQL selects the items the pure select does,
    in the same order, with the same unreadable count (and, where the guard takes stamps, the same stamps)."""
    with Store.open(str(tmp_path_factory.mktemp("sel") / "s.sqlite3"), settings=Settings(synchronous="off")) as store:
        both = select_both(store, scene)
        if both is None:
            return
        if both.selected is None:
            assert unsupported(both.rule.match), f"the SQL refused {both.rule.match!r}"
            return
        got, expected = both.selected.selection, both.expected
        assert [name for name, _ in got.expired] == [name for name, _ in expected.expired]
        assert got.unreadable == expected.unreadable
        if not compile_test(both.rule.test, both.session.scope_id, "k", "v").flat:
            assert got.expired == expected.expired  # the marks are the stamps read


#: racing writes, by what they do to an item (``place`` is its path)
RACES = st.sampled_from(["stamp", "status", "delete", "same", "child", "timing", "none"])


def race(session, place: str, value, kind: str, stamp) -> None:
    """A writer between the read and the batch."""
    ops = {"stamp": [{"set": f"{place}.updatedAt", "value": stamp}],
           "status": [{"set": f"{place}.status", "value": "canceled"}],
           "delete": [{"delete": place}],
           "same": [{"set": place, "value": value}],  # the same content, a new version
           "child": [{"set": f"{place}.extra", "value": {"x": 1}}],
           "timing": [{"set": f"{place}.timing", "value": {"at": stamp, "kind": "a"}}],
           "none": []}[kind]
    if ops:
        try:
            session.patch(ops)
        except LogdError:
            pass


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(scene=retain_scenes(NOW), races=st.lists(RACES, min_size=1, max_size=8), data=st.data())
def test_guard_agrees_with_the_precondition(tmp_path_factory, scene, races, data):
    """After writers touched the selected items, each item's guard in SQL holds exactly when the
    precondition the general path asserts (the match, with the stamp read) holds of it."""
    with Store.open(str(tmp_path_factory.mktemp("guard") / "g.sqlite3"), settings=Settings(synchronous="off")) as store:
        check_guards(store, scene, races, data)


def check_guards(store: Store, scene, races, data) -> None:
    """Let writers touch the items the backend selected in ``scene``, then check each item's guard in SQL holds
    exactly when the general path's precondition (the match, with the stamp read) holds of it."""
    both = select_both(store, scene)
    if both is None or both.selected is None or not both.selected.selection.expired:
        return
    session, rule, key, view, selected = both.session, both.rule, both.key, both.view, both.selected
    stamps = dict(both.expected.expired)
    for (name, _), kind in zip(selected.selection.expired, races, strict=False):
        race(session, str(rule.item(name)), read_value(view, rule.item(name)), kind,
             data.draw(odd_stamps(NOW), label="stamp"))
    now_view = session.view()
    for name, mark in selected.selection.expired:
        try:
            value = read_value(now_view, rule.item(name))
        except NotFound:
            value = ABSENT
        holds = matches(item_pattern(rule, stamps[name]), value)
        with pytest.raises(_RolledBack):
            with store.backend.transaction():
                head = store.backend.head()[0]
                held = store.backend.delete_items(session.scope_id, key, [(name, mark)], rule.test, head, head + 1)
                raise _RolledBack
        assert held == holds, f"guard of {name}: SQL {held}, precondition {holds} ({value!r})"


class _RolledBack(Exception):
    """Leaves the test's transaction without writing."""


STAMPS = [
    "2026-09-11T08:00:00Z", "2026-09-11T08:00:00.000001Z", "2026-09-11T07:59:59.9999999Z", "2026-09-11t08:00:00z",
    "2026-09-11T10:00:00+02:00", "2026-09-11T08:00:00-00:00", "2026-09-11T07:00:00-01:00", "2026-09-11T09:39:00+00:99",
    "2026-02-29T00:00:00Z", "2024-02-29T00:00:00Z", "1900-02-29T00:00:00Z", "2000-02-29T00:00:00Z",
    "2026-04-31T00:00:00Z", "2026-09-11T24:00:00Z", "2026-09-11T23:59:60Z", "2026-09-11T23:60:00Z",
    "0000-01-01T00:00:00Z", "0001-01-01T00:00:00Z", "0001-01-01T00:00:00+00:01", "0001-01-01T00:00:00-00:01",
    "9999-12-31T23:59:59.999999Z", "9999-12-31T23:59:59-00:01", "2026-09-11T08:00:00+24:00", "2026-09-11T08:00:00+23:59",
    "2026-09-11T08:00:00.Z", "2026-09-11T08:00:00", "2026-09-11 08:00:00Z", "2026-09-11T08:00Z", "2026-09-11",
    "2026-09-11T08:00:00+0100", "2026-09-11T08:00:00+01:00:00", " 2026-09-11T08:00:00Z", "2026-09-11T08:00:00Z ",
    "-026-09-11T08:00:00Z", "2026-09-11TT8:00:00Z", "2026-09-11T   08:00Z", "2026-09-11T08:00   Z", "\u0662026-09-11T08:00:00Z",
    "2026-9-11T08:00:00Z", "2026-13-01T00:00:00Z", "2026-00-01T00:00:00Z", "2026-01-00T00:00:00Z",
]
#: each edge of the calendar in the common shape (decided by the short road) and in three others (the long one)
STAMPS += [date + time for date in ("2026-02-29", "2024-02-29", "1900-02-29", "2000-02-29", "2026-04-31",
                                    "2026-12-31", "2026-01-00", "2026-13-01", "0000-01-01", "0001-01-01")
           for time in ("t00:00:00Z", "T00:00:00.5Z", "T01:00:00+01:00", "T24:00:00Z", "T23:59:60.1Z")]


@pytest.mark.parametrize("stamp", STAMPS)
def test_odd_stamps(store, stamp):
    """Each edge of RFC 3339 is read as parse_rfc3339 reads it: unreadable, or expired exactly when at or
    before the cutoff (2026-09-11T08:00:00Z)."""
    store.session().patch([{"set": "jobs", "value": {"j": {"updatedAt": stamp}}}])
    instant = parse_rfc3339(stamp)
    before = NOW.replace(day=11)
    with store.backend.reading() as reader:
        selected = reader.select_items(0, "\x1fjobs", store.head, ItemTest(("updatedAt",)), before, BIG)
    assert selected is not None
    assert selected.selection.unreadable == (instant is None)
    assert bool(selected.selection.expired) == (instant is not None and instant <= before)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(scene=retain_scenes(NOW), page=st.integers(1, 4), limit=st.sampled_from([3, 7, BIG]))
def test_pages_change_no_answer(tmp_path_factory, monkeypatch, scene, page, limit):
    """Read page by page (a page of a few records), a selection is the one read at once, and the records it
    counts against a limit are the same."""
    with Store.open(str(tmp_path_factory.mktemp("pages") / "p.sqlite3"), settings=Settings(synchronous="off")) as store:
        both = select_both(store, scene)
        if both is None or both.selected is None:
            return
        args = (both.session.scope_id, both.key, both.view.at, both.rule.test, cutoff(NOW, both.rule.after), limit)
        with store.backend.reading() as reader:
            whole = reader.select_items(*args)
        monkeypatch.setattr(sqlite_pages, "PAGE", page)
        with store.backend.reading() as reader:
            paged = reader.select_items(*args)
    assert paged == whole
    assert whole.records == min(limit, both.selected.records)


def in_ranges(monkeypatch, ranges: int) -> list:
    """Selections cut containers of a few records into up to ``ranges`` key ranges, as if on that many cores;
    the list fills with what each worker answered (a part, or None: its range was read in the caller)."""
    monkeypatch.setattr(sqlite_module, "_RANGE", 1)
    monkeypatch.setattr(sqlite_module, "_cores", lambda: ranges)
    answers: list = []
    result = sqlite_pages.Worker.result

    def noted(worker, timeout):
        answers.append(result(worker, timeout))
        return answers[-1]
    monkeypatch.setattr(sqlite_pages.Worker, "result", noted)
    return answers


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(scene=retain_scenes(NOW), ranges=st.integers(2, 4), limit=st.sampled_from([3, 7, BIG]))
def test_ranges_change_no_answer(tmp_path_factory, monkeypatch, scene, ranges, limit):
    """Cut into key ranges, the first read here and each other by a worker process, a selection is the one
    read in one range, with the same records counted against a limit (at the limit, the selection is not to
    be used: the ranges stopped at other records)."""
    with Store.open(str(tmp_path_factory.mktemp("ranges") / "r.sqlite3"), settings=Settings(synchronous="off")) as store:
        both = select_both(store, scene)
        if both is None or both.selected is None:
            return
        args = (both.session.scope_id, both.key, both.view.at, both.rule.test, cutoff(NOW, both.rule.after), limit)
        with monkeypatch.context() as patched:
            answers = in_ranges(patched, ranges)
            with store.backend.reading() as reader:
                cut = reader.select_items(*args)
        with store.backend.reading() as reader:
            whole = reader.select_items(*args)
    assert cut.records == whole.records
    if whole.records < limit:
        assert cut == whole
    assert None not in answers  # every worker answered for its range
    if both.session.scope_id == 0 and whole.records >= 2 * ranges:
        assert answers, "a container of several records in the baseline is read in ranges"


@pytest.fixture
def jobs(tmp_path) -> Iterator[Store]:
    """A store of 40 jobs, half of them done two days before NOW."""
    with Store.open(str(tmp_path / "jobs.sqlite3"), settings=Settings(synchronous="off")) as store:
        store.session().patch([{"set": "jobs", "value": {
            f"j{index:02d}": {"status": "done" if index % 2 else "running", "updatedAt": "2026-09-10T08:00:00Z"}
            for index in range(40)}}])
        yield store


DONE = ItemTest(("updatedAt",), {"status": "done"})


def select_jobs(store: Store, at: int | None = None) -> Selected | None:
    with store.backend.reading() as reader:
        return reader.select_items(0, "\x1fjobs", at or reader.head()[0], DONE, NOW.replace(day=11), BIG)


class TestWorkers:
    def test_a_worker_that_fails_leaves_its_range_to_the_caller(self, jobs, monkeypatch, caplog):
        """A worker that exits with an error: its range is read in the caller, the answer whole, the failure
        logged with what the worker said."""
        whole = select_jobs(jobs)
        answers = in_ranges(monkeypatch, 2)
        monkeypatch.setattr(sqlite_pages, "_command", lambda: [sys.executable, "-c", "import sys; sys.exit('no')"])
        assert select_jobs(jobs) == whole
        assert answers == [None]
        assert "a selection worker failed (exit 1): no" in caplog.text

    def test_a_worker_that_cannot_start_leaves_its_range_to_the_caller(self, jobs, monkeypatch, caplog, tmp_path):
        """No worker process at all: the caller reads every range, and says why."""
        whole = select_jobs(jobs)
        in_ranges(monkeypatch, 3)
        monkeypatch.setattr(sqlite_pages, "_command", lambda: [str(tmp_path / "missing")])
        assert select_jobs(jobs) == whole
        assert "no selection worker" in caplog.text

    def test_a_worker_past_the_compaction_boundary_leaves_its_range_to_the_caller(self, jobs, monkeypatch):
        """The boundary moved past the commit the selection reads at: a worker, whose snapshot is younger, may
        miss versions that commit sees, so it declines and the caller reads its range on its own snapshot."""
        at = jobs.head
        whole = select_jobs(jobs, at)
        answers = in_ranges(monkeypatch, 2)
        with jobs.backend.reading() as reader:  # the caller's snapshot, taken before compaction
            jobs.session().patch([{"set": "jobs.j39.status", "value": "running"}])  # in the worker's range
            jobs.backend.move_boundary(jobs.head, [])
            jobs.backend.prune(jobs.head, None, 1000)  # j39's version the caller's commit sees is gone
            got = reader.select_items(0, "\x1fjobs", at, DONE, NOW.replace(day=11), BIG)
        assert got == whole
        assert answers == [None]

    def test_a_stuck_worker_is_ended_and_its_range_read_by_the_caller(self, jobs, monkeypatch, caplog):
        """A worker that never answers holds the selection no longer than its patience: it is ended, and the
        caller reads its range."""
        whole = select_jobs(jobs)
        answers = in_ranges(monkeypatch, 2)
        monkeypatch.setattr(sqlite_module, "_WORKER_PATIENCE", 0.2)
        monkeypatch.setattr(sqlite_pages, "_command", lambda: [sys.executable, "-c", "import time; time.sleep(600)"])
        started: list = []
        start = sqlite_pages.Worker.start
        monkeypatch.setattr(sqlite_pages.Worker, "start", lambda *args: started.append(start(*args)) or started[-1])
        assert select_jobs(jobs) == whole
        assert answers == [None]
        assert "did not answer within" in caplog.text
        assert [worker._process.returncode for worker in started] == [-signal.SIGKILL]

    def test_workers_answer_for_their_ranges(self, jobs, monkeypatch):
        """On a quiet store every worker answers, and the answer is the one read in one range."""
        whole = select_jobs(jobs)
        answers = in_ranges(monkeypatch, 4)
        assert select_jobs(jobs) == whole
        assert len(answers) == 3 and None not in answers
        assert sum(answer.records for answer in answers) > 0
