"""SQL over the archive with DuckDB: the table, one stream, or the whole log with its live tail, as views.

DuckDB reads the table through delta-rs's pyarrow dataset of its live files
(the ``delta`` extension needs a download DuckDB may not be allowed; the
dataset needs nothing). Three views, each with the table's columns (``stream``,
``id``, ``ms``, ``seq``, ``ts``, ``fields``, ``fields_binary``):

- ``archive``: every stream's archived rows (ids at or below each stream's W);
- ``entries``: one stream's archived rows, when a stream is given (no
  ``stream`` column);
- ``log``: the merge-read as a table, given a Redis connection: per stream (the
  one given, else every stream the archive holds), the archived rows and the
  live tail after W read from Redis at query time, in id order, each id once,
  no gap between the tiers (:func:`~retain.archive.read.read_log`). It streams:
  a year of history does not need a year of memory, and it is read once per
  query (a query that scans it twice sees it empty the second time).

``as_of`` (a table version, or an aware datetime) reads ``archive`` and
``entries`` as the table was then. The ``log`` view is the live stream as it is
now, so it does not take ``as_of``. DuckDB is an optional dependency (``pip
install 'retain[duckdb]'``).

Example:
    >>> query(archive, "SELECT fields['player'] AS player, count(*) FROM entries GROUP BY 1",
    ...       stream=StreamRef("codemojex", "activity"))
    pyarrow.Table ...
    >>> query(archive, "SELECT count(*) FROM log WHERE ts >= now() - INTERVAL 1 DAY", conn=redis.Redis())
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pyarrow as pa

from retain._redis import RedisLike
from retain.archive.layout import DIGEST
from retain.archive.read import read_log
from retain.archive.table import Archive
from retain.errors import ArchiveError, InvalidInput
from retain.streams.keys import Stream, key_of

__all__ = ["VIEWS", "query"]

#: the views a query may name
VIEWS = ("archive", "entries", "log")
#: what the table's dataset is registered as, for the views to select from
_FILES = "retain_archive_files"


def query(archive: Archive, sql: str, *, stream: Stream | None = None, conn: RedisLike | None = None,
          as_of: int | datetime | None = None) -> pa.Table:
    """Run ``sql`` in DuckDB over ``archive``: the views ``archive``, ``entries`` (given ``stream``) and ``log``
    (given ``conn``, a Redis client); see the module docstring.

    Raises:
        InvalidInput: ``sql`` is not a non-empty string, or DuckDB refuses it (syntax, an unknown column or
            view), with DuckDB's message; ``log`` without ``conn``, or with ``as_of``; ``as_of`` not a version
            the table has or an aware datetime. All before any I/O but the last.
        ArchiveNeedsMigration: a format-1 archive (migrate it first).
        ArchiveError: DuckDB is not installed, or reading the table failed.
        the errors of :func:`~retain.archive.read.read` while the ``log`` view is read.
    """
    if not isinstance(sql, str) or not sql.strip():
        raise InvalidInput(f"a query must be a non-empty SQL string (got {sql!r})")
    key = key_of(stream) if stream is not None else None
    try:
        import duckdb
    except ImportError as exc:
        raise ArchiveError("querying the archive needs DuckDB: pip install 'retain[duckdb]'") from exc
    named = _views_named(duckdb, sql)
    if "log" in named and conn is None:
        raise InvalidInput("the log view reads the live tail from Redis: give a connection (--url)")
    if "log" in named and as_of is not None:
        raise InvalidInput("--as-of reads the archive as it was; the log view is the live stream as it is now: "
                           "query the archive or entries view as of a version, or the log view now")
    dataset = archive.dataset(as_of=as_of)
    connection: Any = duckdb.connect()
    try:
        connection.register(_FILES, dataset)
        columns = ", ".join(f'"{name}"' for name in dataset.schema.names if name != DIGEST)
        connection.execute(f"CREATE VIEW archive AS SELECT {columns} FROM {_FILES}")
        if key is not None:
            literal = key.replace("'", "''")
            connection.execute(f"CREATE VIEW entries AS SELECT * EXCLUDE (stream) FROM archive "
                               f"WHERE stream = '{literal}'")
        failures: list[BaseException] = []
        if "log" in named and conn is not None:  # refused above without one
            log = read_log(conn, archive, [stream] if stream is not None else None)
            connection.register("log", _noting_failures(log, failures))
        return _run(duckdb, connection, sql, failures)
    finally:
        connection.close()


def _views_named(duckdb: Any, sql: str) -> set[str]:
    """The tables ``sql`` names (DuckDB's parser); a query it cannot parse names none (it is refused when run)."""
    try:
        return {name.lower() for name in duckdb.get_table_names(sql)}
    except duckdb.Error:
        return set()


def _noting_failures(reader: pa.RecordBatchReader, failures: list[BaseException]) -> pa.RecordBatchReader:
    """``reader`` as DuckDB reads it, its error kept: DuckDB would pass on only its text."""
    def batches() -> Any:
        try:
            yield from reader
        except BaseException as error:
            failures.append(error)
            raise

    return pa.RecordBatchReader.from_batches(reader.schema, batches())


def _run(duckdb: Any, connection: Any, sql: str, failures: list[BaseException]) -> pa.Table:
    try:
        relation = connection.sql(sql)
        if relation is None:  # a statement that returns no rows
            return pa.table({})
        # DuckDB 2 names it to_arrow_table; 1.x, arrow.
        fetch = getattr(relation, "to_arrow_table", None) or relation.arrow
        return fetch()
    except duckdb.Error as exc:
        if failures:
            raise failures[0] from exc  # the log view's own error (a gap, an outage): not DuckDB's
        _refused(duckdb, exc)
        raise ArchiveError(f"the query failed reading the archive: {str(exc).splitlines()[0]}") from exc


def _refused(duckdb: Any, exc: BaseException) -> None:
    if isinstance(exc, (duckdb.ParserException, duckdb.BinderException, duckdb.CatalogException,
                        duckdb.InvalidInputException, duckdb.ConversionException)):
        raise InvalidInput(f"DuckDB refused the query: {str(exc).splitlines()[0]}") from exc
