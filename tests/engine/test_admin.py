"""`lockgate admin migrate` and `lockgate admin status`, and a worker refusing a schema that is not current, as
real `lockgate` processes on a fresh SQLite file and a fresh PostgreSQL database."""

from __future__ import annotations

import json
import os
from pathlib import Path

import redis
import sqlalchemy as sa

from engine.config import EngineConfig
from engine.flow import flow_from_data
from engine.host import EngineServices
from engine.store.db import init_db, make_engine, schema_revision
from tests.cli import cli_env, lockgate
from tests.engine.conftest import make_flow

PARKS = make_flow("parks", [{"id": "start", "type": "trigger.manual"},
                            {"id": "pause", "type": "queue", "config": {"delay": "1h"}},
                            {"id": "done", "type": "terminal"}], [("start", "pause"), ("pause", "done")])
ENDS = make_flow("ends", [{"id": "start", "type": "trigger.manual"}, {"id": "done", "type": "terminal"}],
                 [("start", "done")])


def test_a_worker_refuses_an_unmigrated_shared_database_until_admin_migrate(tmp_path: Path, redis_url: str,
                                                                             key_prefix: str, db_url: str) -> None:
    env = cli_env(tmp_path, redis_url, key_prefix, LOCKGATE_DB_URL=db_url)
    refused = lockgate(env, "worker", "--workers", "1")
    assert refused.returncode == 3, refused.stderr
    assert "has no lockgate schema yet" in refused.stderr and "run `lockgate admin migrate`" in refused.stderr
    supervised = lockgate(env, "worker", "--processes", "1", "--workers", "1")
    assert supervised.returncode == 3 and "lockgate admin migrate" in supervised.stderr
    sql = make_engine(db_url)
    try:
        assert schema_revision(sql) is None  # refusing wrote nothing
        migrated = lockgate(env, "admin", "migrate")
        assert migrated.returncode == 0, migrated.stderr
        assert "schema upgraded from nothing to" in migrated.stdout
        assert schema_revision(sql) is not None
        again = lockgate(env, "admin", "migrate")
        assert again.returncode == 0 and "nothing to do" in again.stdout
    finally:
        sql.dispose()


def test_a_schema_newer_than_the_code_is_refused_by_workers_and_migrate(tmp_path: Path, redis_url: str,
                                                                         key_prefix: str, db_url: str) -> None:
    sql = make_engine(db_url)
    try:
        init_db(sql)
        with sql.begin() as conn:
            conn.execute(sa.text("UPDATE alembic_version SET version_num = '9999_from_the_future'"))
    finally:
        sql.dispose()
    env = cli_env(tmp_path, redis_url, key_prefix, LOCKGATE_DB_URL=db_url)
    refused = lockgate(env, "worker", "--workers", "1")
    assert refused.returncode == 3
    assert "9999_from_the_future, newer than this lockgate" in refused.stderr
    migrate = lockgate(env, "admin", "migrate")
    assert migrate.returncode == 3 and "newer than this lockgate" in migrate.stderr
    status = json.loads(lockgate(env, "admin", "status", "--json").stdout)
    assert status["schema"]["status"] == "newer"


def test_admin_status_shows_processes_lease_streams_and_parked_runs(tmp_path: Path, redis_url: str, key_prefix: str,
                                                                     db_url: str) -> None:
    env = cli_env(tmp_path, redis_url, key_prefix, LOCKGATE_DB_URL=db_url)
    assert lockgate(env, "admin", "migrate").returncode == 0
    config = EngineConfig(data_dir=tmp_path / "data", redis_url=redis_url, db_url=db_url, key_prefix=key_prefix)
    services = EngineServices(config, workers=2, migrate=False, block_ms=100)
    services.start()
    try:
        services.publish_flow(flow_from_data(PARKS))
        services.publish_flow(flow_from_data(ENDS))
        parked = services.create_run("parks", {})
        services.wait_for_run(parked.run_id, statuses=frozenset({"waiting"}))
        assert services.wait_for_run(services.create_run("ends", {}).run_id)["status"] == "succeeded"
        redis.Redis.from_url(redis_url).xadd(services.keys.jobs_dead, {b"nonsense": b"1"})
        shown = lockgate(env, "admin", "status", "--json")
        assert shown.returncode == 0, shown.stderr
        status = json.loads(shown.stdout)
        text = lockgate(env, "admin", "status")
    finally:
        services.stop()
    [me] = [p for p in status["processes"] if p["pid"] == os.getpid()]
    assert me["role"] == "all" and me["workers"] == 2
    assert me["host"] in status["hosts"]
    assert len([name for name in status["worker_names"] if name.startswith(me["host"] + ":w")]) == 2
    assert f":{os.getpid()}:" in status["lease"]["holder"]
    assert 0 <= status["lease"]["renewed_seconds_ago"] <= 5
    assert status["runs_by_status"] == {"succeeded": 1, "waiting": 1}
    assert status["parked_by_reason"] == {"queue_delay": 1}
    assert status["dead_jobs"] == 1 and status["dead_events"] == 0
    assert status["jobs"]["stream"] == f"{key_prefix}:jobs" and status["jobs"]["pending"] == 0
    assert status["schema"]["status"] == "current"
    assert text.returncode == 0
    assert "projector lease: " in text.stdout and f":{os.getpid()}:" in text.stdout
    assert "parked runs by reason: queue_delay 1" in text.stdout
