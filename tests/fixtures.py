"""Fixtures for real services: the machine's Redis (or the embedded one), SQLite files, PostgreSQL."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import redis

MACHINE_REDIS_URL = os.environ.get("LOCKGATE_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
PG_ADMIN_URL = os.environ.get("LOCKGATE_TEST_PG_URL", "postgresql+psycopg://root@127.0.0.1:5432/test")


def _redis_answers(url: str) -> bool:
    try:
        return bool(redis.Redis.from_url(url, socket_timeout=1, socket_connect_timeout=1).ping())
    except redis.RedisError:
        return False


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real Redis server: the machine's when it answers, else the embedded one."""
    if _redis_answers(MACHINE_REDIS_URL):
        yield MACHINE_REDIS_URL
        return
    from engine.transport.embedded import EmbeddedRedis  # the store helper's module

    server = EmbeddedRedis(tmp_path_factory.mktemp("redis"))
    server.start()
    try:
        yield server.url
    finally:
        server.stop()


@contextmanager
def own_key_prefix(redis_url: str) -> Iterator[str]:
    """A fresh Redis key namespace; its keys are deleted afterwards."""
    prefix = f"lgtest-{uuid.uuid4().hex[:12]}"
    yield prefix
    client = redis.Redis.from_url(redis_url, socket_timeout=5)
    keys = list(client.scan_iter(match=f"{prefix}:*", count=1000))
    if keys:
        client.delete(*keys)


@pytest.fixture
def key_prefix(redis_url: str) -> Iterator[str]:
    """A Redis key namespace of this test alone; its keys are deleted afterwards."""
    with own_key_prefix(redis_url) as prefix:
        yield prefix


def _pg_answers() -> bool:
    try:
        import sqlalchemy as sa

        engine = sa.create_engine(PG_ADMIN_URL, connect_args={"connect_timeout": 2})
        with engine.connect() as conn:
            conn.execute(sa.text("select 1"))
        engine.dispose()
        return True
    except Exception:
        return False


PG_AVAILABLE = _pg_answers()


@pytest.fixture
def sqlite_url(tmp_path) -> str:  # type: ignore[no-untyped-def]
    """A fresh SQLite file."""
    return f"sqlite:///{tmp_path / 'lockgate.db'}"


@contextmanager
def own_pg_database() -> Iterator[str]:
    """A fresh PostgreSQL database's URL, dropped afterwards; skips the test where no server answers."""
    if not PG_AVAILABLE:
        pytest.skip("no PostgreSQL answers at 127.0.0.1:5432 on this machine")
    import sqlalchemy as sa

    name = f"lgtest_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    try:
        yield PG_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A fresh PostgreSQL database, dropped afterwards; skipped only where no server answers."""
    with own_pg_database() as url:
        yield url


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request: pytest.FixtureRequest) -> str:
    """Each test that takes it runs on SQLite and on PostgreSQL."""
    if request.param == "sqlite":
        return str(request.getfixturevalue("sqlite_url"))
    return str(request.getfixturevalue("pg_url"))
