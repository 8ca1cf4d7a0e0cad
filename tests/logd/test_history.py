"""History: compaction.cutoff, snapshot tiers, compaction.horizon, and `compacted` for what no snapshot serves."""

from __future__ import annotations

import tempfile
from datetime import timedelta
from pathlib import Path as FsPath

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import retain.logd.store as store_module
from retain.errors import Compacted, InvalidDuration, InvalidSettings, LogdError
from retain.logd import Client, ServerThread, Store
from retain.logd.history import boundary, choose_snapshots, nearest, tier_windows
from retain.logd.postgres import PostgresBackend
from retain.logd.settings import Settings, Tier
from tests.helpers.logd import START, FakeClock
from tests.helpers.postgres import raw_scalar
from tests.helpers.waiting import wait_for

HOURLY_THEN_DAILY = (Tier(timedelta(hours=1), timedelta(days=1)), Tier(timedelta(days=1), timedelta(days=30)))
TEN_MINUTES = timedelta(minutes=10)


def write_every(store: Store, clock: FakeClock, count: int, step: timedelta = TEN_MINUTES) -> dict[int, object]:
    """``count`` commits ``step`` apart, each adding a job and bumping a counter; returns each commit's tree."""
    session = store.session(author="writer")
    states = {}
    for index in range(count):
        commit = session.patch([{"set": f"jobs.j{index}", "value": {"n": index}},
                                {"set": "counter", "value": index}]).commit
        states[commit] = session.get().value
        clock.advance(step)
    return states


def row_count(store: Store) -> int:
    return raw_scalar(store, "SELECT count(*) FROM nodes")


class TestCompaction:
    def test_cutoff_and_tiers(self, open_store, clock):
        """Below the cutoff only the last commit of each hour stays readable; others answer `compacted`."""
        store = open_store(cutoff=timedelta(hours=1), tiers=HOURLY_THEN_DAILY)
        states = write_every(store, clock, 36)  # 08:00 .. 13:50, one commit every ten minutes
        before = row_count(store)
        result = store.compact()  # now = 14:00: commits from 13:00 on are young
        assert result.boundary == 31
        assert result.snapshots == (6, 12, 18, 24, 30)  # 08:50, 09:50, ... 12:50
        assert result.removed > 0 and row_count(store) < before
        session = store.session()
        for commit, state in states.items():
            if commit >= 31 or commit in result.snapshots:
                assert session.get(at=commit).value == state
            else:
                with pytest.raises(Compacted) as caught:
                    session.get(at=commit)
                assert caught.value.code == "compacted"
        with pytest.raises(Compacted, match=r"commit 14 is compacted .* nearest kept: 12 and 18") as caught:
            session.get("counter", at=14)
        assert caught.value.nearest == (12, 18)
        with pytest.raises(Compacted, match="nearest kept: 24 and 30"):
            session.list("jobs.*", at=27)

    def test_eras_fold_further_as_time_passes(self, open_store, clock):
        """A day later the hourly snapshots of an old day fold into its daily one; a kept commit still reads."""
        store = open_store(cutoff=timedelta(hours=1), tiers=HOURLY_THEN_DAILY)
        states = write_every(store, clock, 36)
        store.compact()
        clock.advance(timedelta(days=2))
        store.session().patch([{"set": "late", "value": True}])
        result = store.compact()
        assert result.snapshots == (36,)  # the last commit of 2026-09-12
        assert store.session().get(at=36).value == states[36]
        with pytest.raises(Compacted, match="nearest kept: 36"):
            store.session().get(at=30)

    def test_deltas_fold_at_the_cutoff(self, open_store, clock):
        """A watcher asking from before the boundary is told to re-read; later deltas still come."""
        store = open_store(cutoff=timedelta(hours=1), tiers=HOURLY_THEN_DAILY)
        write_every(store, clock, 36)
        store.compact()
        session = store.session()
        with pytest.raises(Compacted, match="deltas before commit 31 are compacted; read at the current commit"):
            list(session.deltas("jobs", first=12))
        assert [d.commit for d in session.deltas("jobs", first=31)] == list(range(31, 37))
        assert raw_scalar(store, "SELECT count(*) FROM commits WHERE ops IS NULL") == 30
        assert raw_scalar(store, "SELECT count(*) FROM commits") == 36  # numbers stay

    def test_head_stays_readable(self, open_store, clock):
        """With every commit older than the cutoff, the head is still read whole."""
        store = open_store(cutoff=timedelta(hours=1), tiers=())
        states = write_every(store, clock, 5)
        clock.advance(timedelta(days=1))
        assert store.compact().boundary == 5
        assert store.session().get().value == states[5]

    def test_reopened_store_remembers(self, open_store, clock):
        """The boundary and the snapshots survive a restart."""
        store = open_store("h.sqlite3", cutoff=timedelta(hours=1), tiers=HOURLY_THEN_DAILY)
        write_every(store, clock, 36)
        store.compact()
        store.close()
        again = open_store("h.sqlite3", cutoff=timedelta(hours=1), tiers=HOURLY_THEN_DAILY)
        with pytest.raises(Compacted):
            again.session().get(at=14)
        assert again.session().get("counter", at=12).value == 11


