"""SQL engines for SQLite and PostgreSQL, schema upgrades, and transaction scopes.

SQLite: WAL (readers never block the writer), ``busy_timeout`` (writers wait instead of failing),
foreign keys on, and every transaction begun ``BEGIN IMMEDIATE`` so a writer takes the write lock
up front; a DEFERRED transaction that reads and then writes can fail with "database is locked"
when another writer got there first, which busy_timeout cannot fix. Read-only scopes
(`read_scope`) begin DEFERRED so readers do not queue behind writers.

PostgreSQL: psycopg 3 (``postgresql+psycopg://``); plain ``postgresql://`` URLs are mapped to it.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson
import sqlalchemy as sa
from sqlalchemy.orm import Session

from engine.config import EngineConfig
from engine.store.driver_rows import driver_errors

BUSY_TIMEOUT_MS = 30_000
READ_ONLY_OPTION = "lockgate_read_only"
# Any constant works; both processes just need the same one.
_PG_MIGRATION_LOCK_ID = 0x4C6F636B  # "Lock"
SCHEMA_HEAD = "0008_cancelled_parked_steps"
_SQLITE_TRANSIENT = {sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_FULL,
                     sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_PROTOCOL}
"""SQLite's primary result codes for a file that is busy, locked, unwritable or full for now."""
"""The newest migration's revision (a test holds it to Alembic's head). A database already there is used without
importing Alembic, which each engine process would otherwise load (about 11 MB) only to find nothing to do."""


def normalize_url(url: str) -> str:
    """Map `postgres://` / `postgresql://` to the psycopg 3 driver; leave others as they are."""
    for plain in ("postgres://", "postgresql://"):
        if url.startswith(plain):
            return "postgresql+psycopg://" + url[len(plain) :]
    return url


def sqlite_database(db_url: str) -> Path | None:
    """The file a SQLite URL names; None for another database, an in-memory one, or a URL that does not parse
    (the store reports that one)."""
    try:
        url = sa.make_url(db_url)
    except sa.exc.ArgumentError:
        return None
    if url.get_backend_name() != "sqlite" or not url.database or url.database == ":memory:" \
            or url.database.startswith("file:"):
        return None
    return Path(url.database)


def json_text(value: Any) -> str:
    """JSON columns' text: orjson (5-10x the standard library's speed); values it refuses (integers beyond 64
    bits) fall back to the standard library."""
    try:
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()
    except orjson.JSONEncodeError:
        return json.dumps(value)


def json_value(text: str | bytes) -> Any:
    """A JSON column's value; text orjson refuses (NaN written by the standard library) falls back to it."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    # Let SQLAlchemy's `begin` event issue BEGIN itself (pysqlite would otherwise defer it).
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA synchronous=NORMAL")  # durable across app crashes in WAL; fsyncs at checkpoints
    cursor.close()


def _sqlite_begin(connection: sa.Connection) -> None:
    # On the driver connection: SQLAlchemy's statement path would cost more than the BEGIN, on every transaction.
    statement = "BEGIN" if connection.get_execution_options().get(READ_ONLY_OPTION) else "BEGIN IMMEDIATE"
    driver = connection.connection.driver_connection
    assert driver is not None, "a connection beginning a transaction has its driver connection"
    with driver_errors(statement):  # e.g. still busy after the busy timeout: `unavailable` reads it as an outage
        driver.execute(statement)


def make_engine(url: str, **options: Any) -> sa.Engine:
    """An engine for `url` (SQLite file or PostgreSQL) configured as the module docstring says."""
    url = normalize_url(url)
    options.setdefault("json_serializer", json_text)
    options.setdefault("json_deserializer", json_value)
    parsed = sa.make_url(url)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            Path(parsed.database).expanduser().parent.mkdir(parents=True, exist_ok=True)
        connect_args = {"timeout": BUSY_TIMEOUT_MS / 1000, "check_same_thread": False}
        engine = sa.create_engine(url, connect_args=connect_args, **options)
        sa.event.listen(engine, "connect", _sqlite_pragmas)
        sa.event.listen(engine, "begin", _sqlite_begin)
        return engine
    options.setdefault("pool_pre_ping", True)
    return sa.create_engine(url, **options)


def _alembic_config(connection: sa.Connection) -> Any:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(Path(__file__).parent / "migrations"))
    config.attributes["connection"] = connection
    return config


def init_db(engine: sa.Engine) -> None:
    """Upgrade the schema to the newest migration. Idempotent; two processes may call it at once
    (SQLite: the IMMEDIATE transaction serializes them; PostgreSQL: an advisory transaction lock)."""
    if schema_revision(engine) == SCHEMA_HEAD:
        return
    from alembic import command

    with engine.begin() as connection:
        if connection.dialect.name == "postgresql":
            connection.execute(sa.text("SELECT pg_advisory_xact_lock(:id)"), {"id": _PG_MIGRATION_LOCK_ID})
        command.upgrade(_alembic_config(connection), "head")


def open_store(config: EngineConfig) -> sa.Engine:
    """The engine's SQL database (`config.db_url`, else `data_dir/lockgate.db`), migrated to head."""
    engine = make_engine(config.sql_url)
    init_db(engine)
    return engine


