"""Rows sent straight to the SQLite driver, bound by each column's own processor (the stored form SQLAlchemy
would write), for the engine's hottest writes: SQLAlchemy's per-statement path costs more than the row."""

from __future__ import annotations

import weakref
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
    if len(params) == 1:
        conn.exec_driver_sql(sql, params[0])
    else:
        conn.exec_driver_sql(sql, params)