class TestCompactionInSteps:
    def test_a_record_per_step_removes_what_one_step_removes(self, open_store, clock, monkeypatch):
        """The same history compacted with one record per step and with every record in one step: the same
        boundary, snapshots and removed count, the same rows left, the same reads."""
        compacted = []
        for name, records in (("steps.sqlite3", 1), ("whole.sqlite3", 100_000)):
            monkeypatch.setattr(store_module, "PRUNE_RECORDS", records)
            twin_clock = FakeClock(START)
            store = open_store(name, cutoff=timedelta(hours=1), tiers=HOURLY_THEN_DAILY)
            store.clock = twin_clock
            states = write_every(store, twin_clock, 36)
            result = store.compact()
            kept = {commit: store.session().get(at=commit).value for commit in states
                    if commit >= result.boundary or commit in result.snapshots}
            compacted.append((result, row_count(store), kept))
        assert compacted[0] == compacted[1]
        assert compacted[0][0].removed > 0

    def test_writes_come_between_its_steps(self, tmp_path, monkeypatch):
        """Served, a compaction of many records is many units of work on the writer: a patch sent on another
        connection meanwhile is committed between two of its steps, not after the whole of it."""
        monkeypatch.setattr(store_module, "PRUNE_RECORDS", 1)
        clock = FakeClock(START)
        store = Store.open(str(tmp_path / "steps.sqlite3"), clock=clock,
                           settings=Settings(synchronous="off", cutoff=timedelta(hours=1), tiers=()))
        events: list[str] = []
        for step in ("move_boundary", "prune"):  # each step of the compaction noted as it runs
            def noted(*args, step=step, run=getattr(store.backend, step)):  # noqa: B008 -- bound per step on purpose
                events.append(step)
                return run(*args)
            monkeypatch.setattr(store.backend, step, noted)
        store.listen(lambda record: events.append(f"commit {record.number}"))
        with ServerThread(store, listen=("127.0.0.1", 0)) as served:
            for _ in range(3):  # the patch must reach the writer before the last prune step: it always has
                events.clear()
                write_every(store, clock, 400, timedelta(minutes=1))
                clock.advance(timedelta(hours=2))
                with Client(served.address) as admin, Client(served.address, author="other") as other:
                    admin.send({"compact": {}})
                    wait_for(lambda: "move_boundary" in events, "the compaction to start")
                    patched = other.patch([{"set": "other", "value": 1}]).commit
                    assert admin.receive()["result"]["compact"]["removed"] > 0
                at = events.index(f"commit {patched}")
                if "prune" in events[at:]:
                    break
        store.close()
        assert "move_boundary" in events[:at] and "prune" in events[at:]


