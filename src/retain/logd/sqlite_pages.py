"""A retain selection's pages over one key range of a container; run as a script, a worker process for one range.

The SQLite backend selects a large container in parts, one key range each, at once: it reads the first range
itself and hands every other range to a worker -- this file run by path (``python -I sqlite_pages.py``), so that
it starts in tens of milliseconds and imports nothing but the standard library. Processes, not threads: SQLite's
JSON functions allocate on every call and SQLite counts every allocation under one process-wide mutex, so two
threads selecting at once took longer than one thread selecting both ranges (docs/logd-retain.md has the figures).

A worker reads its job as one JSON document on stdin (the database, the commit, the statement and its parameters,
the range, the limit), selects inside one read transaction of its own, at a lower priority than the caller's
threads, and writes a JSON line per page as it goes: ``[records, unreadable, "names and marks joined", beneath]``. It
writes ``"moved"`` instead when the store's compaction boundary passed the commit since the caller read it (a
version the commit sees may be gone), or, selecting from a heads index (which holds the head only), when another
commit came since. Whatever goes wrong with a worker -- it cannot start, fails, declines, or
takes far longer than the caller's own range (it is then ended) -- the caller selects its range itself, on its
own snapshot.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from typing import IO, Any

__all__ = ["Part", "Worker", "index_pages", "pages", "select_pages"]

log = logging.getLogger(__name__)

PAGE = 32768  # records one statement reads at most: a page's answer is quick to turn into Python
_ITEMS = "\x1e"  # between the names and marks the statement joins
_NICE = 10  # a worker's niceness, added to the caller's


class Part:
    """What a selection read of one key range, page by page: records, unreadable items, the expired
    ``(name, mark)`` pairs in key order, records beneath the items."""

    def __init__(self) -> None:
        self.records = self.unreadable = self.beneath = 0
        self.expired: list[tuple[str, str]] = []

    def add(self, read: int, unreadable: int, joined: str, beneath: int) -> None:
        """One page's answer: its records, its unreadable items, its expired names and marks joined, its
        records beneath items."""
        self.records, self.unreadable, self.beneath = self.records + read, self.unreadable + unreadable, \
            self.beneath + beneath
        if joined:
            parts = joined.split(_ITEMS)
            pairs = list(zip(parts[0::2], parts[1::2], strict=False))
            if parts[0::2] != sorted(parts[0::2]):
                pairs.sort()  # the scan is in key order, and the batches go in key order
            self.expired += pairs


def pages(db: sqlite3.Connection, statement: str, params: dict[str, Any], after: str, end: str,
          limit: int, bounded: bool = False) -> Iterator[tuple[int, int, str, int]]:
    """The selection statement over the records past ``after`` and before ``end``, page after page (each starting
    past the last record the one before read), until ``limit`` records or the end of the range: each page's
    records, unreadable items, expired names and marks joined, and records beneath items.

    ``bounded`` (the baseline's view only): each page is a key range found first in the index (:func:`_page_end`),
    and the statement need not name its last key -- the ``max()`` of every record's key was some 1,600
    instructions per record, finding the range some 450. Otherwise the statement reads at most a page of records
    and names the last.

    Run inside one read transaction, so that every page sees one commit. A page's answer is short to turn into
    Python, so a long read never holds the GIL long enough to keep a server's writer waiting."""
    records = 0
    while records < limit:
        page = min(PAGE, limit - records)
        stop, before = _page_end(db, after, end, page) if bounded else (end, None)
        read, unreadable, joined, last, beneath = db.execute(statement, params | {"after": after, "end": stop,
                                                                                  "page": page}).fetchone()
        records += read
        yield read, int(unreadable), joined or "", int(beneath)
        if bounded:
            if before is None:
                return
            after = before
        else:
            if read < page:
                return
            after = last


def index_pages(db: sqlite3.Connection, statement: str, params: dict[str, Any], start: str, end: str,
                limit: int) -> Iterator[tuple[int, int, str, int]]:
    """:func:`pages` over a heads index (:mod:`retain.logd.sqlite_heads`: one row per record, ``params["ix"]``
    names it) from the key ``start`` (included) to ``end``: each page the key range up to the key ``PAGE`` rows on,
    found first in the index, and the statement over ``key >= :start AND key < :stop``."""
    records = 0
    while records < limit:
        page = min(PAGE, limit - records)
        found = db.execute("SELECT key FROM retain_heads WHERE ix = :ix AND key >= :start AND key < :end ORDER BY key "
                           "LIMIT 1 OFFSET :page", {"ix": params["ix"], "start": start, "end": end,
                                                    "page": page}).fetchone()
        stop = end if found is None else found[0]
        read, unreadable, joined, beneath = db.execute(statement, params | {"start": start, "stop": stop}).fetchone()
        records += read
        yield read, int(unreadable), joined or "", int(beneath)
        if found is None:
            return
        start = stop


def _page_end(db: sqlite3.Connection, after: str, end: str, page: int) -> tuple[str, str | None]:
    """Where a page of the baseline's records past ``after`` ends: ``(stop, before)``, the page being the keys
    past ``after`` and below ``stop``, and the next page's starting past ``before`` (None: this page reaches
    ``end``). The page ends at the key ``page`` versions on, so it holds at most ``page`` records and each key's
    versions lie in one page -- or, when that key is the first, just past it (one record of many versions)."""
    bounds = {"after": after, "end": end}
    found = db.execute("SELECT key FROM nodes WHERE scope = 0 AND key > :after AND key < :end ORDER BY key "
                       "LIMIT 1 OFFSET :page", bounds | {"page": page}).fetchone()
    if found is None:
        return end, None
    stop = found[0]
    before = db.execute("SELECT max(key) FROM nodes WHERE scope = 0 AND key > :after AND key < :stop",
                        bounds | {"stop": stop}).fetchone()[0]
    if before is not None:
        return stop, before
    # Every version up to there is of the first key: the page is that key alone.
    following = db.execute("SELECT key FROM nodes WHERE scope = 0 AND key > :stop AND key < :end ORDER BY key "
                           "LIMIT 1", bounds | {"stop": stop}).fetchone()
    return (end, None) if following is None else (following[0], stop)


def select_pages(db: sqlite3.Connection, statement: str, params: dict[str, Any], after: str, end: str,
                 limit: int, bounded: bool = False, index: bool = False) -> Part:
    """:func:`pages` gathered -- :func:`index_pages` when ``index``."""
    part = Part()
    for page in _paged(db, statement, params, after, end, limit, bounded, index):
        part.add(*page)
    return part


def _paged(db: sqlite3.Connection, statement: str, params: dict[str, Any], after: str, end: str, limit: int,
           bounded: bool, index: bool) -> Iterator[tuple[int, int, str, int]]:
    if index:
        return index_pages(db, statement, params, after, end, limit)
    return pages(db, statement, params, after, end, limit, bounded)


class Worker:
    """One key range selected by a worker process while the caller selects another.

    :meth:`start` never raises: a worker that cannot start, fails, finds its commit compacted or does not answer
    in time answers None from :meth:`result`, and the caller selects the range itself. The worker sends its pages as it reads them,
    one JSON line each, and a thread here gathers them: no answer is ever one long decode holding the GIL."""

    def __init__(self, process: subprocess.Popen[bytes] | None, job: bytes, errors: IO[bytes] | None) -> None:
        self._process, self._errors = process, errors
        self._part: Part | None = None
        self._reader: threading.Thread | None = None
        if process is not None:
            self._reader = threading.Thread(target=self._gather, args=(job,), name="logd-select-worker", daemon=True)
            self._reader.start()

    @classmethod
    def start(cls, path: str, at: int, statement: str, params: dict[str, Any], after: str, end: str,
              limit: int, bounded: bool = False, index: bool = False) -> Worker:
        """A worker selecting its range as :func:`select_pages` would, at the commit ``at`` (``index``: a heads
        index, which holds the head only: the worker declines unless its snapshot's head is ``at``)."""
        job = json.dumps({"path": path, "at": at, "statement": statement, "params": params, "after": after,
                          "end": end, "limit": limit, "bounded": bounded, "index": index}).encode()
        errors = tempfile.TemporaryFile()  # a file, not a pipe: however much a worker says there, it never blocks
        try:
            process = subprocess.Popen(_command(), stdin=subprocess.PIPE,
                                       stdout=subprocess.PIPE, stderr=errors)
        except OSError as exc:
            errors.close()
            log.warning("logd: no selection worker (%s); selecting its range in this process", exc)
            return cls(None, job, None)
        return cls(process, job, errors)

    def _gather(self, job: bytes) -> None:
        process = self._process
        assert process is not None and process.stdin is not None and process.stdout is not None
        part, whole = Part(), True
        try:
            process.stdin.write(job)
            process.stdin.close()
            for line in process.stdout:
                page = json.loads(line)
                if page == "moved":
                    whole = False
                else:
                    part.add(*page)
        except (OSError, ValueError) as exc:  # a worker killed, or its answer cut short
            log.warning("logd: a selection worker broke off: %s", exc)
            whole = False
        finally:
            process.stdout.close()
        if process.wait() != 0:
            self._log_failure(process.returncode)
        elif whole:
            self._part = part

    def _log_failure(self, returncode: int) -> None:
        assert self._errors is not None
        self._errors.seek(0)
        said = self._errors.read()[-4000:].decode(errors="replace").strip()
        log.warning("logd: a selection worker failed (exit %s)%s", returncode, f": {said}" if said else "")

    def result(self, timeout: float) -> Part | None:
        """The worker's part once it has answered; None when the caller must select the range itself -- also
        when the worker has not answered within ``timeout`` seconds (it is ended: a stuck worker must not hold
        the pass)."""
        if self._reader is None:
            return None
        self._reader.join(timeout)
        if self._reader.is_alive():
            log.warning("logd: a selection worker did not answer within %.1f s; selecting its range in this "
                        "process", timeout)
            self.stop()
            return None
        return self._part

    def stop(self) -> None:
        """End the worker if it still runs (the caller's own range failed), and let go of its files."""
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
        if self._reader is not None:
            self._reader.join()
        if self._errors is not None:
            self._errors.close()


def _command() -> list[str]:
    """How a worker starts: this file, by path, in isolated mode (no site packages, no PYTHON* variables)."""
    return [sys.executable, "-I", __file__]


def _work(job: dict[str, Any], out: IO[str]) -> None:
    """In the worker: the job's range on a read-only connection, at the job's commit, a JSON line per page."""
    # Behind the server's threads for a core: a client's patch waits for no selection.
    os.nice(_NICE)
    db = sqlite3.connect(job["path"], isolation_level=None)
    try:
        db.execute("PRAGMA query_only = ON")
        db.execute("PRAGMA busy_timeout = 10000")
        db.execute("BEGIN")
        row = db.execute("SELECT value FROM meta WHERE name = 'boundary'").fetchone()
        # Below the boundary, compaction removes versions: past the job's commit, what it saw may be gone. A heads
        # index holds the head only: a commit since the job's makes it another answer.
        head = db.execute("SELECT max(number) FROM commits").fetchone()[0]
        if (row is not None and int(row[0]) > job["at"]) or (job["index"] and head != job["at"]):
            out.write('"moved"\n')
            return
        for page in _paged(db, job["statement"], job["params"], job["after"], job["end"], job["limit"],
                           job["bounded"], job["index"]):
            out.write(json.dumps(page) + "\n")
    finally:
        db.close()


if __name__ == "__main__":
    _work(json.load(sys.stdin), sys.stdout)
