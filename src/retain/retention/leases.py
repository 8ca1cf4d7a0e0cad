"""Leases: which shards of the policy this replica trims and folds, agreed with the other replicas in Redis.

Every replica of a policy beats on its own. At the start of each beat it makes
one round trip of lease commands (:meth:`LeaseBook.commands`), reads what they
say (:meth:`LeaseBook.read`), decides what to take and give back
(:func:`plan_leases`, pure) and, only when something changes, makes a second
(:meth:`LeaseBook.moves`). The beat then touches the streams of the shards it
holds (:mod:`retain.retention.shards`), and no others.

- **A lease** is a key per shard, ``SET key "<token> <member>" NX PX <lease>``:
  free when missing, held by whoever set it until it expires. Its holder
  renews it every beat with ``GETEX key PX <lease>``, which answers who holds
  it: a holder that finds another member there (or nothing) has lost it, and
  stops. A ``GETEX`` may so extend another's fresh lease by one lease time,
  which is harmless (that holder is alive: it just took it). No Lua.
- **Membership** is a sorted set of members scored by when each membership
  ends (``ZADD``, renewed every beat; ``PEXPIRE`` on the set, so that it goes
  when the last replica does): each replica's fair share is ``shards /
  members``, the first ``shards % members`` members by name one more. A
  member renews its membership in the round trip that renews its leases, so
  when its membership ends is when its leases run out: one ``ZRANGE ...
  WITHSCORES`` tells a replica when every other's leases are due, and one
  ``MGET`` who holds each shard (a ``GET`` each on a cluster). A beat's lease
  round trip is ``5 + shards held + 1`` commands.
- **Spreading**: a replica under its share takes free shards, those it ranks
  highest first (rendezvous hashing: two replicas rank shards differently, so
  they rarely reach for the same ones); a replica over its share, while
  another is under, gives back those it ranks lowest. A shard that stays free
  for two of this replica's beats, or whose holder stopped renewing it, is
  taken whatever the share: a shard is never left unheld because a member
  list was out of date. When another's lease is due to run out before this
  replica's next beat, :meth:`LeaseBook.wake_in` says when, so that the runner
  beats again right then: a dead replica's shards are trimmed again within
  one lease time of its last renewal.
- **Stopping in time**: a lease counts as held until ``lease - margin`` after
  the command that set or renewed it was sent (:meth:`LeaseBook.holds`), by
  this process's monotonic clock. Redis lets another take it only after
  ``lease`` from when it ran the command, which is later: the old holder has
  stopped first. Every step of a beat on a stream asks again (the archive job
  through its :class:`~retain.archive.table.Fence`).
- **The fencing token** is the server's time in microseconds when the lease
  was taken: a later holder's is larger. It goes into every archive commit of
  the shard's streams, where a smaller one than the table holds is refused.

Safety never rests on leases: a Redis failover can lose a ``SET``, and a
paused process can outlive its lease, so two holders can briefly coexist.
The boundary (:mod:`retain.streams.boundary`) keeps every trim outside its
window and the archive's fence keeps every range archived once, whoever
holds what. Leases buy shared work and takeover. Nothing here outlives the
replicas: every key expires by itself.
"""

from __future__ import annotations

import functools
import logging
import os
import socket
import threading
import time
import uuid
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from retain._redis import as_retain_error
from retain.errors import InvalidPolicy, RetainError
from retain.retention.shards import DEFAULT_SHARDS, GROUP_PATTERN, Shards

if TYPE_CHECKING:
    # Only for annotations: the archive (pyarrow, deltalake) loads when a beat folds.
    from retain.archive import Fence

__all__ = ["DEFAULT_LEASE", "LeaseBook", "LeaseMoves", "LeaseView", "Replicas", "Takeover", "fair_share",
           "plan_leases"]

log = logging.getLogger(__name__)

#: seconds a lease lasts unless renewed (``[replicas] lease``)
DEFAULT_LEASE = 3.0
#: the part of a lease a holder keeps to itself: it stops this much before Redis could hand the lease on
MARGIN = 0.1


