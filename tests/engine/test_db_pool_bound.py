"""The concurrency control loop's DB-pool bound is the running engine's own SQL pool."""

from __future__ import annotations

from pathlib import Path

import redis
import sqlalchemy as sa
from sqlalchemy.pool import NullPool

from engine.concurrency.control import ControlLoop, sql_pool_limit
from engine.concurrency.settings import AimdSettings
from engine.host import SQLITE_POOL
from engine.store.db import make_engine
from engine.transport.keys import Keyspace
from tests.engine.conftest import Engine

# The pools EngineServices opens: SQLite's SQLITE_POOL kept + as many overflow, PostgreSQL's 10 + 10.
EXPECTED = {"sqlite": 2 * SQLITE_POOL, "postgresql": 20}


def test_a_running_engine_bounds_the_cap_by_its_sql_pool(any_db_engine: Engine) -> None:
    services = any_db_engine.services
    assert services.sql is not None
    control = services.money.control
    assert isinstance(control, ControlLoop)
    limits = control.limits()
    assert limits.db_pool == EXPECTED[services.sql.dialect.name]
    assert limits.db_pool < limits.ceiling
    pool = services.sql.pool
    assert limits.db_pool == pool.size() + pool._max_overflow  # type: ignore[attr-defined]


def test_the_loop_moves_the_cap_toward_a_small_pool(tmp_path: Path, redis_url: str, key_prefix: str) -> None:
    sql = make_engine(f"sqlite:///{tmp_path / 'small.db'}", pool_size=2, max_overflow=1)
    loop = ControlLoop(redis.Redis.from_url(redis_url), Keyspace(key_prefix), [],
                       settings=AimdSettings(static_cap=8, ceiling=64), db_pool_limit=sql_pool_limit(sql),
                       host_limit=64)
    tick = loop.tick()
    assert tick.limits.db_pool == 3 and tick.limits.target == 3
    for _ in range(6):
        tick = loop.tick()
    assert tick.cap == 3


def test_pools_without_a_bound_leave_the_ceiling() -> None:
    assert sql_pool_limit(sa.create_engine("sqlite://", poolclass=NullPool)) is None
    assert sql_pool_limit(sa.create_engine("sqlite://")) is None  # one connection per thread
    assert sql_pool_limit(make_engine("postgresql://127.0.0.1/test", pool_size=4, max_overflow=-1)) is None
    assert sql_pool_limit(make_engine("postgresql://127.0.0.1/test", pool_size=4, max_overflow=3)) == 7
