"""Replicas under fire, as an operator runs them: three ``retain streams run`` processes on one policy under
producers, one SIGKILLed (and started again) every 20 s for two minutes, on a local archive and on SeaweedFS at
once; then a 3-master cluster with one master frozen for 10 s.

What must hold (INV-ONEHOLDER, INV-TAKEOVER, INV-WINDOW, INV-FOLD, INV-MERGE):

- every acknowledged id, once and in order, through the merge-read (the plain streams: their newest entries);
  an entry Redis wrote whose acknowledgement a fault lost may be there too, once and in order;
- no stream ever shorter than its window once it was filled: no trim reached inside it, whoever trimmed;
- no stream longer than its window, plus what three ticks bring (and an archived one: what comes while its fold
  is committed), plus one node (a dead replica's streams are trimmed again within its lease of three ticks); the
  bound is doubled for a shared, noisy machine;
- rows written twice (a lost race's file, a killed fold's) at most 1% of the rows archived.

These take minutes: ``python3 dev.py test`` runs them, the floor and server matrix leave them out (``-m soak``).
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from pathlib import Path

import pytest

from retain.archive import Archive, read
from retain.servers import RedisCluster, RedisServer
from tests.helpers.replicas import Lengths, Producers, ReplicaSet, rows_stored
from tests.helpers.streams import ms_of
from tests.helpers.waiting import wait_for

pytestmark = pytest.mark.soak

WINDOW, NODE = 1000, 100
TICK, LEASE = 0.5, 1.5
SOAK_SECONDS, KILL_EVERY = 120.0, 20.0
#: an archived stream is trimmed once its fold is committed: on SeaweedFS a PUT of the file and a conditional PUT
#: of the log, which took up to 2 s on a machine running two other test suites (1,920 entries against a bound of
#: 1,700 without it). A replica's streams left untrimmed would grow by KILL_EVERY's appends: 4,000.
FOLD_SECONDS = 2.0


def policy_file(path: Path, url: str, archive: dict[str, object], keys: list[str], archived: int,
                cluster: bool = False) -> Path:
    options = "".join(f'{name} = {value!r}\n'.replace("'", '"') for name, value in archive.items())
    streams = "".join(f'[[stream]]\nkey = "{key}"\nmaxlen = {WINDOW}\narchive = {str(number < archived).lower()}\n'
                      for number, key in enumerate(keys))
    path.write_text(f'url = "{url}"\ncluster = {str(cluster).lower()}\ntick = {TICK}\n'
                    f"[archive]\n{options}maintain_every = false\n"
                    f'[replicas]\nlease = {LEASE}\n{streams}')
    return path


def check(conn, archive: Archive, keys: list[str], archived: int, producers: Producers, lengths: Lengths) -> None:
    """What must hold of a run (the module docstring), stream by stream."""
    from retain.streams import RawKey

    for number, key in enumerate(keys):
        acknowledged = producers.ids(key)
        if number < archived:
            merged = [ms_of(entry_id) for entry_id, _ in read(conn, RawKey(key), archive, count=500)]
            assert all(earlier < later for earlier, later in zip(merged, merged[1:], strict=False)), \
                f"{key}: the merge-read is out of order, or repeats an id"
            assert set(map(ms_of, acknowledged)) <= set(merged), f"{key}: the merge-read lost an acknowledged id"
        else:
            live = [ms_of(entry_id) for entry_id, _ in conn.xrange(key)]
            kept = {ms_of(entry_id) for entry_id in acknowledged if ms_of(entry_id) >= live[0]}
            assert kept <= set(live), f"{key}: the live stream lost an acknowledged entry"
        assert lengths.low.get(key, WINDOW) >= WINDOW, f"{key} went down to {lengths.low[key]} (window {WINDOW})"
        per_second = producers.appended_per_second(key)
        late = 3 * TICK + (FOLD_SECONDS if number < archived else 0)
        bound = WINDOW + 2 * per_second * late + NODE
        assert lengths.high[key] <= bound, f"{key} grew to {lengths.high[key]} (bound {bound:.0f})"
    listed = sum(archive.state(RawKey(key)).entries for key in keys[:archived])
    twice = rows_stored(archive) - listed
    assert twice <= 0.01 * listed, f"{twice} rows written twice of {listed} archived"


def settle(conn, keys: list[str]) -> None:
    wait_for(lambda: all(conn.xlen(key) <= WINDOW + NODE for key in keys), "the streams to be trimmed", timeout=60)


def test_replicas_killed_every_20s(tmp_path, seaweed_server):
    """Two groups of three replicas, one on a local archive and one on SeaweedFS, five streams each (three
    archived, two plain), producers throughout; every 20 s one replica of each group is SIGKILLed and
    started again. Everything in the module docstring holds for both."""
    run = uuid.uuid4().hex[:6]
    groups = {
        "local": {"url": str(tmp_path / "archive")},
        "s3": {"url": seaweed_server.archive_url(f"soak-{run}"), **seaweed_server.archive_options()},
    }
    with RedisServer() as server:
        keys = {name: [f"soak:{{{name}}}:{run}:{number}" for number in range(5)] for name in groups}
        sets = {name: ReplicaSet(policy_file(tmp_path / f"{name}.toml", server.url, options, keys[name], 3),
                                 3, tmp_path, name) for name, options in groups.items()}
        every = [key for group in keys.values() for key in group]
        try:
            with Producers(server.client, every, batch=10, rate=20) as producers, \
                    Lengths(server.client, every, WINDOW) as lengths:
                started = time.monotonic()
                kills = 0
                while time.monotonic() - started < SOAK_SECONDS:
                    time.sleep(KILL_EVERY / 2)
                    replicas = sets["local" if kills % 2 == 0 else "s3"]
                    replicas.kill(kills // 2 % 3)
                    kills += 1
                    assert not producers.failures, producers.failures
            with server.client() as conn:
                settle(conn, every)
                for replicas in sets.values():
                    replicas.wait_started()
                statuses = {name: replicas.stop() for name, replicas in sets.items()}
                for name, replicas in sets.items():
                    assert statuses[name] == [0, 0, 0], replicas.log_text()[-3000:]
                    archive = Archive(groups[name]["url"], **{k: v for k, v in groups[name].items() if k != "url"})
                    check(conn, archive, keys[name], 3, producers, lengths)
            assert kills >= 10
        finally:
            for replicas in sets.values():
                replicas.stop()


def test_a_frozen_master_costs_its_own_streams_only(tmp_path):
    """A 3-master cluster serving writes while a master is down (cluster-require-full-coverage no), three
    replicas, streams on every master: one master SIGSTOPped for 10 s. The streams of the other masters stay
    within their bound all along, archived ones folded as ever; once it is back, everything holds."""
    run = uuid.uuid4().hex[:6]
    with RedisCluster(masters=3, config={"cluster-require-full-coverage": "no"}) as cluster:
        with cluster.client() as conn:
            by_node: dict[int, list[str]] = {}
            number = 0
            while min((len(found) for found in by_node.values()), default=0) < 2 or len(by_node) < 3:
                key = f"soak:{{{run}{number}}}:s"
                by_node.setdefault(conn.get_node_from_key(key).port, []).append(key)
                number += 1
        frozen, *healthy = cluster.nodes
        keys = [key for found in by_node.values() for key in found[:2]]
        archived = {key for found in by_node.values() for key in found[:1]}
        ordered = [key for key in keys if key in archived] + [key for key in keys if key not in archived]
        path = policy_file(tmp_path / "cluster.toml", cluster.url, {"url": str(tmp_path / "archive")}, ordered,
                           len(archived), cluster=True)
        replicas = ReplicaSet(path, 3, tmp_path, "cluster")
        frozen_keys = set(by_node[frozen.bound_port][:2])
        try:
            with Producers(cluster.client, ordered, batch=10, rate=20) as producers, \
                    Lengths(cluster.client, ordered, WINDOW) as lengths:
                time.sleep(8)  # the replicas settle, the streams fill
                lengths.ignored |= frozen_keys
                os.kill(frozen._child.process.pid, signal.SIGSTOP)
                try:
                    time.sleep(10)
                finally:
                    os.kill(frozen._child.process.pid, signal.SIGCONT)
                time.sleep(8)
                assert replicas.alive(), replicas.log_text()[-3000:]
            with cluster.client() as conn:
                settle(conn, ordered)
                assert replicas.stop() == [0, 0, 0], replicas.log_text()[-3000:]
                lengths.ignored.clear()
                lengths.high.update({key: 0 for key in frozen_keys})
                lengths.low = {key: low for key, low in lengths.low.items() if key not in frozen_keys}
                check(conn, Archive(str(tmp_path / "archive")), ordered, len(archived), producers, lengths)
        finally:
            replicas.stop()