@dataclass(frozen=True)
class Replicas:
    """How replicas of one policy share its streams (the policy file's ``[replicas]``).

    ``enabled`` False: this driver trims every stream and takes no lease (``--once``, ``--dry-run``, a
    single process that wants no coordination). ``name`` shows in logs, metrics and the dashboard
    (default: host name and process id); ``group`` names the policy the replicas share (default: one
    derived from the policy, see :func:`retain.retention.shards.policy_group`).

    Raises:
        InvalidPolicy: shards outside 1..16384, a lease that is not a positive number of seconds, a name
            or group with characters a key must not hold.
    """

    enabled: bool = True
    shards: int = DEFAULT_SHARDS
    #: seconds; None: :data:`DEFAULT_LEASE`, or three ticks when the tick is longer (see :meth:`for_tick`)
    lease: float | None = None
    name: str | None = None
    group: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.enabled, bool):
            raise InvalidPolicy(f"[replicas] enabled must be true or false (got {self.enabled!r})")
        Shards(self.shards)  # checks the count
        if self.lease is not None and (isinstance(self.lease, bool) or not isinstance(self.lease, (int, float))
                                       or not self.lease > 0):
            raise InvalidPolicy(f"[replicas] lease must be a positive number of seconds or a duration such as "
                                f"'3s' (got {self.lease!r})")
        if self.name is not None and (not isinstance(self.name, str) or not GROUP_PATTERN.fullmatch(self.name)):
            raise InvalidPolicy("[replicas] name must be 1 to 64 letters, digits, '.', '_' or '-', starting with a "
                                f"letter or digit (got {self.name!r})")
        if self.group is not None:
            Shards(self.shards, self.group)  # checks the group

    def for_tick(self, tick: float) -> Replicas:
        """These settings for a driver beating every ``tick`` seconds: the lease resolved (3 s, or three
        ticks when the tick is longer); one shorter than two ticks is refused, since a lease must outlive a
        late renewal, or it changes hands between two beats of a live holder.

        Raises:
            InvalidPolicy: a lease below two ticks.
        """
        lease = self.lease if self.lease is not None else max(DEFAULT_LEASE, 3 * tick)
        if self.enabled and lease < 2 * tick:
            raise InvalidPolicy(f"[replicas] lease must be at least twice the tick ({lease:g} s < 2 x "
                                f"{tick:g} s): a holder renews it once a beat, and one late beat would lose it")
        return replace(self, lease=float(lease))

    @property
    def lease_seconds(self) -> float:
        """The lease, resolved for the default tick when it was not given."""
        return float(self.lease) if self.lease is not None else DEFAULT_LEASE


def default_name() -> str:
    """``<host>-<pid>``, with what a name may not hold replaced: unique per process on a host."""
    host = "".join(ch if ch.isalnum() or ch in "._-" else "-" for ch in socket.gethostname()) or "replica"
    return f"{host[:50]}-{os.getpid()}"


@dataclass(frozen=True)
class LeaseView:
    """What one beat's lease round trip saw, as :func:`plan_leases` needs it."""

    #: this replica's member id
    me: str
    #: the live members, this replica included, sorted
    members: tuple[str, ...]
    #: the shards this replica holds now
    mine: frozenset[int]
    #: every other shard -> its holder's member id (None: free)
    holders: Mapping[int, str | None]
    #: shards this replica saw free at its last beat too
    free_before: frozenset[int] = frozenset()
    #: shards whose holder had stopped renewing at this replica's last beat
    abandoned: frozenset[int] = frozenset()


@dataclass(frozen=True)
class LeaseMoves:
    """What a replica does after a round trip: the shards it tries to take, and those it gives back."""

    take: tuple[int, ...] = ()
    release: tuple[int, ...] = ()


