"""The TOML policy file the retention daemon runs: where Redis is, the beat, one table per stream.

    url = "redis://127.0.0.1:6379/0"   # optional; --url overrides it
    cluster = false                     # optional; true for a Redis Cluster
    tick = 1.0                          # optional; seconds, or a duration such as "5s"
    prefix = "emq"                      # optional; the key prefix for queue/name streams
    archive = "file:///var/lib/retain"  # needed by archive = true entries; or an [archive] table

    [[stream]]
    queue = "codemojex"
    name = "activity"
    maxlen = 10000                      # at least one of maxlen, max_age, min_id, max_bytes;
    max_bytes = "64MiB"                 #   several may be combined: the strictest wins
    approx = true                       # optional; false trims exactly (=)
    archive = true                      # optional; fold what the window drops before trimming

    [[stream]]
    queue = "codemojex"
    name = "jobs"
    maxlen = 10000
    protect = "pending"                 # optional; or "undelivered": cap the trim at what groups need...
    max_lag = "1h"                      # ...within this (a duration, or a count): required with protect

    [[stream]]
    key = "legacy:feed"                 # a raw key instead of queue + name
    max_age = "7d"

    [[stream]]
    pattern = "emq:{*}:stream:*"        # every stream whose key matches (SCAN MATCH ... TYPE stream);
    maxlen = 100000                     #   an explicit entry for a stream overrides the pattern
    rescan = "1m"                       # optional; how often to look for new streams

    [replicas]                          # optional: several daemons on this file share its streams
    shards = 64                         # optional; the streams split into this many shards
    lease = "3s"                        # optional; a dead replica's shards are taken over after this
    name = "host-a"                     # optional; how logs and metrics name this replica (host-pid)
    group = "orders"                    # optional; the replicas' shared name (derived from the file)
    enabled = true                      # optional; false: this daemon trims every stream, no lease

The ``[archive]`` table form takes ``url`` and, for ``s3://``, ``endpoint``,
``region``, ``access_key_id``, ``secret_access_key``, ``session_token`` and
``allow_http``; ``min_entries`` (the driver's ``fold_min_entries``); ``deadline``
(seconds or a duration such as ``"10s"``: how long a beat waits for its archive
work before the archived streams fail the beat, 10 s by default); and the
archive's maintenance: ``maintain_every`` (a duration, or false for never by
itself), ``max_age`` (rows older than that expire), ``log_retention``,
``vacuum_retention`` and ``target_file_entries``. A ``[[stream]]`` with
``archive = true`` may set ``archive_max_age``, its own ``max_age``.

Every field is checked before anything connects; a bad file is refused with
:class:`~retain.errors.InvalidPolicy` naming the file, the ``[[stream]]`` entry
(numbered from 1) or ``[archive]``, and the field. Unknown fields are refused
too: a typo such as ``max_len`` is an error, not a stream left unbounded. An
archive that no entry uses is refused as well: it most likely means entries
that were meant to fold first and would not. ``docs/policy.md`` describes every field.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import date, datetime, timedelta
from functools import partial
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypeVar

from retain import _fields, _toml
from retain._fields import Where
from retain.clock import parse_rfc3339, utc_now
from retain.errors import InvalidArchive, InvalidInput, InvalidPolicy
from retain.retention.groups import PROTECT_MODES, Protect
from retain.retention.leases import Replicas
from retain.retention.patterns import DEFAULT_RESCAN, StreamPattern
from retain.retention.policy import Policy, StreamPolicy, archive_key_problem
from retain.retention.shards import DEFAULT_SHARDS
from retain.streams.keys import DEFAULT_PREFIX, RawKey, StreamRef, stream_key
from retain.windows import Limits, MaxAge, MaxBytes, MaxLen, MinId

if TYPE_CHECKING:
    # Only for annotations: the archive (pyarrow, deltalake) is loaded by open_archive.
    from retain.archive import Archive, MaintenanceSettings

__all__ = ["DEFAULT_TICK", "ArchiveSettings", "PolicyFile", "check_policy", "load_policy", "parse_policy"]

DEFAULT_TICK = 1.0
URL_SCHEMES = ("redis", "rediss", "unix", "redis+sentinel", "rediss+sentinel")
TOP_FIELDS = ("url", "cluster", "tick", "prefix", "archive", "replicas", "stream")
#: how replicas of the policy share its streams (retain.retention.Replicas takes them)
REPLICAS_FIELDS = ("enabled", "shards", "lease", "name", "group")
STREAM_FIELDS = ("queue", "name", "key", "prefix", "maxlen", "max_age", "min_id", "allow_future", "max_bytes",
                 "bytes_samples", "approx", "archive", "archive_max_age", "protect", "max_lag")
WINDOW_FIELDS = ("maxlen", "max_age", "min_id", "max_bytes")
#: a pattern entry: a key glob instead of a stream, and how often to look for its streams again
PATTERN_FIELDS = ("pattern", "rescan", *WINDOW_FIELDS, "allow_future", "bytes_samples", "approx", "archive",
                  "protect", "max_lag")
#: the options of an s3:// archive a policy file may give (retain.archive.Archive takes them as they are)
S3_FIELDS = ("endpoint", "region", "access_key_id", "secret_access_key", "session_token", "allow_http")
#: the archive's maintenance (retain.archive.MaintenanceSettings takes them)
MAINTENANCE_FIELDS = ("maintain_every", "max_age", "log_retention", "vacuum_retention", "target_file_entries")
ARCHIVE_FIELDS = ("url", *S3_FIELDS, "min_entries", "deadline", *MAINTENANCE_FIELDS)
#: seconds a beat waits for its archive work (the driver's ``archive_deadline``)
DEFAULT_ARCHIVE_DEADLINE = 10.0
#: archive URL schemes a daemon may fold into: a path without a scheme is a local directory
ARCHIVE_SCHEMES = ("", "file", "s3", "s3a")

T = TypeVar("T")


@dataclass(frozen=True)
class ArchiveSettings:
    """Where a policy file's archived streams fold to: checked, not yet opened (see :meth:`PolicyFile.open_archive`)."""

    #: a directory, ``file:///path`` or ``s3://bucket/prefix``
    url: str
    #: the options of an s3:// archive, as :class:`retain.archive.Archive` takes them (never shown: credentials)
    options: Mapping[str, str | bool] = field(default_factory=lambda: MappingProxyType({}), repr=False)
    #: the driver's ``fold_min_entries``
    min_entries: int = 1
    #: the driver's ``archive_deadline``: seconds a beat waits for its archive work
    deadline: float = DEFAULT_ARCHIVE_DEADLINE
    #: how often the driver maintains the archive (None: never by itself)
    maintain_every: timedelta | None = timedelta(minutes=5)
    #: rows older than this expire from every archived stream (None: never)
    max_age: timedelta | None = None
    #: stream key -> its own max_age (``archive_max_age`` of a [[stream]])
    max_age_by: Mapping[str, timedelta] = field(default_factory=lambda: MappingProxyType({}))
    log_retention: timedelta = timedelta(minutes=5)
    vacuum_retention: timedelta = timedelta(minutes=1)
    target_file_entries: int = 1_000_000


