"""The log bounded by commits as well as by time: which old log objects a cleanup also removes.

On a local directory delta-rs lists the whole of ``_delta_log/`` three times
per commit (twice inside its commit, once to bring the snapshot up to it), at
about a microsecond an object. The log retention keeps commits by age, so a
table folded many times a second (a script in a loop) gathers thousands of
commits within it, and every fold slows with them: 2,000 folds of 10 entries,
then folds alternated between that table and one of 50 folds, were 1.8-1.9
times as slow; with the log cut to the newest 1,000 commits, 1.3; to 300, 1.1.

So a log cleanup (:meth:`~retain.archive.table.Archive.clean_log`, after
delta-rs's own by age) also removes every log object before the newest
checkpoint that leaves at least :data:`LOG_KEEP_COMMITS` commits after it,
a prefix of the log, oldest first: a reader opens the table from a checkpoint
and the commits after it, which stay; a version before it can no longer be
read as of (``--as-of``), as after delta-rs's cleanup. At one beat a second
and the default 5-minute retention the log holds some 300 commits: the bound
only applies to a table committed to more than 1.7 times a second (two
replicas beating each second into one table reach 2: the log then keeps the
newest 250 seconds).

A snapshot trusts a missing next commit as proof that it is the latest for a
while (:mod:`retain.archive.table`, "W in constant time"): the next commit
cannot have come and gone since it last looked. Removal by age keeps that
true for half the log retention; removal by count would not, so an object
leaves by count only once :data:`LOG_TRIM_AGE` has passed since it was
written, and a snapshot trusts for half of that at most.

Example:
    >>> plan_log_trim(listing, latest=2_030, keep=500, written_before=now - LOG_TRIM_AGE)
    ('_delta_log/00000000000000000000.json', ..., '_delta_log/00000000000000001518.json')
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any

__all__ = ["LOG_KEEP_COMMITS", "LOG_TRIM_AGE", "plan_log_trim"]

#: a log cleanup leaves at least this many commits after the checkpoint it keeps as the log's start
LOG_KEEP_COMMITS = 500
#: a log object leaves by count no sooner than this after it was written (a snapshot trusts half of it)
LOG_TRIM_AGE = timedelta(seconds=10)


def _version(path: str) -> int:
    """The version a log object belongs to (``…/00000000000000000042.json``: 42); -1 for ``_last_checkpoint``."""
    name = path.rsplit("/", 1)[-1].split(".", 1)[0]
    return int(name) if name.isdigit() else -1


def plan_log_trim(listing: Iterable[Mapping[str, Any]], latest: int, keep: int,
                  written_before: datetime) -> tuple[str, ...]:
    """The log objects to remove, oldest first: those before the newest checkpoint at ``latest - keep`` or
    earlier, if every one of them was written before ``written_before`` (else the checkpoint before it).

    Pure. ``listing`` is the store's listing of ``_delta_log/`` (each a ``path`` and a ``last_modified``);
    ``latest`` the table's version. Nothing goes when no checkpoint is that old: a reader needs one to
    start from.
    """
    objects = sorted(((_version(str(item["path"])), str(item["path"]), item["last_modified"]) for item in listing),
                     key=lambda found: (found[0], found[1]))
    objects = [found for found in objects if found[0] >= 0]
    starts = sorted({version for version, path, _ in objects
                     if path.endswith(".checkpoint.parquet") and version <= latest - keep}, reverse=True)
    for start in starts:
        before = [found for found in objects if found[0] < start]
        if all(modified < written_before for _, _, modified in before):
            return tuple(path for _, path, _ in before)
    return ()
