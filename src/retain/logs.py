"""How retain's daemons log: one line per event, as text for a terminal or as JSON for a log pipeline.

Every part logs with the standard :mod:`logging` module, to loggers named
``retain.<part>``; the fields that matter travel as ``extra`` (``stream``,
``removed``, ``watermark``, ``error``, ``code`` ...). :func:`configure_logging`
decides how they are written, once, for the whole process:

- ``text`` (the default): ``2026-09-12 08:00:00,123 INFO retain.daemon: beat at ...``;
- ``json``: one JSON object per line, by python-json-logger (a maintained formatter,
  not a hand-written one)::

      {"time": "2026-09-12T08:00:00.123+00:00", "level": "INFO", "logger": "retain.daemon",
       "event": "beat at ...: removed 120 entries in 3 trims", "removed": 120, "trims": 3}

Example:
    >>> configure_logging("json")
    >>> logging.getLogger("retain.daemon").info("trimmed", extra={"stream": "emq:{q}:stream:s", "removed": 3})
"""

from __future__ import annotations

import logging
import sys
from datetime import UTC, datetime
from typing import IO, Any

from pythonjsonlogger.json import JsonFormatter

__all__ = ["LOG_FORMATS", "configure_logging"]

#: the values of a daemon's ``--log-format``
LOG_FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class _Json(JsonFormatter):
    """python-json-logger's formatter with retain's names: time (RFC 3339, UTC), level, logger, event."""

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:  # noqa: N802 (logging's name)
        return datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")


def configure_logging(fmt: str = "text", *, level: int = logging.INFO, stream: IO[str] | None = None) -> None:
    """Send every log record of this process to ``stream`` (stderr), one line each, in ``fmt``.

    Raises:
        ValueError: ``fmt`` is not one of :data:`LOG_FORMATS`.
    """
    if fmt not in LOG_FORMATS:
        raise ValueError(f"a log format is one of {', '.join(LOG_FORMATS)} (got {fmt!r})")
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    formatter: logging.Formatter
    if fmt == "json":
        formatter = _Json("%(asctime)s %(levelname)s %(name)s %(message)s",
                          rename_fields={"asctime": "time", "levelname": "level", "name": "logger",
                                         "message": "event"},
                          json_default=_plain)
    else:
        formatter = logging.Formatter(TEXT_FORMAT)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)


def _plain(value: Any) -> Any:
    """What JSON cannot carry as it is (a stream id, an exception, a datetime) is written as its text."""
    return str(value)