class TestHorizon:
    MARKER = "zebra-3f9a1c-marker"

    def disk_holds(self, store: Store, text: str) -> bool:
        """SQLite: any byte of the file or its WAL. PostgreSQL: any row version a query can still reach
        (after ``reclaim``, VACUUM, the removed versions' space is free; a managed server owns its files)."""
        if isinstance(store.backend, PostgresBackend):
            return bool(raw_scalar(store, f"SELECT count(*) FROM nodes WHERE value LIKE '%{text}%'"))
        path = FsPath(store.backend.path)
        files = [path, path.with_name(path.name + "-wal")]
        return any(text.encode() in f.read_bytes() for f in files if f.exists())

    def test_past_the_horizon_the_old_versions_are_gone_from_disk(self, open_store, clock):
        """A deleted record survives in a kept snapshot until the horizon passes it; then no byte of it is left."""
        store = open_store(cutoff=timedelta(hours=1), tiers=HOURLY_THEN_DAILY + (Tier(timedelta(days=30), None),),
                           horizon=timedelta(days=2))
        session = store.session()
        session.patch([{"set": "secrets.s1", "value": {"text": self.MARKER}}])  # 08:00
        write_every(store, clock, 6)  # 08:00 .. 08:50: the last commit of the hour still holds it
        session.patch([{"delete": "secrets.s1"}])  # 09:00
        write_every(store, clock, 6)
        clock.advance(timedelta(hours=3))
        snapshot = store.compact().snapshots[0]
        assert self.disk_holds(store, self.MARKER)
        assert session.get("secrets.s1.text", at=snapshot).value == self.MARKER  # INV-HISTORY
        with pytest.raises(Compacted):
            session.get(at=1)
        clock.advance(timedelta(days=3))
        session.patch([{"set": "later", "value": 1}])
        result = store.compact()
        assert snapshot not in result.snapshots
        assert not self.disk_holds(store, self.MARKER)
        with pytest.raises(Compacted):
            session.get(at=snapshot)

    def test_without_a_horizon_an_era_keeps_it(self, open_store, clock):
        """With no horizon, the forever tier keeps the last commit of every era, and what it held."""
        store = open_store(cutoff=timedelta(hours=1), tiers=HOURLY_THEN_DAILY + (Tier(timedelta(days=30), None),))
        session = store.session()
        session.patch([{"set": "secrets.s1", "value": {"text": self.MARKER}}])
        clock.advance(timedelta(days=400))
        session.patch([{"delete": "secrets.s1"}])
        clock.advance(timedelta(days=1))
        session.patch([{"set": "later", "value": 1}])
        result = store.compact()
        assert result.snapshots == (1, 2)
        assert self.disk_holds(store, self.MARKER)
        assert session.get("secrets.s1.text", at=1).value == self.MARKER


@st.composite
def timed_batches(draw):
    gaps = draw(st.lists(st.integers(0, 6 * 3600), min_size=1, max_size=25))
    keys = st.sampled_from(["a", "b", "c", "d"])
    ops = st.lists(st.one_of(st.builds(lambda k, v: {"set": f"x.{k}", "value": v}, keys, st.integers(0, 9)),
                             st.builds(lambda k: {"delete": f"x.{k}"}, keys)), min_size=1, max_size=3)
    return [(gap, draw(ops)) for gap in gaps], draw(st.lists(st.integers(0, 3 * 86400), min_size=1, max_size=3))


@pytest.mark.parametrize("prune_records", [1, store_module.PRUNE_RECORDS], ids=["a-record-a-step", "one-step"])
@settings(max_examples=40)
@given(case=timed_batches())
def test_kept_commits_read_as_before(case, prune_records):
    """After any number of compactions, every commit still served reads exactly as it did when written,
    and every other one answers `compacted` -- whether the pruning runs a record per step or all at once."""
    batches, advances = case
    default, store_module.PRUNE_RECORDS = store_module.PRUNE_RECORDS, prune_records
    try:
        _kept_commits_read_as_before(batches, advances)
    finally:
        store_module.PRUNE_RECORDS = default


