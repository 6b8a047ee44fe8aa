"""Rows sent straight to the SQLite driver, bound by each column's own processor (the stored form SQLAlchemy
would write), for the engine's hottest writes: SQLAlchemy's per-statement path (an execution context, events,
a result) costs more than the row. The statements run on a cursor of the driver connection under the caller's
`sa.Connection`, inside the transaction it holds; a driver error comes out as SQLAlchemy's own (an
`IntegrityError` for a broken constraint), as it would from `conn.execute`."""

from __future__ import annotations

import sqlite3
import weakref
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

_processors: weakref.WeakKeyDictionary[sa.Dialect, dict[tuple[str, tuple[str, ...]], list[Any]]] = \
    weakref.WeakKeyDictionary()


def bind_processors(dialect: sa.Dialect, table: sa.Table, columns: tuple[str, ...]) -> list[Any]:
    """Each column's bind processor for `dialect`, looked up once per engine (a lookup costs ~20 us)."""
    known = _processors.setdefault(dialect, {})
    found = known.get((table.name, columns))
    if found is None:
        found = known[(table.name, columns)] = [table.c[name].type.dialect_impl(dialect).bind_processor(dialect)
                                                for name in columns]
    return found


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
        if len(params) == 1:
            cursor.execute(sql, params[0])
        else:
            cursor.executemany(sql, params)
    except sqlite3.Error as exc:
        raise sa.exc.DBAPIError.instance(sql, params, exc, sqlite3.Error) from exc
    finally:
        cursor.close()
