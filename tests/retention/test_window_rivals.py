"""INV-WINDOW beside other clients: a rival trims from the head, deletes and appends between every pair of
the driver's commands, and no trim the driver sends removes an entry inside its window.

The driver talks to Redis through :mod:`tests.helpers.rival`'s proxy, which runs the rival's next action
before forwarding each command and reads the stream just before and after each XTRIM. The window an entry
must not leave is judged on the stream as it would be had the rival removed nothing: the rival's own
removals shrink the window, the driver's trim must not. Every path that turns a length limit into a MINID
is covered: archived streams (MaxLen, a byte budget, a length combined with an age), a protected stream,
and the plain ones for comparison.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest
import redis
from hypothesis import given, settings
from hypothesis import strategies as st

from retain.archive import Archive
from retain.retention import RetentionDriver, StreamPolicy
from retain.retention.groups import Protect
from retain.streams import RawKey
from retain.windows import Limits, MaxAge, MaxBytes, MaxLen
from tests.helpers.rival import Proxy, Trim, proxied
from tests.helpers.streams import BASE_MS, ms_of

#: the driver's clock: 1.5 s of fake time after the first entry, so an age limit of 1 s cuts inside the stream
NOW = datetime.fromtimestamp((BASE_MS + 1500) / 1000, UTC)
AGE = "1s"
FLOOR = (BASE_MS + 500, 0)

KINDS = ("archived-maxlen", "archived-bytes", "archived-limits", "protected-maxlen", "plain-limits", "plain-bytes")

actions = st.lists(st.one_of(st.tuples(st.just("none"), st.just(0)),
                             st.tuples(st.just("head"), st.integers(1, 150)),
                             st.tuples(st.just("xdel"), st.integers(0, 10_000)),
                             st.tuples(st.just("append"), st.integers(1, 40))),
                   min_size=1, max_size=12)


class Rival:
    """Before each of the driver's commands: the next action, in turn, on the test's stream."""

    def __init__(self, key: str, actions: list[tuple[str, int]]) -> None:
        self.key, self.actions, self.step = key, actions, 0
        self.proxy: Proxy | None = None
        #: every entry the rival removed, by a trim or XDEL
        self.removed: set[bytes] = set()

    def __call__(self, command: tuple[bytes, ...]) -> None:
        if self.proxy is None or command[1:2] != (self.key.encode(),):
            return  # only between the driver's commands on the stream (not its handshake, not the lease keys)
        kind, amount = self.actions[self.step % len(self.actions)]
        self.step += 1
        conn = self.proxy.direct
        if kind == "head":
            oldest = [entry_id for entry_id, _ in conn.xrange(self.key, count=amount + 1)]
            if len(oldest) > amount:
                conn.xtrim(self.key, minid=oldest[amount].decode(), approximate=False)
                self.removed.update(oldest[:amount])
        elif kind == "xdel":
            live = [entry_id for entry_id, _ in conn.xrange(self.key)]
            if live:
                victim = live[amount % len(live)]
                conn.xdel(self.key, victim)
                self.removed.add(victim)
        elif kind == "append":
            pipe = conn.pipeline(transaction=False)
            for index in range(amount):
                pipe.xadd(self.key, {"r": str(index)})
            pipe.execute()


def policy_entry(kind: str, key: str, count: int) -> StreamPolicy:
    stream = RawKey(key)
    if kind == "archived-maxlen":
        return StreamPolicy(stream, MaxLen(count, approx=False), archive=True)
    if kind == "archived-bytes":
        return StreamPolicy(stream, MaxBytes((count + 1) * 60, approx=False), archive=True)
    if kind == "archived-limits":
        return StreamPolicy(stream, Limits(MaxLen(count, approx=False), MaxAge(AGE, approx=False)), archive=True)
    if kind == "protected-maxlen":
        return StreamPolicy(stream, MaxLen(count, approx=False), protect=Protect("pending", 1_000_000))
    if kind == "plain-limits":
        return StreamPolicy(stream, Limits(MaxLen(count, approx=False), MaxAge(AGE, approx=False)))
    return StreamPolicy(stream, MaxBytes((count + 1) * 60, approx=False))


def length_kept(kind: str, count: int, proxy: Proxy, trim: Trim) -> int:
    """The count of newest entries the trim's window keeps: a budget's is what the driver's measure made it."""
    if not kind.endswith("bytes"):
        return count
    measures = [index for index in range(trim.index) if proxy.commands[index][:2] == (b"MEMORY", b"USAGE")]
    usage_at = measures[-1]
    usage, length = proxy.replies[usage_at], proxy.replies[usage_at + 1]
    return MaxBytes((count + 1) * 60).to_maxlen(usage, int(length)).count


def inside(kind: str, trim: Trim, kept: int) -> set[bytes]:
    """The entries inside the window at the trim, on the stream as it would be had the rival removed nothing."""
    present = sorted(set(trim.before) | trim.witnessed, key=ms_of)
    newest = set(present[-kept:]) if kept else set()
    if kind.endswith("limits"):
        return {entry_id for entry_id in newest if ms_of(entry_id) >= FLOOR}
    return newest


@pytest.fixture(scope="module")
def rival_archive(tmp_path_factory) -> Archive:
    return Archive(str(tmp_path_factory.mktemp("rival-archive")))


@pytest.mark.parametrize("kind", KINDS)
@settings(max_examples=15)
@given(initial=st.integers(0, 400), count=st.integers(0, 250), plan=actions, more=st.integers(0, 200))
def test_no_trim_reaches_inside_the_window(redis_server, rival_archive, kind, initial, count, plan, more):
    """Whatever the rival does between two commands, every entry a driver's trim removed was outside the
    window (for MaxLen, byte budgets and combined limits, archived, protected and plain)."""
    key = f"rival:{kind}:{uuid.uuid4().hex[:8]}"
    rival = Rival(key, plan)
    with proxied(redis_server, rival) as proxy:
        proxy.witness = lambda: frozenset(rival.removed)
        direct = proxy.direct
        pipe = direct.pipeline(transaction=False)
        for index in range(initial):
            pipe.xadd(key, {"i": str(index)}, id=f"{BASE_MS + index}-0")
        pipe.execute()
        if kind.startswith("protected") and initial:
            direct.xgroup_create(key, "readers", id="0")
            delivered = direct.xreadgroup("readers", "c", {key: ">"}, count=initial)
            direct.xack(key, "readers", *[entry_id for entry_id, _ in delivered[0][1]])
        rival.proxy = proxy
        with redis.Redis.from_url(proxy.url) as conn:
            driver = RetentionDriver(conn, [policy_entry(kind, key, count)], archive=rival_archive,
                                     clock=lambda: NOW, track_groups=False)
            driver.sweep()
            rival.proxy = None
            pipe = direct.pipeline(transaction=False)
            for index in range(more):
                pipe.xadd(key, {"m": str(index)})
            pipe.execute()
            rival.proxy = proxy
            driver.sweep()
    for trim in proxy.trims:
        if trim.key != key:
            continue
        reached = trim.removed & inside(kind, trim, length_kept(kind, count, proxy, trim))
        assert not reached, f"{b' '.join(trim.command).decode()} removed {len(reached)} entries inside the window"
