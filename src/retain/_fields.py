"""Checking fields: of the TOML files retain reads, of wire requests, of constructor options.

One function per kind of field, so that each kind of refusal has one wording
wherever it is met, and says where, what was wrong and what was expected:

    retain.toml: [[stream]] #2 (queue 'q', name 's'): field 'approx': must be true or false (got 1)
    retain.toml: [archive]: unknown field 'endpont': expected one of url, endpoint, region, ...
    tick: must be a positive number of seconds such as 1.0, or a duration such as '5s' (got 0)

A :class:`Where` renders the start of a message and carries the error class
its part raises (``InvalidPolicy``, ``InvalidMounts``, ``InvalidRetain``, ...);
the functions take a table (a TOML table or a request body, a mapping) and a
field name, or, for a value not in a table, the name to show.
"""

from __future__ import annotations

import math
import re
import reprlib
import urllib.parse
from collections.abc import Iterable, Mapping
from datetime import timedelta
from typing import Any, NoReturn

from retain import durations
from retain.errors import InvalidInput

__all__ = ["MAX_COUNT", "PERCENT_ENCODING", "QUOTE_CHARS", "Where", "boolean", "count", "duration", "quoted",
           "redacted_url", "redis_url_problem", "refuse_unknown", "seconds", "string", "whole_number"]

#: the largest count Redis (and a Parquet int64) holds: 2^63-1; a larger one passes nothing but fails every beat
MAX_COUNT = 2**63 - 1
#: the most characters of a refused value a refusal quotes: a 4 MiB value is not echoed back
QUOTE_CHARS = 64
_SHORT = reprlib.Repr()
_SHORT.maxstring, _SHORT.maxother = QUOTE_CHARS + 2, QUOTE_CHARS


def quoted(value: Any) -> str:
    """``repr(value)``, or its first :data:`QUOTE_CHARS` characters and "…" when longer; a big value is never
    written out whole to be cut (a string is cut before its repr, a collection's repr stops early)."""
    if isinstance(value, (str, bytes)) and len(value) > QUOTE_CHARS:
        return repr(value[:QUOTE_CHARS])[:QUOTE_CHARS] + "…"
    text = _SHORT.repr(value)
    return text if len(text) <= QUOTE_CHARS else text[:QUOTE_CHARS] + "…"


class Where:
    """Where a check is: ``p.toml``, ``p.toml: [[stream]] #2 (key 'k')``, ``p.toml: [archive]``, or a
    name alone (``tick``); and the error class its refusals are raised as."""

    def __init__(self, text: str, error: type[InvalidInput]) -> None:
        self.text, self.error = text, error

    def entry(self, kind: str, number: int, label: str = "") -> Where:
        """The ``number``-th (from 1) ``[[kind]]`` table: ``p.toml: [[stream]] #2 (key 'k')``."""
        return Where(f"{self.text}: [[{kind}]] #{number}{f' ({label})' if label else ''}", self.error)

    def table(self, name: str) -> Where:
        """The ``[name]`` table: ``p.toml: [archive]``."""
        return Where(f"{self.text}: [{name}]", self.error)

    def field(self, name: str) -> str:
        """The start of a message about one field: ``p.toml: field 'tick'``."""
        return f"{self.text}: field {name!r}" if self.text else name

    def refuse(self, name: str, expected: str, value: Any) -> NoReturn:
        """Raise ``error``: field ``name`` must be ``expected`` (got ``value``)."""
        raise self.error(f"{self.field(name)}: must be {expected} (got {quoted(value)})")

    def __str__(self) -> str:
        return self.text


def refuse_unknown(table: Mapping[str, Any], known: Iterable[str], where: Where) -> None:
    """Refuse a field of ``table`` outside ``known``: a typo is an error, never a setting silently left out."""
    known = tuple(known)
    unknown = [str(name) for name in table if name not in known]
    if unknown:
        expected = f"expected one of {', '.join(known)}" if known else "it takes no fields"
        raise where.error(f"{where}: unknown field {unknown[0]!r}: {expected}")


def string(table: Mapping[str, Any], name: str, where: Where, default: str | None = None) -> str | None:
    """The string at ``name`` (``default`` when absent)."""
    value = table.get(name, default)
    if value is not None and not isinstance(value, str):
        where.refuse(name, "a string", value)
    return value


