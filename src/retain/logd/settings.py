"""The store's settings: ``storage.readBudget``, ``storage.synchronous``, ``storage.retainIndexes``, ``compaction.*``.

Durations are :class:`datetime.timedelta`; :meth:`Settings.from_options` reads the
written forms (``1h``, ``30d``, ``1h:1d`` for a tier, ``forever``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta

from retain import _fields, durations
from retain._fields import Where
from retain.errors import InvalidSettings
from retain.logd.sqlite import SYNCHRONOUS

__all__ = ["DEFAULT_TIERS", "Settings", "Tier"]


@dataclass(frozen=True, slots=True)
class Tier:
    """Keep the last commit of every ``every``-long era for ``keep`` (None: for ever)."""

    every: timedelta
    keep: timedelta | None

    @classmethod
    def parse(cls, text: str) -> Tier:
        """``EVERY:KEEP`` such as ``1h:1d`` or ``30d:forever``."""
        every, sep, keep = text.partition(":")
        if not sep:
            raise InvalidSettings(f"a tier is EVERY:KEEP such as 1h:1d or 30d:forever (got {text!r})")
        return cls(durations.parse(every), None if keep == "forever" else durations.parse(keep))

    def __str__(self) -> str:
        keep = "forever" if self.keep is None else durations.format(self.keep)
        return f"{durations.format(self.every)}:{keep}"


DEFAULT_TIERS = (Tier(timedelta(hours=1), timedelta(days=1)), Tier(timedelta(days=1), timedelta(days=30)),
                 Tier(timedelta(days=30), None))


@dataclass(frozen=True, slots=True)
class Settings:
    """How much one read may touch, how hard a commit is flushed, how history is folded.

    - ``read_budget`` (``storage.readBudget``): the most records one read may assemble;
    - ``synchronous`` (``storage.synchronous``): SQLite's flush level; ``full`` survives power loss,
      ``normal`` survives a killed process;
    - ``retain_indexes`` (``storage.retainIndexes``): whether a SQLite store keeps a heads index for each
      retain rule a pass ran (:mod:`retain.logd.sqlite_heads`): its passes about three times cheaper, every
      version written into its container paying the rule's test (some microseconds); off, it keeps none and
      drops any it kept;
    - ``cutoff`` (``compaction.cutoff``): commits younger than this keep their delta and are all readable;
    - ``tiers`` (``compaction.tiers``): which older commits stay readable as root snapshots; each
      tier's ``every`` a multiple of the one before, each ``keep`` longer;
    - ``horizon`` (``compaction.horizon``): when set, no history older than this survives;
    - ``max_patch_ops`` (``limits.patchOps``), ``max_retain_rules`` (``limits.retainRules``),
      ``max_path_length`` (``limits.pathLength``, in characters): the most one request may ask, so that
      its cost is bounded before it runs (:mod:`retain.logd.request_bounds`);
    - ``max_scopes`` (``limits.scopes``): the most live scopes in the store; ``max_scopes_per_token``
      (``limits.scopesPerToken``): the most live scopes one token has made through this store
      (:meth:`~retain.logd.Store.session`).
    """

    read_budget: int = 100_000
    synchronous: str = "full"
    retain_indexes: bool = True
    cutoff: timedelta = timedelta(hours=1)
    tiers: tuple[Tier, ...] = field(default=DEFAULT_TIERS)
    horizon: timedelta | None = None
    max_patch_ops: int = 10_000
    max_retain_rules: int = 1_000
    max_path_length: int = 1_024
    max_scopes: int = 1_000
    max_scopes_per_token: int = 100

    def __post_init__(self) -> None:
        _fields.whole_number(self.read_budget, "storage.readBudget", Where("", InvalidSettings), minimum=1)
        for name, value in (("limits.patchOps", self.max_patch_ops), ("limits.retainRules", self.max_retain_rules),
                            ("limits.pathLength", self.max_path_length), ("limits.scopes", self.max_scopes),
                            ("limits.scopesPerToken", self.max_scopes_per_token)):
            _fields.whole_number(value, name, Where("", InvalidSettings), minimum=1)
        if not isinstance(self.retain_indexes, bool):
            raise InvalidSettings(f"storage.retainIndexes must be true or false (got {self.retain_indexes!r})")
        if self.synchronous not in SYNCHRONOUS:
            raise InvalidSettings(f"storage.synchronous must be one of {', '.join(SYNCHRONOUS)} "
                                  f"(got {self.synchronous!r})")
        if not isinstance(self.cutoff, timedelta) or self.cutoff < timedelta(0):
            raise InvalidSettings(f"compaction.cutoff must be a duration >= 0 (got {self.cutoff!r})")
        if self.horizon is not None and (not isinstance(self.horizon, timedelta) or self.horizon < self.cutoff):
            raise InvalidSettings(f"compaction.horizon must be a duration no shorter than compaction.cutoff "
                                  f"({self.cutoff}) (got {self.horizon!r})")
        previous: Tier | None = None
        for tier in self.tiers:
            if tier.every <= timedelta(0) or (tier.keep is not None and tier.keep < tier.every):
                raise InvalidSettings(f"tier {tier}: every must be positive and keep at least one era")
            if previous is not None:
                if tier.every % previous.every:
                    raise InvalidSettings(f"tier {tier}: every must be a multiple of the tier before ({previous}) "
                                          "so that eras nest")
                if previous.keep is None or (tier.keep is not None and tier.keep <= previous.keep):
                    raise InvalidSettings(f"tier {tier}: keep must be longer than the tier before ({previous})")
            previous = tier

    @classmethod
    def from_options(cls, *, read_budget: int | None = None, synchronous: str | None = None,
                     cutoff: str | None = None, tiers: Sequence[str] = (), horizon: str | None = None,
                     retain_indexes: bool | None = None) -> Settings:
        """Settings from their written forms; anything not given keeps its default."""
        given: dict[str, object] = {}
        if retain_indexes is not None:
            given["retain_indexes"] = retain_indexes
        if read_budget is not None:
            given["read_budget"] = read_budget
        if synchronous is not None:
            given["synchronous"] = synchronous
        if cutoff is not None:
            given["cutoff"] = timedelta(0) if cutoff == "0" else durations.parse(cutoff)
        if tiers:
            given["tiers"] = tuple(Tier.parse(text) for text in tiers)
        if horizon is not None:
            given["horizon"] = durations.parse(horizon)
        return cls(**given)  # type: ignore[arg-type]
