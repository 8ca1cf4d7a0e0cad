"""Shards: how the streams of one policy split among replicas, and where each shard's lease lives (pure).

Several ``retain streams run`` on one policy share its streams: each stream
belongs to one of ``count`` shards, and one replica at a time holds a
shard's lease (:mod:`retain.retention.leases`). Which shard a stream is in
must be the same on every replica, and cheap to work out every beat:

- **on a Redis Cluster**, shards follow slot ranges: shard ``s`` is slots
  ``s * 16384 // count`` up to the next shard's first, so a shard lives on one
  node (or two, where a node's range ends inside it), and a node's outage
  costs only the shards it serves. Each shard's lease key carries a hash tag
  that lands in the shard's own slots: the lease is on the same node as its
  streams, and goes down with them, never with another node;
- **on one server** (or Sentinel), a stream's shard is a hash of its whole
  key: all streams of one queue share a hash tag, and slot ranges would put
  them all in one shard.

The group names the policy the replicas share; its keys are
``retain:replicas:<group>:...``. Two policies on one Redis get two groups and
never hold each other's shards; replicas of one policy file derive the same
group from it (:func:`policy_group`) unless the file names one.

Example:
    >>> shards = Shards(64, "orders", cluster=False)
    >>> shards.of("emq:{shop}:stream:orders")
    49
    >>> shards.lease_key(49)
    'retain:replicas:orders:lease:49'
"""

from __future__ import annotations

import hashlib
import re
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property

from redis.crc import REDIS_CLUSTER_HASH_SLOTS, key_slot

from retain.errors import InvalidPolicy

__all__ = ["DEFAULT_SHARDS", "GROUP_PATTERN", "Shards", "policy_group"]

DEFAULT_SHARDS = 64
#: what a group name may hold: it is part of every coordination key
GROUP_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


@dataclass(frozen=True)
class Shards:
    """``count`` shards of group ``group``'s streams; ``cluster``: shards follow slot ranges.

    Raises:
        InvalidPolicy: a count outside 1..16384, or a group name outside :data:`GROUP_PATTERN`.
    """

    count: int = DEFAULT_SHARDS
    group: str = "default"
    cluster: bool = False
    _tags: tuple[str, ...] = field(default=(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if isinstance(self.count, bool) or not isinstance(self.count, int) \
                or not 1 <= self.count <= REDIS_CLUSTER_HASH_SLOTS:
            raise InvalidPolicy(f"[replicas] shards must be a whole number from 1 to {REDIS_CLUSTER_HASH_SLOTS} "
                                f"(got {self.count!r})")
        if not isinstance(self.group, str) or not GROUP_PATTERN.fullmatch(self.group):
            raise InvalidPolicy("[replicas] group must be 1 to 64 letters, digits, '.', '_' or '-', starting with "
                                f"a letter or digit (got {self.group!r})")

    def of(self, key: str) -> int:
        """The shard of the stream at ``key``."""
        raw = key.encode()
        if self.cluster:
            return key_slot(raw) * self.count // REDIS_CLUSTER_HASH_SLOTS
        return zlib.crc32(raw) % self.count

    @property
    def prefix(self) -> str:
        return f"retain:replicas:{self.group}"

    def lease_key(self, shard: int) -> str:
        """The key of ``shard``'s lease: on a cluster, hash-tagged into the shard's own slots."""
        if not self.cluster:
            return f"{self.prefix}:lease:{shard}"
        return f"{self.prefix}:lease:{shard}:{{{self._slot_tags[shard]}}}"

    @property
    def members_key(self) -> str:
        """The sorted set of live replicas, each scored by when its membership ends."""
        return f"{self.prefix}:members"

    @property
    def maintenance_key(self) -> str:
        """The lease of the one replica that maintains the archive."""
        return f"{self.prefix}:maintenance"

    def fence_id(self, shard: int) -> str:
        """The archive's app transaction that holds ``shard``'s fencing token."""
        return f"retain-lease/{self.group}/{self.count}/{shard}"

    def first_slot(self, shard: int) -> int:
        """The first cluster slot of ``shard`` (slot ranges: ``shard * 16384 // count`` rounded up)."""
        return -(-shard * REDIS_CLUSTER_HASH_SLOTS // self.count)

    @cached_property
    def _slot_tags(self) -> tuple[str, ...]:
        """For each shard, the shortest decimal hash tag whose slot is the shard's first: found once."""
        wanted = {self.first_slot(shard): shard for shard in range(self.count)}
        tags: dict[int, str] = {}
        number = 0
        while len(tags) < self.count:
            shard = wanted.get(key_slot(str(number).encode()))
            if shard is not None and shard not in tags:
                tags[shard] = str(number)
            number += 1
        return tuple(tags[shard] for shard in range(self.count))


def policy_group(description: Iterable[str]) -> str:
    """A group name that replicas running the same policy derive alike: ``policy-`` and a digest of it.

    ``description``: the policy's streams and patterns with their windows, in order (what makes two
    policies the same one). A changed policy is a new group: during a rolling change the old and new
    replicas each bound every stream, which is safe (the boundary and the archive's fence hold whatever
    the leases say), only not shared.
    """
    digest = hashlib.sha256("\n".join(description).encode()).hexdigest()[:12]
    return f"policy-{digest}"
