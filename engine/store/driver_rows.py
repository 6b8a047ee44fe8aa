"""Rows sent straight to the SQLite driver, bound by each column's own processor (the stored form SQLAlchemy
would write), for the engine's hottest writes: SQLAlchemy's per-statement path (an execution context, events,
a result) costs more than the row. The statements run on a cursor of the driver connection under the caller's
`sa.Connection`, inside the transaction it holds; a driver error comes out as SQLAlchemy's own (an
`IntegrityError` for a broken constraint), as it would from `conn.execute`."""

from __future__ import annotations

import sqlite3
import weakref
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Literal

import sqlalchemy as sa

Processors = list[Any]
"""One processor a column (None where the value passes as it is)."""

_processors: weakref.WeakKeyDictionary[sa.Dialect, dict[tuple[str, str, tuple[str, ...]], Processors]] = \
    weakref.WeakKeyDictionary()


def _column_processors(kind: Literal["bind", "result"], dialect: sa.Dialect, table: sa.Table,
                       columns: tuple[str, ...]) -> Processors:
    """Each column's bind or result processor for `dialect`, looked up once per engine (a lookup costs ~20 us)."""
    known = _processors.setdefault(dialect, {})
    found = known.get((kind, table.name, columns))
    if found is None:
        types = [table.c[name].type.dialect_impl(dialect) for name in columns]
        found = known[(kind, table.name, columns)] = [
            impl.bind_processor(dialect) if kind == "bind" else impl.result_processor(dialect, None) for impl in types]
    return found


def bind_processors(dialect: sa.Dialect, table: sa.Table, columns: tuple[str, ...]) -> Processors:
    """What SQLAlchemy would write for each column's value (the stored form)."""
    return _column_processors("bind", dialect, table, columns)


def result_processors(dialect: sa.Dialect, table: sa.Table, columns: tuple[str, ...]) -> Processors:
    """What SQLAlchemy would hand back for each column's stored value."""
    return _column_processors("result", dialect, table, columns)


def column_names(columns: Iterable[sa.Column[Any]]) -> str:
    """The columns' names joined for a statement sent to the driver."""
    return ", ".join(column.name for column in columns)


@contextmanager
def driver_errors(statement: str, params: Sequence[Any] = ()) -> Iterator[None]:
    """A driver error raised inside comes out as SQLAlchemy's own class (`IntegrityError`, `OperationalError`,
    ...), as it would from `conn.execute`, so `engine.store.db.unavailable` and the callers' handlers read it."""
    try:
        yield
    except sqlite3.Error as exc:
        raise sa.exc.DBAPIError.instance(statement, params, exc, sqlite3.Error) from exc


def sqlite_execute_rows(conn: sa.Connection, sql: str, table: sa.Table, columns: tuple[str, ...],
                        rows: list[dict[str, Any]]) -> None:
    """Run `sql` (`?` placeholders, one per column) once per row, each value through its column's processor."""
    processors = bind_processors(conn.dialect, table, columns)
    params = [tuple(value if process is None else process(value)
                    for value, process in zip((row[name] for name in columns), processors, strict=True))
              for row in rows]
    sqlite_execute(conn, sql, params)


def sqlite_cursor(conn: sa.Connection) -> Any:
    """A cursor of the driver connection under `conn`: its statements are part of the transaction `conn` holds."""
    driver = conn.connection.driver_connection
    assert driver is not None, "a connection in a transaction has its driver connection"
    return driver.cursor()


def sqlite_execute(conn: sa.Connection, sql: str, params: Sequence[Sequence[Any]]) -> None:
    """Run `sql` once per parameter tuple (values already in their stored form) in `conn`'s transaction."""
    cursor = sqlite_cursor(conn)
    try:
        with driver_errors(sql, params):
            if len(params) == 1:
                cursor.execute(sql, params[0])
            else:
                cursor.executemany(sql, params)
    finally:
        cursor.close()