@dataclass(frozen=True)
class PolicyFile:
    """A policy file, read and checked: the policy and how to run it.

    Its repr shows the Redis URL with the password written ``***``.
    """

    #: where it was read from, for messages: a path or ``<string>``
    source: str
    policy: Policy
    tick: float = DEFAULT_TICK
    url: str | None = None
    cluster: bool = False
    #: the archive that entries with ``archive = true`` fold into; None when no entry archives
    archive: ArchiveSettings | None = None
    #: how several daemons on this file share its streams (``[replicas]``; on by default)
    replicas: Replicas = field(default_factory=Replicas)

    def __repr__(self) -> str:
        url = None if self.url is None else _fields.redacted_url(self.url)
        return (f"PolicyFile(source={self.source!r}, policy={self.policy!r}, tick={self.tick!r}, url={url!r}, "
                f"cluster={self.cluster!r}, archive={self.archive!r}, replicas={self.replicas!r})")

    @property
    def fold_min_entries(self) -> int:
        """The driver's ``fold_min_entries``: the archive's ``min_entries``, else 1."""
        return self.archive.min_entries if self.archive is not None else 1

    @property
    def archive_deadline(self) -> float:
        """The driver's ``archive_deadline``: the archive's ``deadline``, else its default."""
        return self.archive.deadline if self.archive is not None else DEFAULT_ARCHIVE_DEADLINE

    def maintenance(self) -> MaintenanceSettings | None:
        """How the driver maintains the file's archive (:class:`retain.archive.MaintenanceSettings`); None without one.

        Loads :mod:`retain.archive` only when the file names an archive.

        Raises:
            InvalidPolicy: settings that cannot hold together, naming the file.
        """
        if self.archive is None:
            return None
        from retain.archive import MaintenanceSettings

        settings = self.archive
        try:
            return MaintenanceSettings(every=settings.maintain_every, target_file_entries=settings.target_file_entries,
                                       log_retention=settings.log_retention,
                                       vacuum_retention=settings.vacuum_retention, max_age=settings.max_age,
                                       max_age_by=settings.max_age_by)
        except InvalidArchive as exc:
            raise InvalidPolicy(f"{self.source}: [archive]: {exc}") from exc

    def open_archive(self) -> Archive | None:
        """The file's archive, opened (a local directory is made if missing); None when it names none.

        Loads :mod:`retain.archive` only when the file names an archive.

        Raises:
            InvalidPolicy: the store refuses the URL or an option, naming the file and the field.
            ArchiveError: the archive cannot be opened (a directory that cannot be made).
        """
        if self.archive is None:
            return None
        # Lazy for start-up cost only: pyarrow and obstore load when the file names an archive.
        from retain.archive import Archive

        try:
            return Archive(self.archive.url, **self.archive.options)
        except InvalidArchive as exc:
            raise InvalidPolicy(f"{self.source}: field 'archive': {exc}") from exc