def fair_share(shards: int, members: Sequence[str], me: str) -> int:
    """How many shards ``me`` holds when they are spread evenly: the first ``shards % len(members)``
    members (sorted) hold one more."""
    ranked = sorted(set(members) | {me})
    whole, extra = divmod(shards, len(ranked))
    return whole + (1 if ranked.index(me) < extra else 0)


def preference(member: str, shard: int) -> int:
    """How much ``member`` wants ``shard``: a rendezvous hash, so that members rank shards differently."""
    return zlib.crc32(f"{member}/{shard}".encode())


def plan_leases(view: LeaseView, shards: int) -> LeaseMoves:
    """What to take and what to give back after a round trip (pure).

    Take: free shards up to the fair share, best ranked first; and whatever
    the share, a free shard that was free at the last beat too, or whose
    holder had stopped renewing it. Give back: above the fair share, while
    another member holds less than its own, the worst ranked first.
    """
    target = fair_share(shards, view.members, view.me)
    free = sorted((shard for shard, holder in view.holders.items() if holder is None),
                  key=lambda shard: (-preference(view.me, shard), shard))
    take = free[:max(0, target - len(view.mine))]
    orphans = [shard for shard in free[len(take):] if shard in view.free_before or shard in view.abandoned]
    take += orphans
    if take:
        return LeaseMoves(take=tuple(take))
    surplus = len(view.mine) - target
    if surplus <= 0:
        return LeaseMoves()
    held_by: dict[str, int] = {}
    for holder in view.holders.values():
        if holder is not None:
            held_by[holder] = held_by.get(holder, 0) + 1
    wanting = sum(max(0, fair_share(shards, view.members, member) - held_by.get(member, 0))
                  for member in view.members if member != view.me)
    count = min(surplus, wanting)
    if count <= 0:
        return LeaseMoves()
    worst = sorted(view.mine, key=lambda shard: (preference(view.me, shard), shard))
    return LeaseMoves(release=tuple(worst[:count]))


@dataclass(frozen=True)
class Takeover:
    """A shard this replica took that another member held when it last looked.

    ``expired``: that member had stopped renewing it (dead, stuck, cut off) -- a takeover proper, what
    ``retain_lease_takeovers_total`` counts; False: it gave the shard back (a replica joined: a handover).
    """

    shard: int
    #: the member that held it
    previous: str
    expired: bool


@dataclass(frozen=True)
class LeaseChanges:
    """What a beat's lease round trips changed, for the report, the metrics and the log."""

    taken: tuple[int, ...] = ()
    takeovers: tuple[Takeover, ...] = ()
    lost: tuple[int, ...] = ()
    released: tuple[int, ...] = ()
    #: renewals that did not go through (the shard lost, or the command failed)
    renew_failures: int = 0
    #: what failed the beat's lease round trip whole (the server unreachable); None when it went through
    error: RetainError | None = None
    #: lease commands the beat sent, both round trips
    ops: int = 0


@dataclass
class _Held:
    token: int
    #: monotonic instant this replica stops touching the shard unless renewed
    until: float


@dataclass(frozen=True)
class _Seen:
    """Between a beat's round trip and its moves: what it saw, what it changed, who held what the beat before."""

    view: LeaseView
    changes: LeaseChanges
    previous_holders: Mapping[int, str | None]


