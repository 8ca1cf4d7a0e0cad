"""A retain rule's item test in SQLite's SQL: the selection and a batch's guard, with no item read into Python.

:func:`compile_test` turns an :class:`~retain.logd.storage.ItemTest` into SQL over one
item record, given as two SQL expressions: its key and its value (the JSON of its leaf
children). The SQLite backend puts them in two statements: the selection, which classifies
every item of a container, and a batch's guarded tombstones. The SQL must give the pure
Python answer exactly (a Hypothesis test runs both over the same containers), so each part
says which Python it restates:

- **the timestamp** (:func:`~retain.logd.retain_rules.timestamp_at`): the value at ``age``.
  Its first names walk down map records (a map child is a record of its own) -- or, in a
  store written before a ``!raw`` rule was dropped, into a map kept as a leaf; the last name
  is a leaf of the record reached. A missing step, a list or a scalar on the way is missing.
- **RFC 3339** (:func:`retain.clock.parse_rfc3339`): the regular expression restated with
  ``GLOB``, then the values ``datetime.fromisoformat`` checks -- month 1-12, a day the month
  has (leap years), hour <= 23, minute and second <= 59 (no ``:60``), year >= 1, an offset
  whose ``HH * 60 + MM`` is under 24 hours (``+00:99`` is 1h39m, as Python reads it) -- and an
  instant in UTC inside years 1-9999. The instant is computed in microseconds, the fraction
  truncated (not rounded) to six digits, and compared with the cutoff in microseconds: the
  same ``<=`` Python does on datetimes. The common stamp (``2026-09-12T08:00:00Z``: upper-case,
  UTC, whole seconds) takes a shorter road to the same answer: it is canonical and valid exactly
  when SQLite, recomputing its date, prints it back unchanged, and then text order is time order.
- **match** (:func:`~retain.logd.match.matches`): a string equals a JSON string, a number a
  JSON number (never a bool: SQLite's ``json_extract`` says 1 for ``true``, ``json_type``
  tells them apart), ``true``/``false``/``null`` their JSON types; a map pattern holds of a
  map record (or a leaf map) having every named field; ``!or`` of its alternatives.

What this SQL does not say, :func:`compile_test` refuses (None: the caller selects in
Python): a list pattern (a list may be a leaf or a keyed array's records), a number whose
magnitude passes 2**53 or that is not finite (float and integer equality stop agreeing
there), and, inside a nested map pattern, a field name outside the key grammar (``a b``: no
record has one, but a map kept as a leaf may, and a JSON path cannot say every name).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from retain.logd.paths import is_key
from retain.logd.storage import SEP, ItemTest
from retain.wire import Or

__all__ = ["CompiledTest", "compile_test", "cutoff_params"]

_EXACT = 2 ** 53  # past it a float no longer holds every integer: Python and SQLite compare differently
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICRO = timedelta(microseconds=1)
_FIRST_US = (datetime(1, 1, 1, tzinfo=UTC) - _EPOCH) // _MICRO
_LAST_US = (datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC) - _EPOCH) // _MICRO
_CANONICAL = "%Y-%m-%dT%H:%M:%SZ"


class _Unsupported(Exception):
    """Part of a test this SQL does not say."""


@dataclass
class _Builder:
    """SQL text built with named parameters (``:p0``, ``:p1``, ...) for one item test."""

    scope: int
    prefix: str = "p"
    params: dict[str, Any] = field(default_factory=dict)

    def bind(self, value: Any) -> str:
        name = f"{self.prefix}{len(self.params)}"
        self.params[name] = value
        return ":" + name

    def record_value(self, key: str) -> str:
        """The value of the newest visible version of the record at the SQL key expression ``key``: NULL
        when there is none, it is a tombstone or a keyed array (only a map record has a value)."""
        scopes = "scope = 0" if self.scope == 0 else f"scope IN (0, {self.scope})"
        return (f"(SELECT value FROM nodes WHERE {scopes} AND key = {key} AND rev <= :at "
                "ORDER BY scope DESC, rev DESC LIMIT 1)")

    def child(self, key: str, name: str) -> str:
        return f"({key} || {self.bind(SEP + name)})"


@dataclass(frozen=True, slots=True)
class CompiledTest:
    """An item test as SQL over one item, given its key and value expressions (the backend names them).

    ``stamp`` is the value at ``age`` (text for a string) and ``matches`` the match; :meth:`classify` takes
    the SQL name the stamp is bound to. Every parameter they use is in ``params``; the backend binds ``:at``
    (the commit read at) and, for :meth:`classify`, :func:`cutoff_params`. ``flat``: the test reads only
    leaves of the item's own record (one name of age, a match of scalars), so that a version of the item
    record decides it whole.
    """

    stamp: str
    matches: str
    params: dict[str, Any]
    flat: bool

    def classify(self, s: str, unreadable: str = "'u'", expired: str = "'x'", kept: str = "NULL") -> str:
        """``unreadable`` for an unreadable item, ``expired`` for an expired one, ``kept`` for one kept (SQL
        values; by default ``'u'``, ``'x'`` and NULL): the decision of :func:`~retain.logd.retain_rules.select`.
        The canonical stamp is decided first, in one call.

        Every mention of ``s`` costs the backend a copy of the text (a column of a subquery) or a look-up in a
        parsed value (an expression), some thousand instructions either way, so the common road names it as
        few times as it can: no ``typeof`` (a number, NULL or JSON text never has the canonical shape, and fails
        :func:`_readable` too); a young stamp is kept once compared with the cutoff, and only an old one is
        asked for its year and the match (``:cutoff_text`` is above every canonical stamp of year 0, which is
        unreadable)."""
        return (f"(CASE WHEN {_canonical(s)} THEN (CASE WHEN {s} > :cutoff_text THEN {kept} "
                f"WHEN {s} < '0001' THEN {unreadable} WHEN {self.matches} THEN {expired} ELSE {kept} END) "
                f"WHEN {_readable(s)} THEN (CASE WHEN {_instant_us(s)} <= :cutoff_us AND {self.matches} THEN {expired} "
                f"ELSE {kept} END) ELSE {unreadable} END)")

    def instant(self, s: str) -> str:
        """The instant of the stamp ``s`` in microseconds since the epoch, NULL when it is unreadable: what
        :meth:`classify` compares with a cutoff, worked out without one (a store keeps it per record for a test it
        has seen: :mod:`retain.logd.sqlite_heads`). ``<= :cutoff_us`` over it decides as :meth:`classify` does: a
        canonical stamp has whole seconds, so its text order against ``:cutoff_text`` is this order."""
        # A canonical stamp SQLite reads as it is (``Z`` included): the seconds at once, no offset to take off.
        return (f"(CASE WHEN {_canonical(s)} THEN (CASE WHEN {s} < '0001' THEN NULL ELSE "
                f"CAST(strftime('%s', {s}) AS INTEGER) * 1000000 END) WHEN {_readable(s)} THEN {_instant_us(s)} END)")

    def guard(self, read: str) -> str:
        """The precondition of one item: the stamp is the text ``read`` (a readable stamp, so no number,
        map or list is equal to it) and the match holds."""
        return f"({self.stamp} = {read} AND {self.matches})"


def compile_test(test: ItemTest, scope: int, key: str, value: str, *, prefix: str = "p") -> CompiledTest | None:
    """``test`` over the item whose key is the SQL expression ``key`` and value ``value``, in ``scope``'s
    view (0: the baseline); None when this SQL cannot say it exactly (see the module docstring). Its
    parameters are named ``prefix`` and a number."""
    build = _Builder(scope, prefix)
    try:
        stamp = _stamp(build, test.age, key, value)
        matches = "1" if test.match is None else _record_matches(build, test.match, key, value)
    except _Unsupported:
        return None
    flat = len(test.age) == 1 and all(_scalars(pattern) for pattern in (test.match or {}).values())
    return CompiledTest(stamp, matches, build.params, flat)


def _scalars(pattern: Any) -> bool:
    """A scalar, or !or of scalars: what only a leaf can match."""
    if isinstance(pattern, Or):
        return all(_scalars(alternative) for alternative in pattern.alternatives)
    return not isinstance(pattern, (Mapping, list))


def cutoff_params(cutoff: datetime | None) -> dict[str, Any]:
    """``:cutoff_us`` and ``:cutoff_text`` for a cutoff; None (nothing expires) binds what no stamp passes --
    ``:cutoff_text`` then between the canonical stamps of year 0 and those of year 1."""
    if cutoff is None:
        return {"cutoff_us": _FIRST_US - 1, "cutoff_text": "0000~"}
    # A canonical stamp has whole seconds: t <= cutoff  <=>  t <= the cutoff's whole second, as text.
    w = cutoff.astimezone(UTC)
    text = f"{w.year:04d}-{w.month:02d}-{w.day:02d}T{w.hour:02d}:{w.minute:02d}:{w.second:02d}Z"
    return {"cutoff_us": (cutoff - _EPOCH) // _MICRO, "cutoff_text": text}


# -- the timestamp ----------------------------------------------------------------------------------


def _path(names: tuple[str, ...] | list[str]) -> str:
    return "$" + "".join(f'."{name}"' for name in names)


def _stamp(build: _Builder, age: tuple[str, ...], key: str, value: str) -> str:
    """The value at ``age`` below the record (``key``, ``value``): JSON's value, which is text for a string."""
    if len(age) == 1:
        return f"json_extract({value}, {build.bind(_path(age))})"
    first = build.bind(_path(age[:1]))
    inside = build.bind(_path(age))
    child = build.child(key, age[0])
    # A map is a record of its own; a leaf map only where a !raw rule once kept one.
    return (f"(CASE WHEN json_type({value}, {first}) = 'object' THEN json_extract({value}, {inside}) "
            f"ELSE {_stamp(build, age[1:], child, build.record_value(child))} END)")