def load_policy(path: str | Path) -> PolicyFile:
    """Read and check the policy file at ``path``.

    Raises:
        InvalidPolicy: the file cannot be read, is not TOML, or a field is wrong;
            the message names the file, the entry and the field.
    """
    text = _toml.read(path, "policy", InvalidPolicy)
    return parse_policy(text, source=str(path))


def parse_policy(text: str, source: str = "<string>") -> PolicyFile:
    """Check the TOML ``text`` of a policy file; ``source`` names it in messages.

    Example:
        >>> parse_policy('[[stream]]\\nqueue = "q"\\nname = "s"\\nmaxlen = 100').policy.entries[0].window
        MaxLen(count=100, approx=True)
    """
    document = _toml.decode(text, source, InvalidPolicy)
    where = Where(source, InvalidPolicy)
    _fields.refuse_unknown(document, TOP_FIELDS, where)
    prefix = _fields.string(document, "prefix", where, default=DEFAULT_PREFIX)
    assert prefix is not None  # a default was given
    _checked(lambda: _PROBES["prefix"](prefix), where, "prefix")
    tables = document.get("stream")
    if not isinstance(tables, list) or not tables or not all(isinstance(t, dict) for t in tables):
        raise InvalidPolicy(f"{source}: declares no streams: add one [[stream]] table per stream "
                            "(queue and name, or key; and maxlen, max_age, min_id or max_bytes)")
    archive = _archive(document, where)
    entries, patterns, ages = _declared(tables, prefix, archive is not None, where)
    if archive is not None and not any(entry.archive for entry in entries) and \
            not any(pattern.archive for pattern in patterns):
        raise InvalidPolicy(f"{where.field('archive')}: no [[stream]] sets archive = true, so nothing would be "
                            "folded: set archive = true on each stream that must fold before its trim, "
                            "or remove the archive")
    if archive is not None and ages:
        archive = replace(archive, max_age_by=MappingProxyType(ages))
    tick = _tick(document, where)
    return PolicyFile(source=source, policy=Policy([*entries, *patterns]), tick=tick,
                      url=_url(document, where), cluster=_fields.boolean(document, "cluster", where, default=False),
                      archive=archive, replicas=_replicas(document, tick, where))


