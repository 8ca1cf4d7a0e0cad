"""Databases on a test PostgreSQL, made and dropped fast (one per test, on one server per session)."""

from __future__ import annotations

import psycopg

from retain.servers import PostgresServer

__all__ = ["Databases"]


class Databases:
    """Makes databases on ``server`` over one admin connection; drops them (closing what is still connected)."""

    def __init__(self, server: PostgresServer) -> None:
        self.server = server
        self._admin: psycopg.Connection | None = None

    def __enter__(self) -> Databases:
        self._admin = psycopg.connect(self.server.url, autocommit=True)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._admin is not None:
            self._admin.close()

    def _connection(self) -> psycopg.Connection:
        if self._admin is None or self._admin.closed or self._admin.broken:
            self._admin = psycopg.connect(self.server.url, autocommit=True)
        return self._admin

    def create(self, name: str) -> str:
        """A new, empty database ``name`` (letters, digits, _); its URL. One left by an earlier run goes first."""
        self.drop(self.server.database_url(name))
        self._connection().execute(f'CREATE DATABASE "{name}" TEMPLATE template0 STRATEGY FILE_COPY')
        return self.server.database_url(name)

    def drop(self, url: str) -> None:
        name = url.rsplit("/", 1)[1]
        self._connection().execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def raw_scalar(store, query: str) -> object:
    """One value read past the store, straight from its database (SQLite file or PostgreSQL): the tables
    as they are, for tests of what compaction leaves."""
    import sqlite3

    from retain.logd.postgres import PostgresBackend

    backend = store.backend
    if isinstance(backend, PostgresBackend):
        with psycopg.connect(backend.url, autocommit=True) as raw:
            row = raw.execute(query).fetchone()
    else:
        with sqlite3.connect(backend.path) as raw:
            row = raw.execute(query).fetchone()
    return None if row is None else row[0]
