"""Runs show their parent and children: `GET /api/v1/runs/{id}` and `lockgate runs show [--json]`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.api.conftest import Api
from tests.catalog_flow_call.flows import child_flow, parent_flow
from tests.cli import cli_env, lockgate
from tests.engine.conftest import Engine, start_engine


@pytest.mark.postgres
def test_the_api_shows_parent_and_children(any_db_api: Api) -> None:
    api = any_db_api
    api.publish(child_flow())
    api.publish(parent_flow())
    started = api.http.post("/api/v1/runs", json={"flow_id": "parent", "inputs": {"n": 1}, "wait": 10},
                            headers=api.headers())
    assert started.status_code in (201, 202), started.text
    parent_id = started.json()["run_id"]
    api.services.wait_for_run(parent_id)
    parent = api.http.get(f"/api/v1/runs/{parent_id}", headers=api.headers()).json()
    assert parent["parent_run_id"] is None
    [child_id] = parent["child_run_ids"]
    child = api.http.get(f"/api/v1/runs/{child_id}", headers=api.headers()).json()
    assert child["parent_run_id"] == parent_id and child["child_run_ids"] == []
    assert parent["result"] == {"doubled": 4}


def test_lockgate_runs_show_gives_parent_and_children(tmp_path: Path, redis_url: str, key_prefix: str) -> None:
    data = tmp_path / "data"
    services, sleeps = start_engine(tmp_path, redis_url, f"sqlite:///{data / 'lockgate.db'}", key_prefix)
    try:
        engine = Engine(services, sleeps)
        from engine.flow import flow_from_data

        services.publish_flow(flow_from_data(child_flow()))
        run = engine.run(parent_flow(), {"n": 3})
        [child_id] = run["child_run_ids"]
    finally:
        services.stop()
    env = cli_env(tmp_path, redis_url, key_prefix)
    shown = lockgate(env, "runs", "show", run["id"], "--json")
    assert shown.returncode == 0, shown.stderr
    data_out = json.loads(shown.stdout)
    assert data_out["parent_run_id"] is None and data_out["child_run_ids"] == [child_id]
    child = json.loads(lockgate(env, "runs", "show", child_id, "--json").stdout)
    assert child["parent_run_id"] == run["id"] and child["child_run_ids"] == []
    text = lockgate(env, "runs", "show", child_id).stdout
    assert f"called by run {run['id']}" in text
