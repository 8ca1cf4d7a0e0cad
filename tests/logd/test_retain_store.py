"""The store paths a retain pass leans on for speed give the answers the plain paths give, and it takes them.

- :meth:`Draft.prefetch` reads a batch of sibling records in one range scan before the
  precondition and the deletes read them one by one;
- :func:`~retain.logd.view.iter_items` streams a container's items as :func:`list_items` lists them;
- a retain rule's common case is selected and deleted in SQL; what the SQL cannot say goes the general way.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from retain.errors import LogdError
from retain.logd import Session, Store, run_retain
from retain.logd.draft import Draft
from retain.logd.paths import parse
from retain.logd.settings import Settings
from retain.logd.view import iter_items, list_items
from retain.wire import LogdKey, Raw, load
from tests.helpers.seed004 import SEED_REQUEST, SEED_RESULT, seed_scene

PREFETCH = Draft.prefetch  # the real one, kept before any example swaps it out
NAMES = [f"j{i}" for i in range(8)] + ["j1x", "j10"]  # j1, j1x and j10 sort close: subtree bounds matter

items = st.dictionaries(st.sampled_from(NAMES), st.one_of(
    st.fixed_dictionaries({"status": st.sampled_from(["done", "running"])}),
    st.fixed_dictionaries({"status": st.sampled_from(["done", "running"]),
                           "steps": st.dictionaries(st.sampled_from(["s1", "s2"]), st.fixed_dictionaries(
                               {"ok": st.booleans()}), max_size=2)}),
    st.integers(0, 3)), max_size=len(NAMES))


def replay(store: Store, scoped: bool, first: dict, second: dict, gone: list[str]):
    baseline = store.session()
    baseline.set_schema({"runs": LogdKey("id")})
    baseline.patch([{"set": "jobs", "value": first}, {"set": "runs", "value": [{"id": name} for name in first]}])
    session = store.session(scope="trial") if scoped else baseline
    if second:
        session.patch([{"set": f"jobs.{name}", "value": value} for name, value in second.items()])
    for name in gone:
        try:
            session.patch([{"delete": f"jobs.{name}"}])
        except LogdError:
            pass
    return session


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(first=items, second=items, gone=st.lists(st.sampled_from(NAMES), max_size=3), scoped=st.booleans(),
       batch=st.lists(st.sampled_from(NAMES), min_size=2, max_size=6, unique=True),
       pattern=st.sampled_from([{"status": "done"}, {}, {"status": "running"}]))
def test_prefetch_changes_no_answer(tmp_path_factory, monkeypatch, first, second, gone, scoped, batch, pattern):
    """A batch of guarded sibling deletes, in the baseline or a scope, answers and leaves the same state with
    the one-scan prefetch as without it."""
    directory = tmp_path_factory.mktemp("prefetch")
    outcomes = []
    for name, prefetch in (("with", PREFETCH), ("without", lambda self, paths: None)):
        monkeypatch.setattr(Draft, "prefetch", prefetch)
        with Store.open(str(directory / f"{name}.sqlite3"), settings=Settings(synchronous="off")) as store:
            session = replay(store, scoped, first, second, gone)
            for container in ("jobs", "runs"):
                paths = [f"{container}.{n}" if container == "jobs" else f"runs({n})" for n in batch]
                try:
                    answer = session.patch([{"delete": path} for path in paths],
                                           precondition={path: pattern for path in paths}).commit
                except LogdError as exc:
                    answer = (exc.code, str(exc))
                outcomes.append((answer, session.get().value, store.session().get().value))
    assert outcomes[:2] == outcomes[2:]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(first=items, second=items, gone=st.lists(st.sampled_from(NAMES), max_size=3), scoped=st.booleans())
def test_iter_items_is_list_items(tmp_path_factory, first, second, gone, scoped):
    """Streaming a container's items gives list_items' items, in its order, for maps and keyed arrays."""
    with Store.open(str(tmp_path_factory.mktemp("iter") / "s.sqlite3"), settings=Settings(synchronous="off")) as store:
        session = replay(store, scoped, first, second, gone)
        view = session.view()
        jobs, runs = parse("jobs.*"), parse("runs(*)")
        assert list(iter_items(view, jobs).__iter__()) == list(list_items(view, jobs).items())
        assert [value for _, value in iter_items(view, runs)] == list_items(view, runs)
        assert [name for name, _ in iter_items(view, runs)] == [run["id"] for run in list_items(view, runs)]


class TestWhichPath:
    """The common case is answered in SQL; what the SQL cannot say exactly goes the general way."""

    def spy(self, monkeypatch, store):
        paths: list[str] = []
        backend = type(store.backend)
        real = backend.delete_items

        def delete_items(self, *args, **kwargs):
            paths.append("sql")
            return real(self, *args, **kwargs)

        real_patch = Session.patch

        def patch(self, ops, **kwargs):
            if kwargs.get("precondition") is not None:
                paths.append("general")
            return real_patch(self, ops, **kwargs)

        monkeypatch.setattr(backend, "delete_items", delete_items)
        monkeypatch.setattr(Session, "patch", patch)
        return paths

    def test_the_seed_goes_in_sql(self, store, monkeypatch):
        """The seed's rules -- a map of jobs matched by status, a keyed array of events -- select and delete
        in SQL, in the example's three batches."""
        seed_scene(store)
        paths = self.spy(monkeypatch, store)
        assert run_retain(store.session(), load(SEED_REQUEST)[0]["retain"]).to_document() == SEED_RESULT
        assert paths == ["sql"] * 3

    @pytest.mark.parametrize(("schema", "rule"), [
        ({"jobs.*.meta": Raw()}, {"path": "jobs.*", "age": ".at", "after": "1d"}),
        ({}, {"path": "jobs.*", "age": ".at", "after": "1d", "match": {"tags": ["a"]}}),
    ])
    def test_what_sql_cannot_say_goes_the_general_way(self, store, monkeypatch, schema, rule):
        """A !raw rule inside the items, or a list in match, reads the items whole and deletes by patch --
        with the same answer."""
        ops = store.session()
        ops.set_schema(schema)
        ops.patch([{"set": "jobs", "value": {"j1": {"at": "2026-09-01T00:00:00Z", "tags": ["a"], "meta": {"x": 1}}}}])
        paths = self.spy(monkeypatch, store)
        assert run_retain(ops, {"now": "2026-09-12T08:00:00Z", "what": [rule]}).deleted == 1
        assert paths == ["general"]