def _declared(tables: list[dict[str, Any]], prefix: str, archived: bool,
              where: Where) -> tuple[list[StreamPolicy], list[StreamPattern], dict[str, timedelta]]:
    """The ``[[stream]]`` tables: (the streams, the patterns, each archived stream's archive_max_age); one window
    per stream and per pattern, and ``archive = true`` only with an archive to fold into (``archived``)."""
    entries: list[StreamPolicy] = []
    patterns: list[StreamPattern] = []
    seen: dict[str, int] = {}
    ages: dict[str, timedelta] = {}
    for number, table in enumerate(tables, start=1):
        here = where.entry("stream", number, _label(table))
        if "pattern" in table:
            pattern = _pattern_entry(table, here)
            if pattern.pattern in seen:
                raise InvalidPolicy(f"{here}: repeats the pattern of [[stream]] #{seen[pattern.pattern]}: "
                                    "one window per pattern")
            if pattern.archive and not archived:
                raise InvalidPolicy(f"{here.field('archive')}: true needs an archive to fold into: "
                                    'add archive = "file:///var/lib/retain" at the top of the file')
            seen[pattern.pattern] = number
            patterns.append(pattern)
            continue
        entry = _declared_stream(table, prefix, here, ages)
        if entry.key in seen:
            raise InvalidPolicy(f"{here}: repeats the stream of [[stream]] #{seen[entry.key]}: one window per stream")
        if entry.archive and not archived:
            raise InvalidPolicy(f"{here.field('archive')}: true needs an archive to fold into: "
                                'add archive = "file:///var/lib/retain" (or an [archive] table) at the top of the file')
        seen[entry.key] = number
        entries.append(entry)
    return entries, patterns, ages


def _declared_stream(table: dict[str, Any], prefix: str, here: Where, ages: dict[str, timedelta]) -> StreamPolicy:
    """One stream's ``[[stream]]`` table (not a pattern's); its archive_max_age goes into ``ages``."""
    if "rescan" in table:
        raise InvalidPolicy(f"{here.field('rescan')}: applies to a pattern entry only: it is how often the "
                            "streams matching it are looked for again")
    entry = _stream_entry(table, prefix, here)
    if "archive_max_age" in table:
        if not entry.archive:
            raise InvalidPolicy(f"{here.field('archive_max_age')}: applies to a stream with archive = true: "
                                "it is how long the archive keeps its rows")
        ages[entry.key] = _fields.duration(table["archive_max_age"], "archive_max_age", here)
    return entry


def check_policy(text: str, source: str = "<string>") -> tuple[str, ...]:
    """Every problem of a policy file's TOML ``text``, each worded as :func:`parse_policy` refuses it; () if none.

    Pure: nothing connects and no archive is opened. Each top-level field and each
    ``[[stream]]`` table is checked on its own, so one bad entry does not hide the
    next; what holds across entries (a repeated stream, ``archive = true`` without
    an archive, an archive nothing uses) and the archive's maintenance settings are
    checked once every part is good on its own.

    Example:
        >>> check_policy('[[stream]]\\nqueue = "q"\\nname = "s"\\nmax_len = 1', "p.toml")
        ("p.toml: [[stream]] #1 (queue 'q', name 's'): unknown field 'max_len': expected one of ...",)
    """
    try:
        document = _toml.decode(text, source, InvalidPolicy)
    except InvalidPolicy as exc:
        return (str(exc),)
    where = Where(source, InvalidPolicy)
    problems: list[str] = []

    def check(part: Callable[[], object]) -> None:
        try:
            part()
        except InvalidPolicy as exc:
            problems.append(str(exc))

    check(lambda: _fields.refuse_unknown(document, TOP_FIELDS, where))
    prefix = DEFAULT_PREFIX
    try:
        prefix = _fields.string(document, "prefix", where, default=DEFAULT_PREFIX) or DEFAULT_PREFIX
        _checked(lambda: _PROBES["prefix"](prefix), where, "prefix")
    except InvalidPolicy as exc:
        problems.append(str(exc))
    for part in (lambda: _archive(document, where), lambda: _url(document, where),
                 lambda: _fields.boolean(document, "cluster", where, default=False),
                 lambda: _replicas(document, _tick(document, where), where)):
        check(part)
    tables = document.get("stream")
    for number, table in enumerate(tables if isinstance(tables, list) else [], start=1):
        if isinstance(table, dict):
            here = where.entry("stream", number, _label(table))
            check(partial(_pattern_entry, table, here) if "pattern" in table else partial(_stream_entry, table, prefix, here))
    if not problems:
        check(lambda: parse_policy(text, source).maintenance())
    return tuple(dict.fromkeys(problems))  # a field two checks read is named once


def _label(table: dict[str, Any]) -> str:
    """How messages name a [[stream]] table: by its key, else its queue and name."""
    if "key" in table:
        return f"key {table['key']!r}"
    if "pattern" in table:
        return f"pattern {table['pattern']!r}"
    return ", ".join(f"{name} {table[name]!r}" for name in ("queue", "name") if name in table) or "unnamed"


