"""Properties over random patch sequences: a dict model agrees, history never changes, the log replays."""

from __future__ import annotations

import copy
import tempfile
from pathlib import Path as FsPath

from hypothesis import given, settings
from hypothesis import strategies as st

from retain.errors import LogdError
from retain.logd import Store
from retain.logd.settings import Settings

NAMES = ["a", "b", "c"]
paths = st.lists(st.sampled_from(NAMES), min_size=1, max_size=3).map(".".join)
scalars = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.sampled_from(["x", "y"]))
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=2), st.dictionaries(st.sampled_from(NAMES), inner, max_size=2)), max_leaves=6)
ops = st.one_of(st.builds(lambda p, v: {"set": p, "value": v}, paths, values),
                st.builds(lambda p: {"delete": p}, paths))
patches = st.lists(st.lists(ops, min_size=1, max_size=3), min_size=1, max_size=12)


def model_apply(tree: dict, op: dict) -> None:
    """What the store must do with a set/delete over maps; raises KeyError where it must refuse."""
    path = (op.get("set") or op.get("delete")).split(".")
    node = tree
    for name in path[:-1]:
        if name not in node:
            if "delete" in op:
                raise KeyError(name)
            node[name] = {}
        node = node[name]
        if not isinstance(node, dict):
            raise KeyError(name)
    if "delete" in op:
        del node[path[-1]]
    else:
        node[path[-1]] = copy.deepcopy(op["value"])


def fresh_store(directory: str, name: str) -> Store:
    return Store.open(str(FsPath(directory) / name), settings=Settings(synchronous="off"))


@settings(max_examples=60)
@given(patches)
def test_model_history_and_replay(batches):
    """The store agrees with a dict model after every patch, every older commit still reads as it was
    committed, and replaying the commit log into an empty store gives the same tree."""
    with tempfile.TemporaryDirectory() as directory:
        store = fresh_store(directory, "a.sqlite3")
        session = store.session(author="prop")
        model: dict = {}
        states = {}
        for batch in batches:
            attempt = copy.deepcopy(model)
            try:
                for op in batch:
                    model_apply(attempt, op)
            except KeyError:
                attempt = None
            try:
                commit = session.patch(batch).commit
            except LogdError:
                assert attempt is None, f"store refused {batch} the model accepts"
                continue
            assert attempt is not None, f"store accepted {batch} the model refuses"
            model = attempt
            states[commit] = copy.deepcopy(model)
            assert session.get().value == model
        for commit, state in states.items():
            assert session.get(at=commit).value == state
        replayed = fresh_store(directory, "b.sqlite3")
        replay = replayed.session(author="replay")
        for record in store.backend.commits(1, (0,)):
            replay.patch(list(record.ops))
        assert replay.get().value == session.get().value
        store.close()
        replayed.close()