# -- RFC 3339 ------------------------------------------------------------------------------------


def _canonical(s: str) -> str:
    """``s`` is a canonical UTC stamp of whole seconds and a valid date (year 0 included: the caller asks for
    ``>= '0001'``): SQLite, made to recompute the date (``+0 seconds``, which turns 02-30 into 03-02 and 24:00
    into the next day), prints it back as it was. A number is never equal to the text printed."""
    return f"strftime('{_CANONICAL}', {s}, '+0 seconds') = {s}"


_SHAPE = "[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9][Tt][0-9][0-9]:[0-9][0-9]:[0-9][0-9]*"


def _fraction_ok(fraction: str) -> str:
    """'' or '.' and one or more ASCII digits."""
    return f"({fraction} = '' OR ({fraction} GLOB '.[0-9]*' AND substr({fraction}, 2) NOT GLOB '*[^0-9]*'))"


def _fraction(s: str) -> str:
    """The fraction of a stamp whose zone is ``Z`` (one character) or an offset (six)."""
    return f"substr({s}, 20, length({s}) - CASE WHEN {s} GLOB '*[Zz]' THEN 20 ELSE 25 END)"


def _offset_minutes(s: str) -> str:
    """The zone's offset east in minutes, HH * 60 + MM as Python adds them (0 for ``Z``)."""
    return (f"(CASE WHEN {s} GLOB '*[Zz]' THEN 0 ELSE (CASE WHEN substr({s}, -6, 1) = '-' THEN -1 ELSE 1 END) * "
            f"(CAST(substr({s}, -5, 2) AS INTEGER) * 60 + CAST(substr({s}, -2) AS INTEGER)) END)")


