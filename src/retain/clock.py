"""Time as retain reads and writes it: the one clock, and RFC 3339 both ways (pure but for :func:`utc_now`).

- :func:`utc_now` is the real clock. Only an entry point that owns the clock
  calls it (a driver's default ``clock=``, a CLI command, a server answering a
  request that names no ``now``); everything below takes ``now`` as a parameter.
- :func:`parse_rfc3339` reads a date-time strictly, as the retain request demands of a
  record's timestamp: a ``T`` between date and time, seconds, an optional
  fraction and a zone (``Z`` or ``+HH:MM``). An epoch number, a date alone or a
  time without a zone is not a time and gives None.
- :func:`format_rfc3339` writes an instant in UTC with a ``Z``.

Example:
    >>> parse_rfc3339("2026-09-12T10:00:00+02:00")
    datetime.datetime(2026, 9, 12, 10, 0, tzinfo=datetime.timezone(datetime.timedelta(seconds=7200)))
    >>> format_rfc3339(datetime(2026, 9, 12, 8, tzinfo=timezone.utc))
    '2026-09-12T08:00:00Z'
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

__all__ = ["format_rfc3339", "parse_rfc3339", "utc_now"]

# RFC 3339 date-time, strictly: ASCII digits only, seconds required, a zone required.
_RFC3339 = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?"
                      r"(?:[Zz]|[+-][0-9]{2}:[0-9]{2})", re.ASCII)


def utc_now() -> datetime:
    """The real clock: the current time in UTC, timezone-aware."""
    return datetime.now(UTC)


def parse_rfc3339(text: object) -> datetime | None:
    """An RFC 3339 date-time as an aware datetime, or None when ``text`` is not one.

    Strict: a number, a date alone, a time without a zone, a leap second ``:60``,
    an impossible date or a zone past ±23:59 give None. Fractions beyond
    microseconds are truncated.
    """
    if type(text) is not str or _RFC3339.fullmatch(text) is None:
        return None
    if text[-1] in "Zz":
        text = text[:-1] + "+00:00"
    try:
        instant = datetime.fromisoformat(text)  # the regex has fixed the shape; this checks the values
        instant.astimezone(UTC)  # a zone that pushes the instant out of range is no instant
    except (ValueError, OverflowError):
        return None
    return instant


def format_rfc3339(instant: datetime, *, timespec: str = "auto") -> str:
    """``instant`` (timezone-aware) in UTC with a ``Z``: ``2026-09-12T08:00:00Z``."""
    return instant.astimezone(UTC).isoformat(timespec=timespec).replace("+00:00", "Z")
