"""Hypothesis strategies shared by the tests."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from hypothesis import strategies as st

from retain.ids import MAX_PART, StreamId
from retain.durations import UNITS

__all__ = ["aware_instants", "docd_paths", "duration_texts", "fold_trim_facts", "logd_keys", "logd_paths", "logd_scalars",
           "logd_values", "mount_tables", "retain_items", "retain_stamps", "stream_ids", "whole_second_durations"]


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
    zones = st.sampled_from([timezone.utc, timezone(timedelta(hours=2)), timezone(timedelta(hours=-5, minutes=-30))])
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
