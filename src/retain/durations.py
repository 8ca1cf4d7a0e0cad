"""Durations as retention limits are written: ``30s``, ``90m``, ``1h``, ``1d``, ``2w``, ``1y6w``.

The grammar, strict on purpose so that a typo is an error and not a surprise:

- one or more *components*, each a decimal integer followed by a unit;
- units: ``s`` second, ``m`` minute, ``h`` hour, ``d`` = 24h, ``w`` = 7d,
  ``y`` = 365d. Calendar-blind: a day is always 86 400 seconds, a year 365 days;
- components appear largest unit first, each unit at most once
  (``1d12h`` yes; ``12h1d`` and ``1h1h`` no);
- no whitespace, no sign, no fraction, no leading zero (``01h``), no zero
  component (``1d0h``): every component says something;
- the total is positive and fits a :class:`datetime.timedelta`.

Example:
    >>> parse("1d12h")
    datetime.timedelta(days=1, seconds=43200)
    >>> format(parse("90m"))
    '1h30m'
"""

from __future__ import annotations

import re
from datetime import timedelta
from fractions import Fraction

from retain.errors import InvalidDuration

__all__ = ["UNITS", "format", "parse"]

#: seconds per unit, largest first: the order components must appear in.
UNITS: dict[str, int] = {"y": 365 * 86400, "w": 7 * 86400, "d": 86400, "h": 3600, "m": 60, "s": 1}

_COMPONENT = re.compile(r"([1-9][0-9]{0,11})([a-zA-Z])")
_MAX_LENGTH = 64


def parse(text: str) -> timedelta:
    """Parse a duration such as ``1y6w`` into a positive :class:`timedelta`.

    Raises:
        InvalidDuration: naming the input and what was expected.
    """
    if not isinstance(text, str):
        raise InvalidDuration(f"a duration must be a string such as '1h' or '7d' (got {text!r})")
    if not text or len(text) > _MAX_LENGTH:
        raise InvalidDuration(f"a duration must be 1 to {_MAX_LENGTH} characters such as '1h' (got {text!r})")
    seconds, position, last_rank = 0, 0, -1
    ranks = list(UNITS)
    while position < len(text):
        found = _COMPONENT.match(text, position)
        if found is None:
            raise InvalidDuration(_explain(text, position))
        number, unit = found.groups()
        if unit not in UNITS:
            raise InvalidDuration(
                f"unknown unit {unit!r} in duration {text!r}: expected one of {', '.join(UNITS)}"
            )
        rank = ranks.index(unit)
        if rank <= last_rank:
            raise InvalidDuration(
                f"unit {unit!r} out of place in duration {text!r}: "
                "each unit at most once, largest first (y w d h m s), as in '1d12h'"
            )
        last_rank = rank
        seconds += int(number) * UNITS[unit]
        position = found.end()
    try:
        return timedelta(seconds=seconds)
    except OverflowError:
        raise InvalidDuration(f"duration {text!r} is too long to represent") from None


def format(duration: timedelta) -> str:
    """Write a positive whole-second :class:`timedelta` in the canonical form ``parse`` reads.

    Raises:
        InvalidDuration: for zero, negative or fractional-second durations.
    """
    if not isinstance(duration, timedelta):
        raise InvalidDuration(f"expected a datetime.timedelta (got {duration!r})")
    if duration <= timedelta(0) or duration.microseconds:
        raise InvalidDuration(f"only positive whole-second durations can be written (got {duration!r})")
    remaining = int(duration.total_seconds())
    parts = []
    for unit, size in UNITS.items():
        count, remaining = divmod(remaining, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts)


def _whole(rest: str) -> str:
    """The refusal of a fraction (``1.5h``), with the same span in a smaller unit when one holds it whole (``90m``).

    ``1.5s`` has none: seconds are the smallest unit; a field that also takes a number of seconds says so.
    """
    found = re.match(r"(\d+)[.,](\d+)([a-z]?)", rest)
    if found is None or found[3] not in UNITS:
        return "no fractions: durations are whole numbers of a unit (y w d h m s)"
    number, unit = Fraction(f"{found[1]}.{found[2]}"), found[3]
    for smaller in list(UNITS)[list(UNITS).index(unit) + 1:]:
        whole = number * UNITS[unit] / UNITS[smaller]
        if whole.denominator == 1:
            return f"no fractions: write {whole}{smaller} rather than {found[0]}"
    return f"no fractions: {found[0]} is no whole number of seconds, the smallest unit"


def _explain(text: str, position: int) -> str:
    rest = text[position:]
    digits = len(rest) - len(rest.lstrip("0123456789"))
    after = rest[digits:digits + 1]
    if rest[0] in "+-":
        why = "no sign: durations are positive"
    elif rest[0] == "0":
        why = "no zero components or leading zeros"
    elif rest[0].isspace() or after.isspace():
        why = "whitespace is not allowed"
    elif after in (".", ","):
        why = _whole(rest)
    elif digits > 12:
        why = "a number is at most 12 digits"
    elif digits:
        why = "a number must be followed by a unit (y w d h m s)"
    else:
        why = "expected a number followed by a unit (y w d h m s); there is no millisecond unit"
    return f"invalid duration {text!r} at position {position} ({rest[:8]!r}): {why}"
