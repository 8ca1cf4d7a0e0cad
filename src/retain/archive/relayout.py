"""Rewriting a format-2 table as format 3, in place: path-safe folders, the key in every file, one commit.

A format-2 table is partitioned by the stream's key, so its folders are named
``stream=emq!3Ashop…`` and a reader that takes partition values from folder
names (Polars, DuckDB's hive partitioning) reads every stream name wrong.
:func:`relayout` writes each live file again as format 3 (the ``stream``
column first, under ``stream_digest=…``: :mod:`retain.archive.layout`), reads
each one back to check it holds exactly the ids of the file it replaces, then
commits, in **one** commit, the table's new columns and partitioning, the
removal of every format-2 file and the addition of every format-3 one. W, its
ordinal, the rewrite counts, the expiry and every fence token are app
transactions of the table: the commit leaves them as they are.

delta-rs has no call that changes a table's partition columns and keeps its
identity in one commit (``create_table_with_add_actions(mode="overwrite")``
makes a new table id, orphaning the trim marks of :mod:`retain.archive.gap`,
and lists the files to remove from its own later read, so a fold committed in
between would lose its file). The commit is therefore written here, as Delta's
protocol has every writer write one: the next version's log entry, created
only if no other writer created it first. When a daemon's fold wins that
version, the files it added are rewritten too and the commit tried again: the
daemons may keep folding (in format 2) while the table is rewritten; a fold
that commits after it meets a table of another layout, is refused
(:class:`~retain.errors.ArchiveConflict`), and writes format 3 on its next
beat. Readers of the old snapshot keep reading the format-2 files until
maintenance's vacuum removes them (its retention after this commit).

Example:
    >>> relayout(Archive("/var/lib/retain/archive")).files
    1284
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from deltalake import Schema

from retain.archive.columns import TABLE_SCHEMA
from retain.archive.files import FileWriter
from retain.archive.layout import DIGEST, FORMAT, STREAM, commit_path, partition_values
from retain.archive.migrate import IdCheck
from retain.archive.table import Archive, ArchivedFile
from retain.errors import ArchiveObjectExists
from retain.streams.keys import RawKey

__all__ = ["RelayoutReport", "relayout"]

#: versions a rewrite tries to commit at when daemons keep committing first
ATTEMPTS = 20


@dataclass(frozen=True)
class RelayoutReport:
    """One run of :func:`relayout`."""

    #: the table's format before (3: nothing was done)
    before: int
    streams: int
    files: int
    entries: int
    #: the table's version after the rewrite's commit (-1: nothing committed)
    version: int
    elapsed: float
    #: commits a fold made first, whose files were then rewritten too
    races: int = 0


def relayout(archive: Archive, *, progress: Callable[[str, ArchivedFile], None] | None = None) -> RelayoutReport:
    """Rewrite a format-2 table as format 3 (see the module docstring); nothing to do on format 3.

    ``progress(stream, file)`` is called before each file is rewritten.

    Raises:
        ArchiveNeedsMigration: a format-1 archive (:func:`~retain.archive.migrate.migrate` makes it format 3).
        ArchiveCorrupt: a rewritten file does not read back the ids of the file it replaces; nothing is
            committed.
        ArchiveError: the store or the table failed, or daemons won every one of :data:`ATTEMPTS` versions;
            nothing is committed (files written stay unlisted: vacuum removes them; run it again).
    """
    started = time.monotonic()
    archive.check_writable()
    before = archive.format
    if before >= FORMAT:
        return RelayoutReport(before, 0, 0, 0, -1, time.monotonic() - started)
    rewritten: dict[str, ArchivedFile] = {}
    for attempt in range(ATTEMPTS):
        version = archive.version  # first: a snapshot read after it is as new or newer (see _commit)
        files = {key: archive.state(RawKey(key)).files for key in archive.streams()}
        for key, listed in files.items():
            for file in listed:
                if file.path not in rewritten:
                    if progress is not None:
                        progress(key, file)
                    rewritten[file.path] = _rewrite(archive, key, file)
        if archive.format >= FORMAT:  # another process finished the rewrite meanwhile
            return RelayoutReport(before, 0, 0, 0, archive.version, time.monotonic() - started, attempt)
        try:
            _commit(archive, version, files, rewritten)
        except ArchiveObjectExists:
            archive.reload()  # a fold committed first: rewrite what it added, try the next version
            continue
        archive.reload()
        return RelayoutReport(before, len(files), sum(len(listed) for listed in files.values()),
                              sum(file.count for listed in files.values() for file in listed), version + 1,
                              time.monotonic() - started, attempt)
    raise ArchiveObjectExists(f"the table kept moving: {ATTEMPTS} versions were each committed by another writer "
                              "first; stop the daemons that fold into it and run `retain archive migrate` again")


def _rewrite(archive: Archive, key: str, file: ArchivedFile) -> ArchivedFile:
    """``file`` written again as format 3 and stored (not yet listed), checked to hold exactly its ids."""
    stream = RawKey(key)
    ids = IdCheck(key)
    writer = FileWriter(key, table_format=FORMAT)
    for table in archive.tables(stream, file, file.first, file.last):
        ids.add(table, f"data file {file.path}")
        writer.add_table(table)
    stored = archive.put_file(stream, writer.finish())
    ids.check(archive, stored)
    return stored


def _commit(archive: Archive, version: int, files: dict[str, tuple[ArchivedFile, ...]],
            rewritten: dict[str, ArchivedFile]) -> None:
    """Write the log entry of ``version + 1``, create-only: every file of ``files`` replaced by its rewrite,
    the table's columns and partitioning changed, its id, name, properties and app transactions kept.

    Only the snapshot of ``version`` itself lets it be created: ``files`` were listed from that snapshot or a
    newer one, and a newer one means ``version + 1`` exists.
    """
    now = int(time.time() * 1000)
    metadata = archive.metadata()
    actions: list[dict[str, Any]] = [
        {"commitInfo": {"timestamp": now, "operation": "RETAIN RELAYOUT", "readVersion": version,
                        "isBlindAppend": False, "operationParameters": {"format": str(FORMAT),
                                                                        "partitionBy": json.dumps([DIGEST])}}},
        {"metaData": {"id": metadata.id, "name": metadata.name, "description": metadata.description,
                      "format": {"provider": "parquet", "options": {}},
                      "schemaString": Schema.from_arrow(TABLE_SCHEMA).to_json(), "partitionColumns": [DIGEST],
                      "createdTime": metadata.created_time, "configuration": dict(metadata.configuration)}},
    ]
    for key, listed in sorted(files.items()):
        for old in listed:
            new = rewritten[old.path]
            actions.append({"remove": {"path": old.path, "dataChange": False, "deletionTimestamp": now,
                                       "extendedFileMetadata": True, "partitionValues": {STREAM: key},
                                       "size": old.size}})
            actions.append({"add": {"path": new.path, "partitionValues": partition_values(key, FORMAT),
                                    "size": new.size, "modificationTime": now, "dataChange": False,
                                    "stats": new.stats}})
    data = "".join(json.dumps(action, separators=(",", ":")) + "\n" for action in actions).encode()
    archive.location.put_new(commit_path(version + 1), data, f"committing the rewrite as format {FORMAT}")
