"""retain.retention.shards and retain.retention.leases, the pure parts: where a stream and its lease live, the
fair share, and what a replica takes and gives back after one round trip."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from redis.crc import key_slot

from retain.errors import InvalidPolicy
from retain.retention import Replicas
from retain.retention.leases import LeaseView, fair_share, plan_leases
from retain.retention.shards import Shards, policy_group

members = st.lists(st.text("abcdef", min_size=1, max_size=4), min_size=1, max_size=8, unique=True)


class TestShards:
    @given(key=st.text(min_size=1, max_size=40), count=st.integers(1, 300), cluster=st.booleans())
    def test_every_key_has_one_shard(self, key, count, cluster):
        """A key's shard is in range and the same every time it is asked."""
        shards = Shards(count, "g", cluster)
        assert 0 <= shards.of(key) < count and shards.of(key) == Shards(count, "g", cluster).of(key)

    @given(count=st.integers(1, 200))
    def test_on_a_cluster_a_lease_lives_in_its_shards_slots(self, count):
        """A shard's lease key hashes into the shard's own slot range: it is on the node of its streams."""
        shards = Shards(count, "orders", cluster=True)
        for shard in range(0, count, max(1, count // 7)):
            assert shards.of(shards.lease_key(shard)) == shard
            assert key_slot(shards.lease_key(shard).encode()) == shards.first_slot(shard)

    def test_one_queue_spreads_on_one_server(self):
        """On one server a queue's streams (one hash tag) still spread over the shards."""
        shards = Shards(64, "g")
        assert len({shards.of(f"emq:{{shop}}:stream:s{index}") for index in range(500)}) == 64

    @pytest.mark.parametrize(("options", "message"), [
        ({"count": 0}, "shards must be a whole number from 1 to 16384 (got 0)"),
        ({"count": 16385}, "shards must be a whole number from 1 to 16384"),
        ({"group": "a b"}, "group must be 1 to 64 letters"),
        ({"group": "{x}"}, "group must be 1 to 64 letters"),
    ])
    def test_refusals(self, options, message):
        with pytest.raises(InvalidPolicy, match=message.replace("(", r"\(").replace(")", r"\)")):
            Shards(**options)

    def test_a_policy_names_its_group(self):
        """Replicas of one policy derive one group; another policy another."""
        assert policy_group(["a\tMAXLEN ~ 10"]) == policy_group(["a\tMAXLEN ~ 10"])
        assert policy_group(["a\tMAXLEN ~ 10"]) != policy_group(["a\tMAXLEN ~ 11"])
        assert policy_group(["x"]).startswith("policy-")


class TestReplicasSettings:
    def test_the_lease_follows_a_long_tick(self):
        """3 s by default, or three ticks when the tick is longer; a lease below two ticks is refused."""
        assert Replicas().for_tick(1.0).lease == 3.0
        assert Replicas().for_tick(5.0).lease == 15.0
        with pytest.raises(InvalidPolicy, match="lease must be at least twice the tick"):
            Replicas(lease=1.5).for_tick(1.0)
        assert Replicas(lease=1.5, enabled=False).for_tick(1.0).lease == 1.5

    @pytest.mark.parametrize(("options", "message"), [
        ({"shards": 0}, "shards must be"), ({"lease": 0}, "lease must be a positive number"),
        ({"lease": True}, "lease must be"), ({"name": "a/b"}, "name must be"), ({"enabled": "yes"}, "enabled"),
    ])
    def test_refusals(self, options, message):
        with pytest.raises(InvalidPolicy, match=message):
            Replicas(**options)


class TestFairShare:
    @given(shards=st.integers(1, 500), members=members)
    def test_the_shares_add_up_and_differ_by_one_at_most(self, shards, members):
        shares = [fair_share(shards, members, member) for member in members]
        assert sum(shares) == shards and max(shares) - min(shares) <= 1


@st.composite
def views(draw):
    """A round trip as one replica may see it: every shard held by it, by another member, or free."""
    shards = draw(st.integers(1, 80))
    names = draw(members)
    me = names[0]
    owners = draw(st.lists(st.sampled_from([*names, None]), min_size=shards, max_size=shards))
    mine = frozenset(shard for shard, owner in enumerate(owners) if owner == me)
    holders = {shard: owner for shard, owner in enumerate(owners) if owner != me}
    free = [shard for shard, owner in holders.items() if owner is None]
    free_before = frozenset(draw(st.lists(st.sampled_from(free), unique=True))) if free else frozenset()
    others = [shard for shard, owner in holders.items() if owner is not None]
    abandoned = frozenset(draw(st.lists(st.sampled_from(others + free), unique=True))) if others + free else frozenset()
    return shards, LeaseView(me, tuple(sorted(names)), mine, holders, free_before, abandoned)


class TestPlan:
    @given(views())
    def test_takes_only_free_shards_and_gives_back_only_its_own(self, case):
        """Never a shard another holds; never one it does not hold given back; never both in one beat."""
        shards, view = case
        moves = plan_leases(view, shards)
        assert all(view.holders.get(shard, "x") is None for shard in moves.take)
        assert set(moves.release) <= view.mine
        assert not (moves.take and moves.release)

    @given(views())
    def test_takes_its_share_and_every_orphan(self, case):
        """Up to the fair share from the free shards, and whatever the share, every free shard that was free
        before or whose holder stopped renewing: no shard is left unheld for a stale member list."""
        shards, view = case
        moves = plan_leases(view, shards)
        free = {shard for shard, holder in view.holders.items() if holder is None}
        target = fair_share(shards, view.members, view.me)
        orphans = free & (view.free_before | view.abandoned)
        assert orphans <= set(moves.take)
        assert len(set(moves.take) - orphans) <= max(0, target - len(view.mine))
        if len(view.mine) < target:
            assert len(moves.take) >= min(target - len(view.mine), len(free))

    @given(views())
    def test_gives_back_only_what_another_wants(self, case):
        """Above its share it gives back no more than its surplus, and only what members below theirs lack."""
        shards, view = case
        moves = plan_leases(view, shards)
        target = fair_share(shards, view.members, view.me)
        assert len(moves.release) <= max(0, len(view.mine) - target)
        if moves.release:
            held_by = {member: sum(1 for holder in view.holders.values() if holder == member)
                       for member in view.members}
            assert any(held_by[member] < fair_share(shards, view.members, member)
                       for member in view.members if member != view.me)
