"""SQL over the archive with DuckDB: the table as a view, the rows as an Arrow table.

DuckDB reads the table through pyarrow's dataset of its live files (the
``delta`` extension needs a download DuckDB may not be allowed; the dataset
needs nothing). Two views:

- ``archive``: every stream's rows, with the ``stream`` column;
- ``entries``: one stream's rows, when a stream is given.

Only archived rows are there (ids at or below each stream's W); the live tail
is in Redis. DuckDB is an optional dependency (``pip install 'retain[duckdb]'``).

Example:
    >>> query(archive, "SELECT fields['player'] AS player, count(*) FROM entries GROUP BY 1",
    ...       stream=StreamRef("codemojex", "activity"))
    pyarrow.Table ...
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from retain.archive.table import Archive
from retain.errors import ArchiveError, InvalidInput
from retain.streams.keys import Stream, key_of

__all__ = ["query"]


def query(archive: Archive, sql: str, *, stream: Stream | None = None) -> pa.Table:
    """Run ``sql`` in DuckDB over ``archive`` (views ``archive`` and, given ``stream``, ``entries``).

    Raises:
        InvalidInput: ``sql`` is not a non-empty string, or DuckDB refuses it
            (syntax, an unknown column or view), with DuckDB's message.
        ArchiveNeedsMigration: a format-1 archive (migrate it first).
        ArchiveError: DuckDB is not installed, or reading the table failed.
    """
    if not isinstance(sql, str) or not sql.strip():
        raise InvalidInput(f"a query must be a non-empty SQL string (got {sql!r})")
    key = key_of(stream) if stream is not None else None
    try:
        import duckdb
    except ImportError as exc:
        raise ArchiveError("querying the archive needs DuckDB: pip install 'retain[duckdb]'") from exc
    dataset = archive.dataset()
    connection: Any = duckdb.connect()
    try:
        connection.register("archive", dataset)
        if key is not None:
            literal = key.replace("'", "''")
            connection.execute(f"CREATE VIEW entries AS SELECT * EXCLUDE (stream) FROM archive "
                               f"WHERE stream = '{literal}'")
        try:
            relation = connection.sql(sql)
            if relation is None:  # a statement that returns no rows
                return pa.table({})
            # DuckDB 2 names it to_arrow_table; 1.x, arrow.
            fetch = getattr(relation, "to_arrow_table", None) or relation.arrow
            return fetch()
        except (duckdb.ParserException, duckdb.BinderException, duckdb.CatalogException,
                duckdb.InvalidInputException, duckdb.ConversionException) as exc:
            raise InvalidInput(f"DuckDB refused the query: {str(exc).splitlines()[0]}") from exc
        except duckdb.Error as exc:
            raise ArchiveError(f"the query failed reading the archive: {str(exc).splitlines()[0]}") from exc
    finally:
        connection.close()
