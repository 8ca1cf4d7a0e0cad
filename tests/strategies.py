"""Hypothesis strategies shared by the tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from hypothesis import strategies as st

from retain.durations import UNITS
from retain.ids import MAX_PART, StreamId
from retain.wire import Or

__all__ = ["aware_instants", "docd_paths", "duration_texts", "fold_trim_facts", "logd_keys", "logd_paths", "logd_scalars",
           "logd_values", "mount_tables", "odd_stamps", "retain_items", "retain_scenes", "retain_stamps", "stream_ids",
           "whole_second_durations"]


@st.composite
def duration_texts(draw: st.DrawFn) -> tuple[str, timedelta]:
    """A well-formed duration string and the timedelta it means."""
    units = draw(st.lists(st.sampled_from(list(UNITS)), min_size=1, max_size=len(UNITS), unique=True))
    units.sort(key=list(UNITS).index)
    text, seconds = "", 0
    for unit in units:
        count = draw(st.integers(min_value=1, max_value=999))
        text += f"{count}{unit}"
        seconds += count * UNITS[unit]
    return text, timedelta(seconds=seconds)


whole_second_durations = st.integers(min_value=1, max_value=10**11).map(lambda s: timedelta(seconds=s))


# -- logd ---------------------------------------------------------------------------------------

logd_keys = st.text(alphabet="abcxyz019_-:@+~", min_size=1, max_size=8)


@st.composite
def logd_paths(draw: st.DrawFn):
    """A request path: names, keys and indexes, maybe a wildcard last."""
    from retain.logd.paths import Field, Index, Key, Path, Wild

    segments = [Field(draw(logd_keys))]
    for _ in range(draw(st.integers(0, 5))):
        segments.append(draw(st.one_of(logd_keys.map(Field), logd_keys.map(Key),
                                       st.integers(0, 10**6).map(Index))))
    if draw(st.booleans()):
        segments.append(Wild(draw(st.sampled_from(["field", "key", "index"]))))
    return Path(tuple(segments))


logd_scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6),
                         st.floats(allow_nan=False, allow_infinity=False, width=32), st.text(max_size=6))
logd_values = st.recursive(logd_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(logd_keys, inner, max_size=3)), max_leaves=12)


#: timezone-aware instants between 2000 and 2100, in assorted fixed offsets
aware_instants = st.builds(
    lambda naive, minutes: naive.replace(tzinfo=timezone(timedelta(minutes=minutes))),
    st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1)),
    st.integers(min_value=-14 * 60, max_value=14 * 60),
)


#: stream ids across the whole 0-0..2^64-1-2^64-1 space, weighted toward the edges where carries happen
_ID_PARTS = st.one_of(st.integers(0, 3), st.integers(MAX_PART - 3, MAX_PART), st.integers(0, MAX_PART))
stream_ids = st.builds(StreamId, _ID_PARTS, _ID_PARTS)


@st.composite
def fold_trim_facts(draw: st.DrawFn) -> tuple[StreamId | None, StreamId | None, int]:
    """What a fold-then-trim reads before it plans: (boundary, W, entries waiting after W up to the boundary).

    Consistent as a stream and its archive make them: entries wait only when the
    window drops something above W. No id is the very largest, which has no
    MINID past it (the server could not hold an entry above it either).
    """
    ids = stream_ids.filter(lambda entry_id: entry_id != StreamId(MAX_PART, MAX_PART))
    boundary = draw(st.none() | ids)
    watermark = draw(st.none() | ids | (st.just(boundary) if boundary is not None else st.nothing()))
    can_wait = boundary is not None and (watermark is None or watermark < boundary)
    waiting = draw(st.integers(0, 2_000)) if can_wait else 0
    return boundary, watermark, waiting


# -- logd retain ---------------------------------------------------------------------------------


def retain_stamps(now: datetime) -> st.SearchStrategy:
    """What a record may carry as its timestamp: RFC 3339 around ``now`` (past and future, any zone),
    an epoch, a date alone, junk, or nothing usable."""
    instants = st.integers(min_value=-3 * 365 * 86400, max_value=30 * 86400).map(
        lambda seconds: now - timedelta(seconds=seconds))
    zones = st.sampled_from([UTC, timezone(timedelta(hours=2)), timezone(timedelta(hours=-5, minutes=-30))])
    rfc3339 = st.builds(lambda instant, zone: instant.astimezone(zone).isoformat().replace("+00:00", "Z"),
                        instants, zones)
    return st.one_of(rfc3339, rfc3339, rfc3339, st.integers(0, 2 * 10**9), st.just("2026-09-01"),
                     st.text(max_size=4), st.none())


@st.composite
def retain_items(draw: st.DrawFn, now: datetime) -> list:
    """A container's items as ``(name, value)`` pairs: mostly records with a status and a timestamp."""
    names = draw(st.lists(logd_keys, max_size=30, unique=True))
    items = []
    for name in names:
        record = {}
        if draw(st.integers(0, 9)):
            record["updatedAt"] = draw(retain_stamps(now))
        if draw(st.integers(0, 9)):
            record["status"] = draw(st.sampled_from(["done", "canceled", "running", "failed"]))
        items.append((name, record if draw(st.integers(0, 19)) else draw(logd_scalars)))
    return items


