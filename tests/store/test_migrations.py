"""Migrations create the schema the models describe, on SQLite and PostgreSQL, also when two
processes start at once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from engine.config import EngineConfig
from engine.store.db import init_db, make_engine, open_store, schema_revision
from engine.store.models import Base

HEAD = "0008_cancelled_parked_steps"


def test_models_and_migrations_agree(store: sa.Engine) -> None:
    with store.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        assert compare_metadata(context, Base.metadata) == []


def test_init_db_is_idempotent(store: sa.Engine) -> None:
    init_db(store)
    init_db(store)
    assert schema_revision(store) == HEAD
    tables = set(sa.inspect(store).get_table_names())
    assert set(Base.metadata.tables) <= tables


def test_fresh_database_has_no_revision(db_url: str) -> None:
    engine = make_engine(db_url)
    assert schema_revision(engine) is None
    init_db(engine)
    assert schema_revision(engine) == HEAD
    engine.dispose()


_MIGRATE = """
import sys
from engine.config import EngineConfig
from engine.store.db import init_db, make_engine, open_store, schema_revision
engine = make_engine(sys.argv[1])
init_db(engine)
print(schema_revision(engine))
"""


def test_two_processes_migrate_at_once(db_url: str) -> None:
    processes = [
        subprocess.Popen([sys.executable, "-c", _MIGRATE, db_url], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for _ in range(3)
    ]
    outcomes = [process.communicate(timeout=60) for process in processes]
    for process, (out, err) in zip(processes, outcomes, strict=True):
        assert process.returncode == 0, err.decode()
        assert out.decode().strip() == HEAD
    engine = make_engine(db_url)
    with engine.connect() as connection:
        versions = connection.execute(sa.text("SELECT version_num FROM alembic_version")).scalars().all()
    assert versions == [HEAD]
    engine.dispose()


def test_open_store_uses_the_data_folders_sqlite_by_default(tmp_path: Path) -> None:
    engine = open_store(EngineConfig(data_dir=tmp_path / "data"))
    try:
        assert engine.url.database == str(tmp_path / "data" / "lockgate.db")
        assert schema_revision(engine) == HEAD
    finally:
        engine.dispose()


def _engine_at(db_url: str, revision: str) -> sa.Engine:
    """The database at `db_url` migrated up to `revision` only, to hold rows as that revision wrote them."""
    from alembic import command

    from engine.store.db import _alembic_config

    engine = make_engine(db_url)
    with engine.begin() as connection:
        command.upgrade(_alembic_config(connection), revision)
    return engine


def _store_flow_f_v1(connection: sa.Connection) -> None:
    """Flow `f` with its version 1, as rows written at an older revision (the runs inserted next need them)."""
    connection.execute(sa.text("INSERT INTO flows (id, name, latest_version, enabled, created_at, updated_at) "
                               "VALUES ('f', 'f', 1, true, '2026-01-01', '2026-01-01')"))
    connection.execute(sa.text("INSERT INTO flow_versions (flow_id, version, content_hash, document, "
                               "published_at) VALUES ('f', 1, 'h', '{}', '2026-01-01')"))


def test_runs_stored_before_tokens_upgrade_with_zero_tokens_and_no_errors(db_url: str) -> None:
    engine = _engine_at(db_url, "0001")
    with engine.begin() as connection:
        _store_flow_f_v1(connection)
        connection.execute(sa.text("INSERT INTO runs (id, flow_id, version, status, inputs, state, cost_micros, "
                                   "last_seq, created_at, updated_at) VALUES ('r-old', 'f', 1, 'succeeded', '{}', "
                                   "'{}', 7, 0, '2026-01-01', '2026-01-01')"))
    init_db(engine)
    assert schema_revision(engine) == HEAD
    with engine.connect() as connection:
        row = connection.execute(sa.text("SELECT tokens_in, tokens_out, errors, cost_micros FROM runs")).one()
    assert tuple(row) == (0, 0, None, 7)
    engine.dispose()


def test_sequences_stored_before_0003_are_renumbered_per_run_and_last_seq_follows(db_url: str) -> None:
    engine = _engine_at(db_url, "0002")
    with engine.begin() as connection:
        _store_flow_f_v1(connection)
        for run_id, last_seq in (("r-a", 3), ("r-b", 1)):
            connection.execute(sa.text("INSERT INTO runs (id, flow_id, version, status, inputs, state, cost_micros, "
                                       "last_seq, created_at, updated_at) VALUES (:id, 'f', 1, 'succeeded', '{}', "
                                       "'{}', 0, :last, '2026-01-01', '2026-01-01')"), {"id": run_id, "last": last_seq})
        # r-a: approval_decided and run_resumed both stored as 2 (the producers' counts collided)
        stored_before = [("e1", "r-a", 1, "2026-01-01 00:00:01"), ("e2", "r-a", 2, "2026-01-01 00:00:02"),
                         ("e3", "r-a", 2, "2026-01-01 00:00:03"), ("e4", "r-a", 3, "2026-01-01 00:00:04"),
                         ("e5", "r-b", 1, "2026-01-01 00:00:01")]
        for event_id, run_id, seq, at in stored_before:
            connection.execute(sa.text("INSERT INTO applied_events (event_id, run_id, seq, event_type, applied_at) "
                                       "VALUES (:e, :r, :s, 'x', :at)"),
                               {"e": event_id, "r": run_id, "s": seq, "at": at})
    init_db(engine)
    assert schema_revision(engine) == HEAD
    with engine.connect() as connection:
        stored = connection.execute(sa.text("SELECT event_id, seq FROM applied_events ORDER BY event_id")).all()
        last: dict[str, int] = dict(connection.execute(sa.text("SELECT id, last_seq FROM runs")).all())
    assert [tuple(row) for row in stored] == [("e1", 1), ("e2", 2), ("e3", 3), ("e4", 4), ("e5", 1)]
    assert last == {"r-a": 4, "r-b": 1}
    engine.dispose()


def test_keys_made_before_rights_keep_every_right_they_had(db_url: str) -> None:
    from engine.approvals.keys import ALL_SCOPES, START_SCOPE, check_key, hash_key, list_keys

    engine = _engine_at(db_url, "0006_approvals_v2")
    key = "lgk_" + "k" * 43
    with engine.begin() as connection:
        connection.execute(sa.text("INSERT INTO api_keys (name, key_hash, scopes, created_at) "
                                   "VALUES ('old-bot', :hash, '[\"approvals:decide\"]', '2026-01-01')"),
                           {"hash": hash_key(key)})
    init_db(engine)
    assert [info.scopes for info in list_keys(engine)] == [list(ALL_SCOPES)]
    assert check_key(engine, key, START_SCOPE).refusal is None
    engine.dispose()


def test_parked_steps_of_runs_cancelled_before_0008_end_cancelled_with_their_run(db_url: str) -> None:
    engine = _engine_at(db_url, "0007_key_rights")
    with engine.begin() as connection:
        _store_flow_f_v1(connection)
        for run_id, status, finished in (("r-cancelled", "cancelled", "2026-01-02 10:00:00"),
                                         ("r-waiting", "waiting", None)):
            connection.execute(sa.text("INSERT INTO runs (id, flow_id, version, status, inputs, state, cost_micros, "
                                       "last_seq, created_at, updated_at, finished_at) VALUES (:id, 'f', 1, :status, "
                                       "'{}', '{}', 0, 0, '2026-01-01', '2026-01-01', :finished)"),
                               {"id": run_id, "status": status, "finished": finished})
            for step, step_status in (("start", "succeeded"), ("wait", "suspended")):
                connection.execute(sa.text("INSERT INTO steps (run_id, step, node_id, status, attempts) "
                                           "VALUES (:run, :step, :step, :status, 1)"),
                                   {"run": run_id, "step": step, "status": step_status})
    init_db(engine)
    assert schema_revision(engine) == HEAD
    with engine.connect() as connection:
        rows = connection.execute(sa.text("SELECT steps.run_id, step, steps.status, "
                                          "steps.finished_at = runs.finished_at FROM steps JOIN runs "
                                          "ON runs.id = steps.run_id ORDER BY steps.run_id, step")).all()
    assert [tuple(row) for row in rows] == [
        ("r-cancelled", "start", "succeeded", None), ("r-cancelled", "wait", "cancelled", True),
        ("r-waiting", "start", "succeeded", None), ("r-waiting", "wait", "suspended", None)]
    engine.dispose()