def _tick(document: dict[str, Any], where: Where) -> float:
    return _fields.seconds(document.get("tick", DEFAULT_TICK), "tick", where)


def _url(document: dict[str, Any], where: Where) -> str | None:
    url = _fields.string(document, "url", where)
    if url is None:
        return None
    problem = _fields.redis_url_problem(url)  # first: a URL no parser reads must not end in a traceback
    if problem is not None:
        raise InvalidPolicy(f"{where.field('url')}: {problem}; {_fields.PERCENT_ENCODING} "
                            f"(got {_fields.redacted_url(url)!r})")
    if urllib.parse.urlsplit(url).scheme not in URL_SCHEMES:
        raise InvalidPolicy(f"{where.field('url')}: must start with redis://, rediss://, unix:// or "
                            f"redis+sentinel:// (got {_fields.redacted_url(url)!r})")
    return url


def _archive(document: dict[str, Any], where: Where) -> ArchiveSettings | None:
    """The top-level ``archive``: a URL string, or an ``[archive]`` table."""
    value = document.get("archive")
    if value is None:
        return None
    if isinstance(value, str):
        table, inner, url_field = {"url": value}, where, "archive"
    elif isinstance(value, dict):
        table, inner, url_field = value, where.table("archive"), "url"
        _fields.refuse_unknown(table, ARCHIVE_FIELDS, inner)
    else:
        raise InvalidPolicy(f"{where.field('archive')}: must be an archive URL such as 'file:///var/lib/retain', "
                            f"or an [archive] table (got {value!r})")
    url = table.get("url")
    if not isinstance(url, str) or not url:
        raise InvalidPolicy(f"{inner.field(url_field)}: must be an archive URL such as 'file:///var/lib/retain' "
                            f"or 's3://bucket/prefix' (got {url!r})")
    parts = urllib.parse.urlsplit(url)
    scheme = parts.scheme.lower() if len(parts.scheme) > 1 else ""  # "C:" is a drive, not a scheme
    if scheme == "memory":
        raise InvalidPolicy(f"{inner.field(url_field)}: memory:// is lost when the daemon stops: give a directory "
                            "(file:///var/lib/retain) or s3://bucket/prefix")
    if scheme not in ARCHIVE_SCHEMES:
        raise InvalidPolicy(f"{inner.field(url_field)}: must be a directory, file:///path or s3://bucket/prefix "
                            f"(got {url!r})")
    options: dict[str, str | bool] = {}
    for name in S3_FIELDS:
        if name in table:
            if not scheme.startswith("s3"):
                raise InvalidPolicy(f"{inner.field(name)}: applies to s3:// archives only (the url is {url!r})")
            value = (_fields.boolean(table, name, inner, default=False) if name == "allow_http"
                     else _fields.string(table, name, inner))
            assert value is not None
            options[name] = value
    min_entries = _fields.count(table.get("min_entries", 1), "min_entries", inner, minimum=1)
    deadline = _fields.seconds(table.get("deadline", DEFAULT_ARCHIVE_DEADLINE), "deadline", inner,
                               example="10", duration_example="10s")
    return ArchiveSettings(url, MappingProxyType(options), min_entries, deadline, **_maintenance(table, inner))


def _replicas(document: dict[str, Any], tick: float, where: Where) -> Replicas:
    """The ``[replicas]`` table, checked; the defaults (shared, 64 shards, 3 s leases) without one."""
    table = document.get("replicas", {})
    if not isinstance(table, dict):
        raise InvalidPolicy(f"{where.field('replicas')}: must be a [replicas] table (got {table!r})")
    inner = where.table("replicas")
    _fields.refuse_unknown(table, REPLICAS_FIELDS, inner)
    lease = _fields.seconds(table["lease"], "lease", inner, example="3", duration_example="3s") \
        if "lease" in table else None
    enabled = _fields.boolean(table, "enabled", inner, default=True)
    shards = _fields.count(table.get("shards", DEFAULT_SHARDS), "shards", inner, minimum=1)
    name, group = _fields.string(table, "name", inner), _fields.string(table, "group", inner)
    try:
        replicas = Replicas(enabled=enabled, shards=shards, lease=lease, name=name, group=group)
        replicas.for_tick(tick)  # checks the lease against the tick: the driver resolves it again
    except InvalidPolicy as exc:
        raise InvalidPolicy(f"{where}: {exc}") from None
    return replicas