_YEARS = [0, 1, 2, 999, 1900, 2000, 2024, 2026, 9999]
_FIELDS = {"month": [0, 1, 2, 4, 9, 12, 13], "day": [0, 1, 9, 28, 29, 30, 31, 32], "hour": [0, 7, 23, 24],
           "minute": [0, 59, 60], "second": [0, 9, 59, 60]}
_FRACTIONS = ["", "", ".", ".0", ".5", ".000001", ".999999", ".9999999", ".1234567890", ".\u0663"]
_ZONE_TEXTS = ["Z", "z", "+00:00", "-00:00", "+02:00", "-05:30", "+23:59", "-23:59", "+24:00", "+00:99", "+22:99",
               "+14:00", "", "+0100", "+01:00:00", " Z", "Z "]


def _rfc3339(local: datetime, sep: str, fraction: str, zone: str) -> str:
    return (f"{local.year:04d}-{local.month:02d}-{local.day:02d}{sep}{local.hour:02d}:{local.minute:02d}:"
            f"{local.second:02d}{fraction}{zone}")


@st.composite
def odd_stamps(draw: st.DrawFn, around: datetime) -> object:
    """What a record may carry where a timestamp belongs, weighted to the edges of RFC 3339: instants at and
    a microsecond either side of ``around`` in any zone, fraction length and case; dates and times built
    field by field past their ranges (02-29, 24:00, :60, year 0, +24:00, +00:99); and junk."""
    kind = draw(st.integers(0, 9))
    if kind < 5:  # an instant near ``around`` written as RFC 3339 allows it, and as it does not
        instant = around + timedelta(microseconds=draw(st.sampled_from([0, 1, -1, 10, -999999, 1000000, -86400000000])))
        minutes = draw(st.sampled_from([0, 0, 1, -1, 120, -330, 23 * 60 + 59, -(23 * 60 + 59), 14 * 60]))
        local = instant.astimezone(timezone(timedelta(minutes=minutes)))
        digits = draw(st.integers(0, 9))
        fraction = "" if digits == 0 else "." + (f"{local.microsecond:06d}" + draw(st.text("0123456789", min_size=3,
                                                                                              max_size=3)))[:digits]
        if minutes == 0 and draw(st.booleans()):
            zone = draw(st.sampled_from(["Z", "z", "+00:00", "-00:00"]))
        else:
            sign, offset = ("-", -minutes) if minutes < 0 else ("+", minutes)
            zone = f"{sign}{offset // 60:02d}:{offset % 60:02d}"
        return _rfc3339(local, draw(st.sampled_from(["T", "T", "t"])), fraction, zone)
    if kind < 8:  # field by field, past the ranges; as often in the common shape (T, whole seconds, Z) as not
        fields = {name: draw(st.sampled_from(values)) for name, values in _FIELDS.items()}
        common = draw(st.booleans())
        text = (f"{draw(st.sampled_from(_YEARS)):04d}-{fields['month']:02d}-{fields['day']:02d}"
                f"{'T' if common else draw(st.sampled_from(['T', 't', ' ']))}{fields['hour']:02d}:"
                f"{fields['minute']:02d}:{fields['second']:02d}")
        if common:
            return text + "Z"
        return text + draw(st.sampled_from(_FRACTIONS)) + draw(st.sampled_from(_ZONE_TEXTS))
    return draw(st.one_of(st.none(), st.integers(-2, 2 * 10**9), st.floats(allow_nan=False, allow_infinity=False),
                          st.booleans(), st.just("2026-09-01"), st.just("2026-09-11T08:00:00"),
                          st.just("\u0662026-09-11T08:00:00Z"), st.text(max_size=22)))


_STATUSES = ["done", "canceled", "running", "[]", "{}", "1"]
_MATCH_SCALARS = st.one_of(st.sampled_from(_STATUSES), st.sampled_from([0, 1, 2, 1.0, 0.5, True, False, None]))