def _readable(s: str) -> str:
    """The whole of :func:`retain.clock.parse_rfc3339` over the text ``s``."""
    year, month, day = (f"CAST(substr({s}, {start}, {width}) AS INTEGER)" for start, width in ((1, 4), (6, 2), (9, 2)))
    leap = f"({year} % 4 = 0 AND ({year} % 100 <> 0 OR {year} % 400 = 0))"
    days = (f"CASE {month} WHEN 2 THEN 28 + {leap} WHEN 4 THEN 30 WHEN 6 THEN 30 WHEN 9 THEN 30 WHEN 11 THEN 30 "
            "ELSE 31 END")
    zone = f"({s} GLOB '*[Zz]' OR {s} GLOB '*[+-][0-9][0-9]:[0-9][0-9]')"
    return (f"{s} GLOB '{_SHAPE}' AND {zone} AND {_fraction_ok(_fraction(s))} "
            f"AND {year} >= 1 AND {month} BETWEEN 1 AND 12 AND {day} BETWEEN 1 AND {days} "
            f"AND CAST(substr({s}, 12, 2) AS INTEGER) <= 23 AND CAST(substr({s}, 15, 2) AS INTEGER) <= 59 "
            f"AND CAST(substr({s}, 18, 2) AS INTEGER) <= 59 AND abs({_offset_minutes(s)}) < 1440 "
            f"AND {_instant_us(s)} BETWEEN {_FIRST_US} AND {_LAST_US}")


def _instant_us(s: str) -> str:
    """The instant of a readable stamp in microseconds since the epoch, the fraction truncated."""
    # strftime('%s'), not unixepoch(): SQLite before 3.38 (Ubuntu 22.04's 3.37) has no unixepoch.
    local = f"CAST(strftime('%s', substr({s}, 1, 10) || ' ' || substr({s}, 12, 8)) AS INTEGER)"
    micros = f"CAST(substr(substr({_fraction(s)}, 2) || '000000', 1, 6) AS INTEGER)"
    return f"(({local} - 60 * {_offset_minutes(s)}) * 1000000 + {micros})"