def _maintenance(table: dict[str, Any], where: Where) -> dict[str, Any]:
    """The [archive] table's maintenance fields, checked (their defaults where absent)."""
    found: dict[str, Any] = {}
    if "maintain_every" in table:
        every = table["maintain_every"]
        found["maintain_every"] = None if every is False else _fields.duration(every, "maintain_every", where)
    for name in ("max_age", "log_retention", "vacuum_retention"):
        if name in table:
            found[name] = _fields.duration(table[name], name, where)
    if "target_file_entries" in table:
        found["target_file_entries"] = _fields.count(table["target_file_entries"], "target_file_entries", where,
                                                     minimum=1)
    return found


def _stream_entry(table: dict[str, Any], prefix: str, where: Where) -> StreamPolicy:
    _fields.refuse_unknown(table, STREAM_FIELDS, where)
    stream = _stream(table, prefix, where)
    window = _window(table, where)
    archive = _fields.boolean(table, "archive", where, default=False)
    protect = _protect(table, where)
    if protect is not None and archive:
        raise InvalidPolicy(f"{where.field('protect')}: applies to a stream without archive = true: a group that "
                            "fell behind an archived stream catches up from the archive (retain archive catch-up)")
    problem = archive_key_problem(stream.key) if archive else None
    if problem is not None:
        raise InvalidPolicy(f"{where.field('key')}: {problem}")
    return StreamPolicy(stream, window, archive, protect)


def _pattern_entry(table: dict[str, Any], where: Where) -> StreamPattern:
    """A ``[[stream]]`` with ``pattern``: the limits and options of a stream entry, for every matching key."""
    _fields.refuse_unknown(table, PATTERN_FIELDS, where)
    pattern = table["pattern"]
    if not isinstance(pattern, str):
        raise InvalidPolicy(f"{where.field('pattern')}: must be a key glob such as 'emq:{{*}}:stream:*' "
                            f"(got {pattern!r})")
    window = _window(table, where)
    archive = _fields.boolean(table, "archive", where, default=False)
    protect = _protect(table, where)
    if protect is not None and archive:
        raise InvalidPolicy(f"{where.field('protect')}: applies to a stream without archive = true")
    rescan = _fields.duration(table["rescan"], "rescan", where) if "rescan" in table else DEFAULT_RESCAN
    try:
        return StreamPattern(pattern, window, archive, protect, rescan)
    except InvalidPolicy as exc:
        raise InvalidPolicy(f"{where.field('pattern')}: {exc}") from exc


def _protect(table: dict[str, Any], where: Where) -> Protect | None:
    """``protect`` and its required ``max_lag`` (a duration string or a count)."""
    if "protect" not in table:
        if "max_lag" in table:
            raise InvalidPolicy(f"{where.field('max_lag')}: applies with protect only: it is the most that "
                                "protecting a lagging group may keep")
        return None
    mode = table["protect"]
    if mode not in PROTECT_MODES:
        raise InvalidPolicy(f"{where.field('protect')}: must be 'pending' or 'undelivered' (got {mode!r})")
    if "max_lag" not in table:
        raise InvalidPolicy(f"{where.field('max_lag')}: missing: protect needs max_lag, a duration such as '1h' or a "
                            "count such as 100000, so that a dead group cannot keep the stream growing for ever")
    lag = table["max_lag"]
    if isinstance(lag, bool) or not isinstance(lag, (str, int)):
        raise InvalidPolicy(f"{where.field('max_lag')}: must be a duration such as '1h' or a count such as 100000 "
                            f"(got {lag!r})")
    try:
        return Protect(mode, lag)
    except InvalidPolicy as exc:
        raise InvalidPolicy(f"{where.field('max_lag')}: {exc}") from exc


