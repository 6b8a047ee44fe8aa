"""SQLite settings: WAL, busy timeout, foreign keys, and writers that queue instead of failing."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa

from engine.store.db import init_db, make_engine, normalize_url, read_scope, session_scope
from engine.store.models import FlowRecord


@pytest.fixture
def sqlite_store(sqlite_url: str) -> sa.Engine:
    engine = make_engine(sqlite_url)
    init_db(engine)
    return engine


def test_pragmas(sqlite_store: sa.Engine) -> None:
    with sqlite_store.connect() as connection:
        assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert connection.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
        assert connection.exec_driver_sql("PRAGMA busy_timeout").scalar() == 30_000


def test_foreign_keys_are_enforced(sqlite_store: sa.Engine) -> None:
    with pytest.raises(sa.exc.IntegrityError), session_scope(sqlite_store) as session:
        session.execute(
            sa.text(
                "INSERT INTO flow_versions (flow_id, version, content_hash, document, published_at) "
                "VALUES ('nowhere', 1, 'h', '{}', '2026-01-01 00:00:00')"
            )
        )


def test_concurrent_read_modify_write_transactions_neither_lock_nor_lose_updates(sqlite_store: sa.Engine) -> None:
    # A DEFERRED transaction that reads then writes fails with "database is locked" under this
    # contention; BEGIN IMMEDIATE makes each writer wait for the lock up front.
    now = datetime.now(UTC)
    with session_scope(sqlite_store) as session:
        session.add(FlowRecord(id="counter", name="", latest_version=0, enabled=True, created_at=now, updated_at=now))
    errors: list[BaseException] = []
    workers, rounds = 6, 40

    def bump() -> None:
        try:
            for _ in range(rounds):
                with session_scope(sqlite_store) as session:
                    record = session.get(FlowRecord, "counter")
                    assert record is not None
                    value = record.latest_version
                    session.execute(sa.text("SELECT count(*) FROM runs"))  # widen the read-write window
                    record.latest_version = value + 1
        except BaseException as exc:  # collected for the main thread's assertion
            errors.append(exc)

    threads = [threading.Thread(target=bump) for _ in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    with read_scope(sqlite_store) as session:
        record = session.get(FlowRecord, "counter")
        assert record is not None and record.latest_version == workers * rounds


def test_reader_is_not_blocked_by_an_open_writer(sqlite_store: sa.Engine) -> None:
    writer = sqlite_store.connect()
    writer.begin()
    writer.execute(
        sa.text("INSERT INTO dead_letters (source, payload, error, created_at) VALUES ('t', x'00', 'e', '2026-01-01')")
    )
    try:
        with read_scope(sqlite_store) as session:
            assert session.execute(sa.text("SELECT count(*) FROM dead_letters")).scalar() == 0
    finally:
        writer.rollback()
        writer.close()


def test_postgres_urls_use_psycopg_3() -> None:
    assert normalize_url("postgresql://root@127.0.0.1:5432/x") == "postgresql+psycopg://root@127.0.0.1:5432/x"
    assert normalize_url("postgres://root@h/x") == "postgresql+psycopg://root@h/x"
    assert normalize_url("sqlite:///a.db") == "sqlite:///a.db"