# -- match ---------------------------------------------------------------------------------------


def _record_matches(build: _Builder, pattern: Mapping[str, Any], key: str, value: str) -> str:
    """A map pattern over the map record (``key``, ``value``): every named field there and matching."""
    terms = [_field_matches(build, sub, key, value, name) for name, sub in pattern.items()]
    return "(" + " AND ".join(terms) + ")" if terms else "1"


def _field_matches(build: _Builder, pattern: Any, key: str, value: str, name: str) -> str:
    """``pattern`` over the child ``name`` of a map record: a leaf in its value or a record of its own."""
    if not is_key(name):
        return "0"  # every child of a record is named by the key grammar: there is no such field
    if isinstance(pattern, Or):
        if all(type(alternative) is str for alternative in pattern.alternatives):
            return _strings(build, pattern.alternatives, value, build.bind(_path([name])))
        return _any(_field_matches(build, alternative, key, value, name) for alternative in pattern.alternatives)
    path = build.bind(_path([name]))
    if isinstance(pattern, Mapping):
        child = build.child(key, name)
        record = build.record_value(child)
        # A map is a record of its own; a leaf map only where a !raw rule once kept one.
        return (f"(({record} IS NOT NULL AND {_record_matches(build, pattern, child, record)}) OR "
                f"(json_type({value}, {path}) = 'object' AND {_json_matches(build, pattern, value, [name])}))")
    return _scalar(build, pattern, value, path)


def _json_matches(build: _Builder, pattern: Any, value: str, names: list[str]) -> str:
    """``pattern`` over the JSON at ``names`` inside a record's value (a map kept as a leaf)."""
    if isinstance(pattern, Or):
        return _any(_json_matches(build, alternative, value, names) for alternative in pattern.alternatives)
    if isinstance(pattern, Mapping):
        terms = []
        for name, sub in pattern.items():
            if not is_key(name):
                raise _Unsupported(name)  # inside a leaf map any name may stand; a JSON path cannot say all
            inner = [*names, name]
            if isinstance(sub, Mapping):
                terms.append(f"(json_type({value}, {build.bind(_path(inner))}) = 'object' AND "
                             f"{_json_matches(build, sub, value, inner)})")
            else:
                terms.append(_json_matches(build, sub, value, inner))
        return "(" + " AND ".join(terms) + ")" if terms else "1"
    return _scalar(build, pattern, value, build.bind(_path(names)))


def _scalar(build: _Builder, pattern: Any, value: str, path: str) -> str:
    """A scalar pattern equals the JSON value at ``path``: same JSON type, same value.

    ``json_extract`` gives text for a string, a number for a number, 1 and 0 for true and false, NULL for
    null and the JSON text of a map or list; SQLite never finds a text equal to a number. So equality says
    it all but where ``json_type`` must: a string pattern that reads as JSON text, 1 and 0 (not true, false).
    """
    if isinstance(pattern, str):
        return _strings(build, (pattern,), value, path)
    if isinstance(pattern, bool):
        return f"(json_type({value}, {path}) = '{'true' if pattern else 'false'}')"
    if pattern is None:
        return f"(json_type({value}, {path}) = 'null')"
    if isinstance(pattern, (int, float)):
        if not math.isfinite(pattern) or abs(pattern) > _EXACT:
            raise _Unsupported(pattern)
        equal = f"json_extract({value}, {path}) = {build.bind(pattern)}"
        return f"({equal} AND json_type({value}, {path}) IN ('integer', 'real'))" if pattern in (0, 1) else equal
    raise _Unsupported(pattern)  # a list: a leaf array or a keyed array's records, told apart only by reading


def _strings(build: _Builder, patterns: tuple[Any, ...], value: str, path: str) -> str:
    """The JSON value at ``path`` is a string equal to one of ``patterns``."""
    equal = f"json_extract({value}, {path}) IN ({', '.join(build.bind(pattern) for pattern in patterns)})"
    if any(pattern[:1] in ("[", "{") for pattern in patterns):  # the JSON text of a map or a list could equal it
        return f"({equal} AND json_type({value}, {path}) = 'text')"
    return equal


def _any(terms: Any) -> str:
    return "(" + " OR ".join(terms) + ")"