class LeaseBook:
    """One replica's leases across beats: the commands of each beat and what their answers mean.

    A driver's beat owns it; :meth:`holds` and the fences it hands out may be asked from other threads
    (the archive job) at any time.
    """

    def __init__(self, shards: Shards, settings: Replicas, tick: float) -> None:
        self.shards, self.settings, self.tick = shards, settings, tick
        self.name = settings.name or default_name()
        #: this process's member id: its name and a nonce (two processes given one name stay two members)
        self.me = f"{self.name}~{uuid.uuid4().hex[:8]}"
        self.lease_ms = int(settings.lease_seconds * 1000)
        self._lock = threading.Lock()
        self._held: dict[int, _Held] = {}
        self._members: tuple[str, ...] = (self.me,)
        #: what the server's clock read, and this process's monotonic clock then (ms, seconds)
        self._server_at: tuple[float, float] | None = None
        self._holders: dict[int, str | None] = {}
        self._free_before: frozenset[int] = frozenset()
        #: other shards whose lease runs out before this replica's next beat -> when (monotonic)
        self._expiring: dict[int, float] = {}
        #: other shards whose holder stopped renewing, or is no member, at the last beat
        self._abandoned: frozenset[int] = frozenset()
        #: a lease's key -> its shard
        self._shard_of_lease = {shards.lease_key(shard): shard for shard in range(shards.count)}
        self._seen: _Seen | None = None
        self._fences: dict[int, Fence] = {}
        #: the shards the last round trip renewed (GETEX) rather than looked at (GET, PTTL)
        self._asked: frozenset[int] = frozenset()
        #: the per-shard commands of a round trip, made for the shards then held
        self._per_shard: tuple[frozenset[int], list[tuple[str, ...]]] | None = None

    # -- asked from any thread ------------------------------------------------------------------------

    @property
    def enabled(self) -> bool:
        return self.settings.enabled

    def holds(self, shard: int, now: float | None = None) -> bool:
        """True while this replica may touch ``shard``'s streams (always, with coordination off)."""
        if not self.enabled:
            return True
        with self._lock:
            held = self._held.get(shard)
        return held is not None and (time.monotonic() if now is None else now) < held.until

    def held(self, now: float | None = None) -> frozenset[int]:
        """The shards this replica may touch now (every shard, with coordination off)."""
        if not self.enabled:
            return frozenset(range(self.shards.count))
        moment = time.monotonic() if now is None else now
        with self._lock:
            return frozenset(shard for shard, held in self._held.items() if moment < held.until)

    @property
    def members(self) -> tuple[str, ...]:
        """The live members as the last round trip saw them (this replica included)."""
        with self._lock:
            return self._members

    def fence(self, shard: int) -> Fence | None:
        """The claim this replica's archive commits of ``shard`` carry; None with coordination off, or when
        the shard is not held."""
        if not self.enabled:
            return None
        from retain.archive import Fence  # only a beat that folds asks: the archive is loaded by then

        with self._lock:
            held = self._held.get(shard)
            if held is None:
                return None
            fence = self._fences.get(shard)
            if fence is None or fence.token != held.token:
                fence = self._fences[shard] = Fence(self.shards.fence_id(shard), held.token,
                                                    lambda: self.holds(shard))
            return fence

    def wake_in(self, now: float | None = None) -> float | None:
        """Seconds until another's lease runs out, when that comes before the next tick: the runner beats
        again right then, to take it over at once. None: nothing to wait for."""
        if not self.enabled or not self._expiring:
            return None
        moment = time.monotonic() if now is None else now
        soonest = min(self._expiring.values()) - moment
        # Never sooner than a fraction of a tick: a holder's membership can end a hair before its lease (it
        # scores it before Redis runs the renewal), and a beat woken too early looks again a little later.
        return max(self.tick / 50, soonest) if soonest < self.tick else None

    # -- one beat's round trips ----------------------------------------------------------------------

    def commands(self, now: float | None = None) -> list[tuple[str, ...]]:
        """The beat's first round trip: the server's time; this replica's membership renewed and every
        member's read with when its membership ends; a renewal of every lease held; who holds each other
        shard (one ``MGET`` on one server; a ``GET`` each on a cluster, whose keys live in different slots)."""
        lease = str(self.lease_ms)
        server_ms = self._server_ms(time.monotonic() if now is None else now)
        commands: list[tuple[str, ...]] = [
            ("TIME",),
            ("ZADD", self.shards.members_key, str(server_ms + self.lease_ms), self.me),
            ("PEXPIRE", self.shards.members_key, str(2 * self.lease_ms)),
            ("ZREMRANGEBYSCORE", self.shards.members_key, "-inf", f"({server_ms}"),
            ("ZRANGE", self.shards.members_key, "0", "-1", "WITHSCORES"),
        ]
        with self._lock:
            held = self._asked = frozenset(self._held)
        if self._per_shard is None or self._per_shard[0] != held:
            renewals = [("GETEX", self.shards.lease_key(shard), "PX", lease) for shard in sorted(held)]
            others = [self.shards.lease_key(shard) for shard in range(self.shards.count) if shard not in held]
            looks: list[tuple[str, ...]] = ([("GET", key) for key in others] if self.shards.cluster
                                           else [("MGET", *others)] if others else [])
            self._per_shard = (held, renewals + looks)  # the same every beat while the shards held are
        return commands + self._per_shard[1]

    def read(self, answers: Sequence[Any] | BaseException, sent_at: float,
             received_at: float | None = None) -> LeaseMoves:
        """Take in the first round trip's answers (or the error that failed it); what to do next.

        A member renews its membership and its leases in one round trip: when its membership ends is when
        its leases run out. A shard whose holder's membership ends before this replica's next beat is due a
        wake then; one whose holder is no member any more (gone) is taken as soon as it is free.
        """
        received = time.monotonic() if received_at is None else received_at
        error = as_retain_error(answers) if isinstance(answers, BaseException) else None
        asked = sorted(self._asked)
        others = [shard for shard in range(self.shards.count) if shard not in self._asked]
        if isinstance(answers, BaseException):
            answers = [answers] * (5 + len(asked) + len(others))
        self._read_time(answers[0], sent_at, received)
        ends = _membership_ends(answers[4])
        members = tuple(sorted(ends)) if ends is not None else self._members
        with self._lock:
            held = {shard: self._held[shard] for shard in asked if shard in self._held}
        until = sent_at + self.settings.lease_seconds * (1 - MARGIN)
        renewed, lost, holders, failures = self._renewals(held, asked, answers[5:5 + len(asked)], until)
        looked = answers[5 + len(asked):]
        values = looked if self.shards.cluster else (looked[0] if looked else [])
        if isinstance(values, BaseException):
            values = [values] * len(others)
        expiring, gone = self._looks(others, values, ends, holders, received)
        with self._lock:
            self._held = renewed
            if self.me not in members:
                members = tuple(sorted({*members, self.me}))
            self._members = members
        for shard in lost:
            log.warning("lease of shard %d lost (%s): this replica stops touching its streams", shard,
                        f"now held by {holders[shard]}" if holders.get(shard) else "it ran out")
        view = LeaseView(self.me, members, frozenset(renewed), holders, self._free_before, self._abandoned)
        self._seen = _Seen(view, LeaseChanges(lost=tuple(lost), renew_failures=failures, error=error),
                           self._holders)
        self._holders, self._expiring = holders, expiring
        # Whose holder had stopped renewing, or was gone, at this beat: the next one takes them once free.
        self._abandoned = frozenset(expiring) | gone
        self._free_before = frozenset(shard for shard, holder in holders.items() if holder is None)
        return plan_leases(view, self.shards.count)

    def _renewals(self, held: dict[int, _Held], asked: list[int], answers: Sequence[Any],
                  until: float) -> tuple[dict[int, _Held], list[int], dict[int, str | None], int]:
        """The renewal answers of the shards held: (still held, lost, who holds the lost ones, failed renewals).

        A renewal that failed keeps its shard until its time runs out; one answered by another holder loses it.
        """
        renewed: dict[int, _Held] = {}
        holders: dict[int, str | None] = {}
        lost: list[int] = []
        failures = 0
        for shard, answer in zip(asked, answers, strict=True):
            if shard not in held:
                continue
            if isinstance(answer, BaseException):
                failures += 1
                renewed[shard] = held[shard]  # not renewed: held until its time runs out
                continue
            owner = _owner(answer)
            if owner is not None and owner[1] == self.me:
                renewed[shard] = _Held(held[shard].token, until)
            else:
                failures += 1
                lost.append(shard)
                holders[shard] = owner[1] if owner is not None else None
        return renewed, lost, holders, failures

    def _looks(self, others: list[int], values: Sequence[Any], ends: dict[str, float] | None,
               holders: dict[int, str | None], received: float) -> tuple[dict[int, float], set[int]]:
        """The other shards' leases as read (``holders`` gets each one's holder): (the shards whose holder's
        membership ends before this replica's next beat, and when; the shards whose holder is gone)."""
        expiring: dict[int, float] = {}
        gone: set[int] = set()
        server_ms = self._server_ms(received)
        for shard, value in zip(others, values, strict=True):
            if isinstance(value, BaseException):
                continue  # unknown this beat: neither free nor another's
            owner = _owner(value)
            holders[shard] = holder = owner[1] if owner is not None else None
            if ends is None:
                continue
            if holder is None:
                # Free now, another's at the last look: its key ran out between two beats (a slow beat sees
                # only that) unless that member lives on and gave it back.
                previous = self._holders.get(shard)
                if previous is not None and previous != self.me and ends.get(previous, 0) <= server_ms:
                    gone.add(shard)
                continue
            end = ends.get(holder)
            if end is None:
                gone.add(shard)  # its holder is no member any more: taken once it is free, no wake for it
            elif end - server_ms < self.tick * 1000:
                expiring[shard] = received + max(0.0, end - server_ms) / 1000
        return expiring, gone

    def move_commands(self, moves: LeaseMoves, now: float | None = None) -> list[tuple[str, ...]]:
        """The second round trip, when there is something to take or give back: ``SET NX`` for each shard
        to take, ``DEL`` for each to give back that is still held (by this replica's clock)."""
        moment = time.monotonic() if now is None else now
        token = self._server_ms(moment) * 1000
        value = f"{token} {self.me}"
        commands: list[tuple[str, ...]] = [
            ("SET", self.shards.lease_key(shard), value, "NX", "PX", str(self.lease_ms)) for shard in moves.take]
        commands += [("DEL", self.shards.lease_key(shard)) for shard in moves.release if self.holds(shard, moment)]
        return commands

    def moved(self, commands: Sequence[tuple[str, ...]], answers: Sequence[Any] | BaseException,
              sent_at: float) -> LeaseChanges:
        """Take in the second round trip's answers (none when there was none to make); what the beat's lease
        work changed in all."""
        seen = self._seen
        changes = seen.changes if seen is not None else LeaseChanges()
        before: Mapping[int, str | None] = seen.previous_holders if seen is not None else {}
        abandoned = seen.view.abandoned if seen is not None else frozenset()
        if isinstance(answers, BaseException):
            answers = [answers] * len(commands)
        taken: list[int] = []
        takeovers: list[Takeover] = []
        released: list[int] = []
        with self._lock:
            for command, answer in zip(commands, answers, strict=True):
                shard = self._shard_of_lease[command[1]]
                if command[0] == "DEL":
                    self._held.pop(shard, None)
                    released.append(shard)
                elif not isinstance(answer, BaseException) and answer:  # else another took it first, or it failed
                    self._held[shard] = _Held(int(command[2].split(" ", 1)[0]),
                                              sent_at + self.settings.lease_seconds * (1 - MARGIN))
                    taken.append(shard)
                    previous = before.get(shard)
                    if previous is not None and previous != self.me:
                        # abandoned at the look before, or found run out at this beat's own look
                        takeovers.append(Takeover(shard, previous, shard in abandoned or shard in self._abandoned))
        self._free_before -= set(taken)
        self._expiring = {shard: at for shard, at in self._expiring.items() if shard not in taken}
        self._abandoned -= set(taken)
        looks = self.shards.count - len(self._asked) if self.shards.cluster else 1
        result = replace(changes, taken=tuple(taken), takeovers=tuple(takeovers), released=tuple(released),
                         ops=5 + len(self._asked) + looks + len(commands))
        self._log(result)
        return result

    def release_commands(self) -> list[tuple[str, ...]]:
        """What a replica that stops sends: its leases still held deleted, itself out of the members, so that
        the others take its shards at their next beat rather than a lease time later. Forgets them at once."""
        if not self.enabled:
            return []
        moment = time.monotonic()
        with self._lock:
            held = [shard for shard, lease in self._held.items() if moment < lease.until]
            self._held = {}
        commands: list[tuple[str, ...]] = [("DEL", self.shards.lease_key(shard)) for shard in sorted(held)]
        if held:
            log.info("gave back %s: this replica stops", _shards(held))
        return commands + [("ZREM", self.shards.members_key, self.me)]

    def _server_ms(self, now: float) -> int:
        """The server's clock now, in ms, as the last TIME read it; this host's clock before the first."""
        if self._server_at is None:
            return int(time.time() * 1000)
        server_ms, at = self._server_at
        return int(server_ms + (now - at) * 1000)

    def _read_time(self, answer: Any, sent_at: float, received_at: float) -> None:
        if isinstance(answer, BaseException) or not isinstance(answer, (list, tuple)) or len(answer) != 2:
            return
        seconds, micros = (int(part) for part in answer)
        self._server_at = (seconds * 1000 + micros / 1000, (sent_at + received_at) / 2)

    def _log(self, changes: LeaseChanges) -> None:
        """One line per kind of change a beat made: takeovers by previous holder, shards taken free or handed
        over, shards given back."""
        by_holder: dict[tuple[str, bool], list[int]] = {}
        for takeover in changes.takeovers:
            by_holder.setdefault((takeover.previous.split("~")[0], takeover.expired), []).append(takeover.shard)
        for (previous, expired), shards in sorted(by_holder.items()):
            if expired:
                log.warning("took over %s from %s: its lease ran out (it stopped renewing)",
                            _shards(shards), previous)
            else:
                log.info("took %s handed over by %s", _shards(shards), previous)
        fresh = sorted(set(changes.taken) - {takeover.shard for takeover in changes.takeovers})
        if fresh:
            log.info("took %s, free", _shards(fresh))
        if changes.released:
            log.info("gave back %s for the other replicas", _shards(sorted(changes.released)))


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@functools.lru_cache(maxsize=1024)
def _parsed_owner(value: bytes | str) -> tuple[int, str] | None:
    token, _, member = _text(value).partition(" ")
    return (int(token), member) if token.isdigit() and member else None