@st.composite
def _retain_value(draw: st.DrawFn, around: datetime) -> object:
    """An item: mostly a record with a stamp, a status of any kind and a nested map, sometimes a scalar."""
    if not draw(st.integers(0, 12)):
        return draw(st.one_of(st.integers(0, 3), st.text(max_size=3), st.lists(st.integers(0, 2), max_size=2)))
    record: dict = {}
    if draw(st.integers(0, 9)):
        record["updatedAt"] = draw(odd_stamps(around))
    if draw(st.integers(0, 4)):
        record["status"] = draw(st.one_of(_MATCH_SCALARS, st.just({"s": "done"}), st.just(["done"])))
    if draw(st.booleans()):
        record["timing"] = {"at": draw(odd_stamps(around)), "kind": draw(st.sampled_from(["a", "b"]))}
    if not draw(st.integers(0, 3)):
        record["tags"] = draw(st.lists(st.sampled_from([1, "x", None]), max_size=2))
    return record


_RULE_AGES = [".updatedAt", ".updatedAt", ".timing.at"]
_MATCHES = st.one_of(
    st.none(),
    st.fixed_dictionaries({"status": _MATCH_SCALARS}),
    st.lists(_MATCH_SCALARS, min_size=1, max_size=3).map(lambda alternatives: {"status": Or(tuple(alternatives))}),
    st.just({"timing": {"kind": "a"}}), st.just({"timing": {}}), st.just({"status": {"s": "done"}}),
    st.just({"status": Or(({"s": "done"}, "done"))}), st.just({"a b": 1}), st.just({"status": ["done"]}),
    st.just({"status": 2 ** 60}),
)


@st.composite
def retain_scenes(draw: st.DrawFn, now: datetime) -> dict:
    """A store to age and a rule to age it by: a map (``jobs``) or a keyed array (``events``) of items
    written in the baseline, maybe overlaid by a scope (sets, deletes) that the baseline then writes under,
    maybe with maps kept as leaves by a ``!raw`` rule since dropped; and the rule's request body."""
    from retain.durations import parse

    after = draw(st.sampled_from(["1s", "1h", "1d", "2w", "1y", "3000y"]))
    try:
        around = now - parse(after)  # the stamps crowd the cutoff, where one microsecond decides
    except OverflowError:
        around = now
    keyed = draw(st.booleans())
    names = draw(st.lists(logd_keys, min_size=1, max_size=14, unique=True))
    values = {name: draw(_retain_value(around)) for name in names}
    if keyed:
        values = {name: value for name, value in values.items() if isinstance(value, dict)}
    scoped = draw(st.booleans())
    scope_sets = {name: draw(_retain_value(around)) for name in draw(st.lists(st.sampled_from(names), max_size=4))}
    scope_deletes = draw(st.lists(st.sampled_from(names), max_size=3, unique=True))
    baseline_later = {name: draw(_retain_value(around)) for name in draw(st.lists(st.sampled_from(names), max_size=3))}
    if keyed:
        scope_sets = {name: value for name, value in scope_sets.items() if isinstance(value, dict)}
        baseline_later = {name: value for name, value in baseline_later.items() if isinstance(value, dict)}
    match = draw(_MATCHES)
    age = draw(st.sampled_from(_RULE_AGES))
    if match is not None and "timing" in match and age == ".timing.at" and match["timing"] == {}:
        match = None  # that match tests the map holding the age field whole: the request refuses it
    rule = {"path": "events(*)" if keyed else "jobs.*", "age": age, "after": after}
    if match is not None:
        rule["match"] = match
    return {"keyed": keyed, "values": values, "scoped": scoped and bool(names), "scope_sets": scope_sets,
            "scope_deletes": scope_deletes, "baseline_later": baseline_later, "raw_dropped": draw(st.booleans()),
            "rule": rule}


# -- docd ---------------------------------------------------------------------------------------

_MOUNT_NAMES = st.sampled_from(["verse", "ctl", "ci", "runs", "jobs", "a"])


@st.composite
def mount_tables(draw: st.DrawFn):
    """A valid mount table: up to four mounts of short name paths, none holding another."""
    from retain.docd.mounts import Mount, MountTable
    from retain.logd.paths import Field, Path

    mounts: list[Mount] = []
    for port in range(draw(st.integers(0, 4))):
        path = Path(tuple(Field(name) for name in draw(st.lists(_MOUNT_NAMES, min_size=1, max_size=3))))
        if str(path) != "logd" and not any(path.startswith(m.path) or m.path.startswith(path) for m in mounts):
            mounts.append(Mount(path, ("127.0.0.1", 7500 + port)))
    return MountTable(tuple(mounts), ("127.0.0.1", 7420))


@st.composite
def docd_paths(draw: st.DrawFn):
    """A request path over the names mount tables use, so that it often meets a mount: maybe keyed, maybe wild."""
    from retain.logd.paths import Field, Key, Path, Wild

    segments = [Field(name) for name in draw(st.lists(_MOUNT_NAMES, min_size=1, max_size=4))]
    if draw(st.booleans()):
        segments.append(Key(draw(logd_keys)))
    if draw(st.booleans()):
        segments.append(Wild(draw(st.sampled_from(["field", "key"]))))
    return Path(tuple(segments))
