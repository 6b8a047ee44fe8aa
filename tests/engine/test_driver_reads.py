"""Reads sent straight to the SQLite driver (`engine.store.driver_reads`) give what the same reads through
SQLAlchemy give: every column, with its type's processing (aware datetimes, decoded JSON)."""

from __future__ import annotations

from datetime import datetime

import pytest
import sqlalchemy as sa

from engine.runtime import queries
from engine.store.db import reading, unavailable
from engine.store.driver_reads import sqlite_reader
from engine.store.driver_rows import column_names
from tests.engine.conftest import Engine, make_flow

pytestmark = pytest.mark.timeout(60)

FLOW = make_flow("reads", [
    {"id": "start", "type": "trigger.manual"},
    {"id": "shape", "type": "set", "config": {"values": {"n": "{{ inputs.n }}", "label": "n is {{ inputs.n }}"}}},
    {"id": "done", "type": "terminal", "config": {"output": "{{ state.n }}"}},
], [("start", "shape"), ("shape", "done")], inputs={"n": {"type": "number", "required": True}})


def _through_sqlalchemy(sql: sa.Engine, run_id: str) -> dict[str, object] | None:
    with reading(sql) as conn:
        found = queries._read_run(queries._CoreRows(conn), run_id, True)
    return found[0] if found is not None else None


def test_a_run_read_through_the_driver_equals_the_same_read_through_sqlalchemy(engine: Engine) -> None:
    finished = engine.run(FLOW, {"n": 7})
    assert finished["status"] == "succeeded", finished
    sql = engine.services.require_handles().sql
    assert sql.dialect.name == "sqlite"

    by_driver = queries.get_run(sql, finished["id"])
    assert by_driver == _through_sqlalchemy(sql, finished["id"])
    assert by_driver is not None
    assert [step["step"] for step in by_driver["steps"]] == ["start", "shape", "done"]
    shape = engine.step(by_driver, "shape")
    assert shape["output"] == {"n": 7, "label": "n is 7"}
    at = queries.get_run_at(sql, finished["id"])
    assert at is not None and at.run == by_driver and at.seq > 0


def test_the_driver_hands_back_each_column_as_its_type_processes_it(engine: Engine) -> None:
    finished = engine.run(FLOW, {"n": 3})
    sql = engine.services.require_handles().sql
    columns = column_names(queries.RUNS.columns)
    with sqlite_reader(sql) as reader:
        (row,) = reader.rows(f"SELECT {columns} FROM runs WHERE id = ?", (finished["id"],), queries.RUNS)
    with reading(sql) as conn:
        expected = conn.execute(sa.select(queries.RUNS).where(queries.RUNS.c.id == finished["id"])).mappings().one()
    assert row == dict(expected)
    assert isinstance(row["created_at"], datetime) and row["created_at"].tzinfo is not None
    assert row["inputs"] == {"n": 3}


def test_an_unknown_run_reads_as_none(engine: Engine) -> None:
    sql = engine.services.require_handles().sql
    assert queries.get_run(sql, "no-such-run") is None
    assert queries.get_run_at(sql, "no-such-run") is None


def test_a_driver_error_comes_out_as_sqlalchemy_s_and_a_wrong_statement_is_not_an_outage(engine: Engine) -> None:
    sql = engine.services.require_handles().sql
    with pytest.raises(sa.exc.DBAPIError) as raised, sqlite_reader(sql) as reader:
        reader.values("SELECT no_such_column FROM runs", ())
    assert not unavailable(raised.value)
