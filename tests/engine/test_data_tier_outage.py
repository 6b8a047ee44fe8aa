"""A database that does not answer is no fault of the run: the worker hands its batch back and runs it once the
database answers again, instead of failing the run as an engine error (`engine.store.db.unavailable`).

Real errors from real drivers: a PostgreSQL address where nothing listens, a SQLite file another connection
holds, a connection pool with nothing left, and next to them the errors trying again cannot fix."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest
import redis
import sqlalchemy as sa

from engine.flow import flow_from_data
from engine.outages import described, outage
from engine.runtime.worker import PlanCache
from engine.store.db import make_engine, unavailable
from tests.engine.conftest import make_flow, start_engine

NOBODY_LISTENS = "postgresql://postgres@127.0.0.1:1/lockgate"


def _raised(action: object) -> BaseException:
    assert callable(action)
    with pytest.raises(Exception) as caught:
        action()
    return caught.value


def _insert(engine: sa.Engine, key: int) -> None:
    with engine.begin() as conn:
        conn.execute(sa.text("INSERT INTO t (id) VALUES (:id)"), {"id": key})


def _select_missing(engine: sa.Engine) -> None:
    with engine.connect() as conn:
        conn.execute(sa.text("SELECT * FROM no_such_table"))


def test_a_refused_connection_a_busy_file_and_a_full_pool_are_unavailable_a_wrong_statement_is_not(
        tmp_path: Path) -> None:
    refused = make_engine(NOBODY_LISTENS)
    assert unavailable(_raised(lambda: refused.connect().close()))

    url = f"sqlite:///{tmp_path / 'busy.db'}"
    holder = make_engine(url)
    with holder.begin() as conn:
        conn.execute(sa.text("CREATE TABLE t (id INTEGER PRIMARY KEY)"))
    impatient = sa.create_engine(url, connect_args={"timeout": 0})
    with holder.begin() as held:  # holds the file's write lock (BEGIN IMMEDIATE)
        held.execute(sa.text("INSERT INTO t (id) VALUES (2)"))
        busy = _raised(lambda: _insert(impatient, 3))
    impatient.dispose()
    assert isinstance(busy, sa.exc.OperationalError) and unavailable(busy)

    with holder.begin() as conn:
        conn.execute(sa.text("INSERT INTO t (id) VALUES (1)"))
    missing = _raised(lambda: _select_missing(holder))
    assert isinstance(missing, sa.exc.OperationalError) and not unavailable(missing)

    assert not unavailable(_raised(lambda: _insert(holder, 1)))  # the key is taken

    small = make_engine(url, pool_size=1, max_overflow=0, pool_timeout=0.1)
    with small.connect():
        full = _raised(lambda: small.connect())
    assert isinstance(full, sa.exc.TimeoutError) and unavailable(full)
    assert not unavailable(ValueError("a bug of ours"))


def test_a_worker_whose_database_is_away_keeps_the_run_and_runs_it_when_the_database_answers(
        tmp_path: Path, redis_url: str, sqlite_url: str, key_prefix: str, caplog: pytest.LogCaptureFixture) -> None:
    services, _ = start_engine(tmp_path, redis_url, sqlite_url, key_prefix, workers=1)
    try:
        assert services.sql is not None
        services.publish_flow(flow_from_data(make_flow("away", [
            {"id": "start", "type": "trigger.manual"},
            {"id": "done", "type": "terminal", "config": {"output": "ok"}},
        ], [("start", "done")])))
        worker = services.workers[0]
        worker.plans = PlanCache(make_engine(NOBODY_LISTENS))
        with caplog.at_level(logging.WARNING, logger="lockgate.worker"):
            run_id = services.create_run("away").run_id
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and "the database failed mid-batch" not in caplog.text:
                time.sleep(0.05)
            assert "the database failed mid-batch" in caplog.text
            time.sleep(2.5)  # the worker tries again each second: the run must stay unfailed meanwhile
        run = services.get_run(run_id, with_steps=False)
        assert run is not None and run["status"] not in ("failed", "succeeded"), run

        worker.plans = PlanCache(services.sql)
        done = services.wait_for_run(run_id, timeout=30)
        assert done["status"] == "succeeded", done
        assert done["error_type"] is None
    finally:
        services.stop()


def test_background_loops_tell_an_outage_from_a_fault() -> None:
    refused = _raised(lambda: redis.Redis(port=1, socket_connect_timeout=1).ping())
    assert outage(refused) and described(refused).startswith("ConnectionError: ")
    assert outage(_raised(lambda: make_engine(NOBODY_LISTENS).connect().close()))
    assert not outage(redis.ResponseError("WRONGTYPE Operation against a key holding the wrong kind of value"))
    assert not outage(KeyError("a bug of ours"))
