"""Group commit of new run records: run starts that arrive while a transaction is under way share the next one,
and each start gets its own outcome."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import pytest
import sqlalchemy as sa

from engine.flow import flow_from_data
from engine.ids import time_ordered_id
from engine.publish import publish
from engine.runtime.run_records import RUNS, RunRecords
from engine.runtime.write_lock import sqlite_writer
from engine.store.db import init_db, make_engine

pytestmark = pytest.mark.timeout(60)

FLOW = {"format": "lockgate.flow/1", "id": "f", "name": "One node",
        "nodes": [{"id": "start", "type": "trigger.manual", "config": {}},
                  {"id": "done", "type": "terminal", "config": {}}],
        "edges": [{"from": "start", "to": "done"}]}


def _record(key: str | None = None) -> dict[str, Any]:
    now = datetime.now(UTC)
    return {"id": time_ordered_id(), "flow_id": "f", "version": 1, "status": "queued", "trigger": "start",
            "idempotency_key": key, "inputs": {}, "state": {}, "errors": None, "cost_micros": 0, "tokens_in": 0,
            "tokens_out": 0, "last_seq": 0, "created_at": now, "updated_at": now, "parent_run_id": None,
            "call_depth": 0, "rerun_of": None, "from_node": None, "started_by": None}


@pytest.fixture
def sql(db_url: str) -> Iterator[sa.Engine]:
    engine = make_engine(db_url)
    init_db(engine)
    publish(engine, flow_from_data(FLOW))
    yield engine
    engine.dispose()


@contextmanager
def writes_held(engine: sa.Engine) -> Iterator[sa.Connection | None]:
    """Another writer holds the database: SQLite's writer lock, or an exclusive lock on PostgreSQL's runs table
    (yields the connection holding it there)."""
    if engine.dialect.name == "sqlite":
        with sqlite_writer(engine):
            yield None
        return
    with engine.begin() as conn:
        conn.execute(sa.text(f"LOCK TABLE {RUNS.name} IN EXCLUSIVE MODE"))
        yield conn


def _wait_until(condition: Any, what: str) -> None:
    deadline = time.monotonic() + 20
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def _start(records: RunRecords, rows: list[dict[str, Any]]) -> tuple[list[threading.Thread], dict[str, object]]:
    outcomes: dict[str, object] = {}

    def insert(row: dict[str, Any]) -> None:
        try:
            records.insert(row)
            outcomes[row["id"]] = "written"
        except Exception as exc:
            outcomes[row["id"]] = exc

    threads = [threading.Thread(target=insert, args=(row,)) for row in rows]
    for thread in threads:
        thread.start()
    return threads, outcomes


def _stored(engine: sa.Engine) -> set[str]:
    with engine.connect() as conn:
        return set(conn.execute(sa.select(RUNS.c.id)).scalars())


def test_starts_arriving_during_a_commit_share_the_next_one(sql: sa.Engine) -> None:
    records = RunRecords(sql)
    commits = [0]
    holder: list[sa.Connection | None] = [None]

    def committed(conn: sa.Connection) -> None:
        if conn is not holder[0]:
            commits[0] += 1

    sa.event.listen(sql, "commit", committed)
    rows = [_record() for _ in range(12)]
    with writes_held(sql) as holder[0]:
        threads, outcomes = _start(records, rows)
        _wait_until(lambda: records.waiting >= len(rows) - 1, "every start queued behind the first")
    for thread in threads:
        thread.join(20)
    assert outcomes == {row["id"]: "written" for row in rows}
    assert _stored(sql) == {row["id"] for row in rows}
    assert 1 <= commits[0] <= 2, f"{commits[0]} transactions for {len(rows)} records"


def test_a_refused_record_fails_only_its_own_start(sql: sa.Engine) -> None:
    records = RunRecords(sql)
    first = _record("order-1")
    records.insert(first)
    duplicate = _record("order-1")
    others = [_record(f"order-{n}") for n in range(2, 7)]
    with writes_held(sql):
        threads, outcomes = _start(records, [*others[:2], duplicate, *others[2:]])
        _wait_until(lambda: records.waiting >= len(others), "every start queued behind the first")
    for thread in threads:
        thread.join(20)
    assert isinstance(outcomes.pop(duplicate["id"]), sa.exc.IntegrityError)
    assert outcomes == {row["id"]: "written" for row in others}
    assert _stored(sql) == {first["id"], *(row["id"] for row in others)}


def test_a_lone_start_commits_at_once(sql: sa.Engine) -> None:
    records = RunRecords(sql)
    row = _record()
    records.insert(row)
    assert _stored(sql) == {row["id"]}
    assert records.waiting == 0