def _kept_commits_read_as_before(batches, advances):
    with tempfile.TemporaryDirectory() as directory:
        clock = FakeClock(START)
        store = Store.open(str(FsPath(directory) / "p.sqlite3"), clock=clock,
                           settings=Settings(synchronous="off", cutoff=timedelta(hours=2), tiers=HOURLY_THEN_DAILY,
                                             horizon=timedelta(days=2)))
        session = store.session()
        states = {}
        session.patch([{"set": "x", "value": {}}])
        for gap, ops in batches:
            clock.advance(timedelta(seconds=gap))
            try:
                commit = session.patch(ops).commit
            except LogdError:
                continue
            states[commit] = session.get().value
        for advance in advances:
            clock.advance(timedelta(seconds=advance))
            result = store.compact()
            for commit, state in states.items():
                if commit >= result.boundary or commit in result.snapshots:
                    assert session.get(at=commit).value == state
                else:
                    with pytest.raises(Compacted):
                        session.get(at=commit)
        store.close()


class TestDecisions:
    def test_boundary(self):
        """The boundary is the first young commit, never past the head, never moving back."""
        assert boundary(0, 10, 7) == 7
        assert boundary(0, 10, None) == 10
        assert boundary(8, 10, 7) == 8
        assert boundary(0, 0, None) == 0

    def test_tier_windows(self):
        """Each tier reads eras of its size since now - keep, clipped by the horizon."""
        tiers = (Tier(timedelta(hours=1), timedelta(days=1)), Tier(timedelta(days=30), None))
        assert tier_windows(tiers, 100_000.0, None) == [(3600.0, 100_000.0 - 86400), (30 * 86400.0, None)]
        assert tier_windows(tiers, 100_000.0, 3600.0 * 5) == [(3600.0, 100_000.0 - 5 * 3600),
                                                             (30 * 86400.0, 100_000.0 - 5 * 3600)]

    def test_choose_snapshots(self):
        """A pick is kept if it was kept before or has just crossed below the boundary; never resurrected."""
        assert choose_snapshots([3, 5, 9, 12], kept=[3, 4], old_boundary=8, new_boundary=11) == [3, 9]

    def test_nearest(self):
        """The kept commits either side; the boundary stands in when none is later."""
        assert nearest([6, 12, 18], 14, 31) == (12, 18)
        assert nearest([6, 12, 18], 20, 31) == (18, 31)
        assert nearest([6], 2, 31) == (None, 6)


class TestSettings:
    @pytest.mark.parametrize(("kwargs", "message"), [
        ({"read_budget": 0}, "readBudget: must be a whole number >= 1"),
        ({"synchronous": "maybe"}, "synchronous must be one of"),
        ({"cutoff": timedelta(hours=2), "horizon": timedelta(hours=1)}, "horizon must be a duration no shorter"),
        ({"tiers": (Tier(timedelta(hours=1), timedelta(days=1)), Tier(timedelta(minutes=90), timedelta(days=2)))},
         "multiple of the tier before"),
        ({"tiers": (Tier(timedelta(hours=1), timedelta(days=2)), Tier(timedelta(days=1), timedelta(days=1)))},
         "keep must be longer"),
        ({"tiers": (Tier(timedelta(hours=1), None), Tier(timedelta(days=1), None))}, "keep must be longer"),
        ({"tiers": (Tier(timedelta(hours=2), timedelta(hours=1)),)}, "keep at least one era"),
    ])
    def test_refused(self, kwargs, message):
        """Settings that cannot hold together are refused naming the setting."""
        with pytest.raises(InvalidSettings, match=message):
            Settings(**kwargs)

    def test_from_options(self):
        """The written forms: durations, EVERY:KEEP tiers, forever."""
        got = Settings.from_options(read_budget=5, cutoff="30m", tiers=["1h:1d", "1d:forever"], horizon="1y")
        assert got.read_budget == 5 and got.cutoff == timedelta(minutes=30) and got.horizon == timedelta(days=365)
        assert [str(t) for t in got.tiers] == ["1h:1d", "1d:forever"]
        with pytest.raises(InvalidSettings, match="EVERY:KEEP"):
            Settings.from_options(tiers=["1h"])
        with pytest.raises(InvalidDuration):
            Settings.from_options(cutoff="soon")