def schema_revision(engine: sa.Engine) -> str | None:
    """The migration the database is at (None when it has never been initialised): Alembic's version table, read
    as Alembic reads it."""
    with engine.connect() as plain:
        connection = plain.execution_options(**{READ_ONLY_OPTION: True})  # SQLite: takes no write lock
        if not sa.inspect(connection).has_table("alembic_version"):
            return None
        heads = list(connection.execute(sa.text("SELECT version_num FROM alembic_version")).scalars())
    if len(heads) > 1:
        raise RuntimeError(f"the database has several schema heads ({', '.join(heads)}); lockgate's migrations "
                           "have one")
    return heads[0] if heads else None


def unavailable(exc: BaseException) -> bool:
    """Whether `exc` says the database did not answer for now (a lost, refused or timed-out connection, a full
    pool, a busy or full SQLite file), so trying again later can succeed. A wrong statement, a missing table or
    a constraint broken is not: that is a fault of ours or of the data, and trying again repeats it."""
    if isinstance(exc, sa.exc.TimeoutError | sa.exc.DisconnectionError):
        return True
    if not isinstance(exc, sa.exc.DBAPIError):
        return False
    if exc.connection_invalidated:
        return True
    orig = exc.orig
    if isinstance(orig, sqlite3.OperationalError):
        return (orig.sqlite_errorcode & 0xFF) in _SQLITE_TRANSIENT
    psycopg = sys.modules.get("psycopg")
    # psycopg's OperationalError: no connection, a server shutting down, a statement cancelled, a deadlock.
    return psycopg is not None and isinstance(orig, psycopg.OperationalError)


@contextmanager
def session_scope(engine: sa.Engine) -> Iterator[Session]:
    """A session in one write transaction: committed on success, rolled back on an exception."""
    with Session(engine, expire_on_commit=False) as session, session.begin():
        yield session


@contextmanager
def reading(engine: sa.Engine) -> Iterator[sa.Connection]:
    """A connection for reads only, in one transaction (SQLite: DEFERRED, so it never waits for a writer's lock
    as the default BEGIN IMMEDIATE does; every statement sees the same snapshot)."""
    with engine.connect() as connection:
        connection = connection.execution_options(**{READ_ONLY_OPTION: True})
        with connection.begin():
            yield connection


@contextmanager
def read_scope(engine: sa.Engine) -> Iterator[Session]:
    """A session for reading only (SQLite: a DEFERRED transaction that never blocks writers)."""
    with engine.connect() as connection:
        connection = connection.execution_options(**{READ_ONLY_OPTION: True})
        with Session(bind=connection, expire_on_commit=False) as session, session.begin():
            yield session
