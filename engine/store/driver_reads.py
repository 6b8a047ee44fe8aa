"""Reads sent straight to the SQLite driver, each value through its column's own result processor (what
SQLAlchemy would hand back), for the engine's hottest reads: a connection's checkout, transaction and
statement path in SQLAlchemy costs several times the queries themselves (a run and its steps: ~190 us that
way, ~50 us this way).

`sqlite_reader(engine)` holds one DEFERRED read transaction, as `engine.store.db.reading` does, on a connection
of the engine's own pool; a driver error comes out as SQLAlchemy's `DBAPIError`, so `engine.store.db.unavailable`
reads it as it reads any other.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine.interfaces import DBAPICursor

from engine.store.driver_rows import driver_errors, result_processors


class SqliteReader:
    """Statements of one read transaction on a driver cursor."""

    def __init__(self, cursor: DBAPICursor, dialect: sa.Dialect) -> None:
        self._cursor = cursor
        self._dialect = dialect

    def rows(self, statement: str, params: Sequence[Any], table: sa.Table) -> list[dict[str, Any]]:
        """The rows `statement` selects (columns of `table`, named as in it), each as column name -> value."""
        with driver_errors(statement, params):
            self._cursor.execute(statement, params)
            found = self._cursor.fetchall()
        columns = tuple(entry[0] for entry in self._cursor.description or ())
        processed = [(name, process) for name, process in
                     zip(columns, result_processors(self._dialect, table, columns), strict=True) if process is not None]
        rows = [dict(zip(columns, row, strict=True)) for row in found]
        for row in rows:
            for name, process in processed:
                value = row[name]
                if value is not None:
                    row[name] = process(value)
        return rows

    def values(self, statement: str, params: Sequence[Any]) -> list[Any]:
        """The first column of each row `statement` selects, as the driver gives it (ids, counts)."""
        with driver_errors(statement, params):
            self._cursor.execute(statement, params)
            return [row[0] for row in self._cursor.fetchall()]


@contextmanager
def sqlite_reader(engine: sa.Engine) -> Iterator[SqliteReader]:
    """One DEFERRED read transaction (it never waits for the writer's lock, and every statement sees the same
    snapshot) on a connection of `engine`'s pool, given back when done."""
    raw = engine.raw_connection()
    try:
        cursor = raw.cursor()
        with driver_errors("BEGIN"):
            cursor.execute("BEGIN")
        yield SqliteReader(cursor, engine.dialect)
        cursor.execute("COMMIT")
    finally:
        raw.close()  # back to the pool, which rolls back a transaction left open