def _stream(table: dict[str, Any], prefix: str, where: Where) -> StreamRef | RawKey:
    if "key" in table:
        extra = [name for name in ("queue", "name", "prefix") if name in table]
        if extra:
            raise InvalidPolicy(f"{where.field(extra[0])}: give key, or queue and name, but not both")
        return _checked(lambda: RawKey(table["key"]), where, "key")
    for name in ("queue", "name"):
        if name not in table:
            raise InvalidPolicy(f"{where.field(name)}: missing: give queue and name, or key")
    values: dict[str, Any] = {"queue": table["queue"], "name": table["name"],
              "prefix": _fields.string(table, "prefix", where, default=prefix)}
    # StreamRef checks all three parts at once; probe each alone to name the field that is wrong.
    for part, probe in _PROBES.items():
        _checked(partial(probe, values[part]), where, part)
    return StreamRef(values["queue"], values["name"], values["prefix"])


_PROBES: dict[str, Callable[[Any], str]] = {
    "queue": lambda queue: stream_key(queue, "n"),
    "name": lambda name: stream_key("q", name),
    "prefix": lambda prefix: stream_key("q", "n", prefix),
}


def _window(table: dict[str, Any], where: Where) -> MaxLen | MinId | MaxAge | MaxBytes | Limits:
    """The stream's limits: one window, or a :class:`Limits` of several (the strictest wins)."""
    given = [name for name in WINDOW_FIELDS if name in table]
    if not given:
        raise InvalidPolicy(f"{where}: give at least one of maxlen, max_age, min_id, max_bytes (got none)")
    if "bytes_samples" in table and "max_bytes" not in table:
        raise InvalidPolicy(f"{where.field('bytes_samples')}: applies with max_bytes only: it is how many nodes "
                            "MEMORY USAGE reads to measure the stream")
    if "allow_future" in table and "min_id" not in given:
        raise InvalidPolicy(f"{where.field('allow_future')}: applies to a min_id window only")
    approx = _fields.boolean(table, "approx", where, default=True)
    limits = [_limit(table, name, approx, where) for name in given]
    return limits[0] if len(limits) == 1 else Limits(*limits)


def _limit(table: dict[str, Any], name: str, approx: bool, where: Where) -> MaxLen | MinId | MaxAge | MaxBytes:
    value = table[name]
    if name == "max_bytes":
        if not isinstance(value, str) and (isinstance(value, bool) or not isinstance(value, int)):
            raise InvalidPolicy(f"{where.field(name)}: must be a size such as '64MiB' (units B, KiB, MiB, GiB) "
                                f"or a number of bytes (got {value!r})")
        samples = _fields.whole_number(table.get("bytes_samples", 0), "bytes_samples", where)
        return _checked(lambda: MaxBytes(value, samples, approx), where, name)
    if name == "maxlen":
        return _checked(lambda: MaxLen(value, approx), where, name)
    if name == "max_age":
        if not isinstance(value, str):
            raise InvalidPolicy(f"{where.field(name)}: must be a duration string such as '7d' (got {value!r})")
        return _checked(lambda: MaxAge(value, approx), where, name)
    instant = _instant(value, where)
    allow_future = _fields.boolean(table, "allow_future", where, default=False)
    if instant > utc_now() and not allow_future:
        raise InvalidPolicy(f"{where.field(name)}: {instant.isoformat()} is in the future, so every beat would "
                            "empty the stream until then: give a past instant, or set allow_future = true if "
                            "that is what you mean")
    return _checked(lambda: MinId(instant, approx), where, name)


def _instant(value: object, where: Where) -> datetime:
    if isinstance(value, str):
        parsed = parse_rfc3339(value)
        if parsed is None:
            zoneless = parse_rfc3339(value + "Z") is not None
            raise InvalidPolicy(f"{where.field('min_id')}: {value!r} has no offset: add Z or one such as +02:00"
                                if zoneless else f"{where.field('min_id')}: {value!r} is not a time "
                                "such as 2026-09-12T08:00:00Z")
        value = parsed
    if not isinstance(value, datetime):
        kind = "a date without a time" if isinstance(value, date) else repr(value)
        raise InvalidPolicy(f"{where.field('min_id')}: must be a time with an offset such as "
                            f"2026-09-12T08:00:00Z (got {kind})")
    if value.tzinfo is None:
        raise InvalidPolicy(f"{where.field('min_id')}: {value.isoformat()} has no offset: add Z or one such as +02:00")
    return value


def _checked(build: Callable[[], T], where: Where, name: str) -> T:
    try:
        return build()
    except InvalidPolicy:
        raise  # already says where
    except InvalidInput as exc:
        raise InvalidPolicy(f"{where.field(name)}: {exc}") from exc