def _owner(value: Any) -> tuple[int, str] | None:
    """A lease's value as ``(token, member)``; None for no lease (or one no replica wrote). A lease's value
    stays the same while it is held: each is parsed once."""
    if value is None or isinstance(value, BaseException):
        return None
    return _parsed_owner(value)


def _membership_ends(answer: Any) -> dict[str, float] | None:
    """``ZRANGE ... WITHSCORES`` as member -> when its membership ends (server ms); None when it failed.

    RESP2 answers a flat list of members and scores; RESP3 a list of ``[member, score]`` pairs.
    """
    if isinstance(answer, BaseException) or not isinstance(answer, (list, tuple)):
        return None
    if answer and isinstance(answer[0], (list, tuple)):
        return {_text(member): float(score) for member, score in answer}
    return {_text(member): float(score) for member, score in zip(answer[::2], answer[1::2], strict=False)}


def _shards(shards: Sequence[int]) -> str:
    """``3 shards (0-1, 7)``: shard numbers for a log line."""
    return f"{len(shards)} shard{'' if len(shards) == 1 else 's'} ({_ranges(sorted(shards))})"


def _ranges(shards: Sequence[int]) -> str:
    """``0-3, 7, 9-10``: shard numbers for a log line."""
    parts: list[str] = []
    start = previous = None
    for shard in shards:
        if previous is not None and shard == previous + 1:
            previous = shard
            continue
        if start is not None:
            parts.append(f"{start}-{previous}" if previous != start else str(start))
        start = previous = shard
    if start is not None:
        parts.append(f"{start}-{previous}" if previous != start else str(start))
    return ", ".join(parts)