class TestNothingSinceTheRead:
    """A batch tells the backend the latest commit its marks still hold at: past the read, the pass's own deletes of
    other items change nothing of it, so with no other writer the backend needs no look at the batch's span."""

    def spy(self, monkeypatch, store):
        calls: list[tuple[int, int | None]] = []
        backend = type(store.backend)
        real = backend.delete_items

        def delete_items(self, scope, container, items, test, at, rev, **kwargs):
            calls.append((at, kwargs.get("since")))
            return real(self, scope, container, items, test, at, rev, **kwargs)

        monkeypatch.setattr(backend, "delete_items", delete_items)
        return calls

    def scene(self, store) -> Session:
        ops = store.session()
        ops.patch([{"set": "jobs", "value": {f"j{i}": {"status": "done", "updatedAt": "2026-09-01T00:00:00Z"}
                                             for i in range(6)}}])
        return ops

    def test_alone_every_batch_is_current(self, store, monkeypatch):
        """No other writer: every batch after the first says its marks hold at the head it writes on."""
        ops = self.scene(store)
        calls = self.spy(monkeypatch, store)
        assert run_retain(ops, {"now": "2026-09-12T08:00:00Z", "batch": 2, "what": [RULE]}).deleted == 6
        assert [since == at for at, since in calls] == [True] * 3

    def test_a_writer_between_batches_is_not_passed_over(self, store, monkeypatch):
        """Another client's commit between two batches: the batches after it say the commit before it, so the
        backend looks at what changed -- and the pass still deletes every item nobody wrote."""
        ops = self.scene(store)
        calls = self.spy(monkeypatch, store)
        writer = store.session(author="other")

        def race(index, paths):
            if str(paths[0]) == "jobs.j2":
                writer.patch([{"set": "elsewhere", "value": 1}])

        assert run_retain(ops, {"now": "2026-09-12T08:00:00Z", "batch": 2, "what": [RULE]},
                          before_batch=race).deleted == 6
        assert [since == at for at, since in calls] == [True, False, False]


RULE = {"path": "jobs.*", "match": {"status": "done"}, "age": ".updatedAt", "after": "1d"}