def boolean(table: Mapping[str, Any], name: str, where: Where, default: bool) -> bool:
    """The boolean at ``name`` (``default`` when absent); 1 and "yes" are not booleans."""
    value = table.get(name, default)
    if not isinstance(value, bool):
        where.refuse(name, "true or false", value)
    return value


def whole_number(value: Any, name: str, where: Where, *, minimum: int = 0, maximum: int | None = None) -> int:
    """``value`` as a whole number from ``minimum`` (to ``maximum``); a bool or a float is refused."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum or \
            (maximum is not None and value > maximum):
        bound = f">= {minimum}" if maximum is None else f"from {minimum} to {maximum}"
        where.refuse(name, f"a whole number {bound}", value)
    return value


def count(value: Any, name: str, where: Where, *, minimum: int = 0) -> int:
    """A whole number from ``minimum`` that a server and the archive can hold: at most :data:`MAX_COUNT`."""
    number = whole_number(value, name, where, minimum=minimum)
    if number > MAX_COUNT:
        raise where.error(f"{where.field(name)}: must be at most 2^63-1 = {MAX_COUNT}, the largest count Redis "
                          f"takes (got {number})")
    return number


def redacted_url(url: str) -> str:
    """``url`` with its password, if any, written ``***``: what a message, a log or a repr may show.

    The credentials are everything before the last ``@`` of the part after ``://``, whatever it holds: a
    password with an unescaped ``/``, ``#`` or ``[`` is hidden too, though no URL parser reads it as one.
    A ``?sentinel_password=`` is hidden the same way.
    """
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    credentials, at, after = rest.rpartition("@")
    if at and ":" in credentials:
        rest = f"{credentials.partition(':')[0]}:***@{after}"
    return f"{scheme}://" + _PASSWORD_PARAMETER.sub(r"\1***", rest)


_PASSWORD_PARAMETER = re.compile(r"((?:^|[?&])[^=&]*password=)[^&#]*")

#: how a user name or password says what a URL reserves: shown with every refusal of a malformed URL
PERCENT_ENCODING = ("percent-encode special characters in the user name and password "
                    "(@ as %40, : as %3A, / as %2F, ? as %3F, # as %23, [ as %5B, ] as %5D, % as %25)")


def redis_url_problem(url: str) -> str | None:
    """Why ``url`` cannot be read as a Redis URL's parts (None when it can), without echoing any of it.

    The checks a URL parser makes: brackets that are no IPv6 address, a port that is no number, an ``@``
    after the host (a password holding an unescaped ``/``, ``?`` or ``#`` ends the host early).
    """
    try:
        parts = urllib.parse.urlsplit(url)
        if "," not in parts.netloc:  # a Sentinel URL lists HOST:PORT,HOST:PORT: its own parser reads them
            parts.port  # noqa: B018 - raises ValueError on a port that is no number in 0-65535
    except ValueError:
        return "its host, port or password cannot be read"
    if "@" in parts.path + parts.query + parts.fragment:
        return "an @ follows the host: the password holds a /, ? or # that ends the host early"
    return None


def seconds(value: Any, name: str, where: Where, *, example: str = "1.0", duration_example: str = "5s") -> float:
    """A positive span of time: a number of seconds, or a duration string (:mod:`retain.durations`)."""
    if isinstance(value, str):
        try:
            return duration(value, name, where).total_seconds()
        except InvalidInput as exc:
            if "smallest unit" not in str(exc):
                raise
            # "1.5s": this field also takes a number of seconds, which may have a fraction
            raise where.error(f"{exc}; or write the number of seconds: {name} = {value[:-1]}") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        where.refuse(name, f"a positive number of seconds such as {example}, or a duration such as "
                           f"'{duration_example}'", value)
    return float(value)


def duration(value: Any, name: str, where: Where) -> timedelta:
    """A positive duration written as :mod:`retain.durations` reads it (``1h``, ``7d``, ``1y6w``)."""
    try:
        return durations.parse(value)
    except InvalidInput as exc:
        raise where.error(f"{where.field(name)}: {exc}") from exc
