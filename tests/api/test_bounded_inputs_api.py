"""Over HTTP: inputs the engine cannot carry are a 422 `refused_inputs` naming their path, and nothing stored can
make the run list (GET /api/v1/runs, `lockgate runs list`) fail."""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import pytest
import sqlalchemy as sa

from engine.store.models import Run
from tests.api.conftest import Api, flow_doc
from tests.cli import LOCKGATE

ECHO = flow_doc("echo", [{"id": "start", "type": "trigger.manual"},
                         {"id": "done", "type": "terminal", "config": {"output": "{{ inputs.data }}"}}],
                [("start", "done")], {"data": {"type": "any"}})


def _nested(depth: int) -> Any:
    value: Any = []
    for _ in range(depth - 1):
        value = [value]
    return value


@pytest.mark.parametrize("depth", [65, 200, 253, 600])
def test_a_deep_input_is_a_422_naming_its_path(any_db_api: Api, depth: int) -> None:
    api = any_db_api
    api.publish(ECHO)
    answer = api.http.post("/api/v1/runs", json={"flow_id": "echo", "inputs": {"data": _nested(depth)}},
                           headers=api.headers())
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert error["code"] == "refused_inputs"
    assert "$.inputs.data[0][0]" in error["message"] and "nested deeper than 64" in error["message"]
    assert api.services.list_runs() == []
    listed = api.http.get("/api/v1/runs", headers=api.headers())
    assert listed.status_code == 200 and listed.json()["runs"] == []


def _store_run(api: Api, run_id: str, inputs: dict[str, Any], result: Any = None) -> None:
    """A run row as one stored before inputs were bounded (or written by any other hand) may look."""
    assert api.services.sql is not None
    now = datetime.now(UTC)
    with api.services.sql.begin() as conn:
        conn.execute(sa.insert(cast(sa.Table, Run.__table__)).values(
            id=run_id, flow_id="echo", version=1, status="succeeded", trigger="start", inputs=inputs, state={},
            result=result, cost_micros=0, last_seq=0, created_at=now, updated_at=now))


def _assert_listed(api: Api, bad_ids: list[str]) -> None:
    good = api.services.create_run("echo", {"data": [1, 2]}).run_id
    api.services.wait_for_run(good)
    listed = api.http.get("/api/v1/runs", headers=api.headers())
    assert listed.status_code == 200, listed.text
    runs = {run["id"]: run for run in listed.json()["runs"]}
    assert set(runs) == {good, *bad_ids}
    assert runs[good]["inputs"] == {"data": [1, 2]}
    for run_id in bad_ids:
        assert "not shown" in json.dumps(runs[run_id]["inputs"])
        one = api.http.get(f"/api/v1/runs/{run_id}", headers=api.headers())
        assert one.status_code == 200, one.text
        assert one.json()["id"] == run_id


def test_a_stored_deep_run_does_not_break_the_list(any_db_api: Api) -> None:
    api = any_db_api
    api.publish(ECHO)
    _store_run(api, "deep-inputs", {"data": _nested(300)}, result=_nested(300))
    _assert_listed(api, ["deep-inputs"])


def test_a_stored_lone_surrogate_does_not_break_the_list(api: Api, tmp_path: Path) -> None:
    # SQLite only: PostgreSQL's jsonb refuses to store a lone surrogate at all.
    api.publish(ECHO)
    _store_run(api, "surrogate-inputs", {"data": "bad \ud800", "\udc00": 1})
    _assert_listed(api, ["surrogate-inputs"])


def test_lockgate_runs_list_shows_stored_runs_it_cannot_fully_print(api: Api, tmp_path: Path) -> None:
    api.publish(ECHO)
    _store_run(api, "deep-inputs", {"data": _nested(300)})
    _store_run(api, "surrogate-inputs", {"data": "bad \ud800"})
    config = api.services.config
    env = {"LOCKGATE_DATA_DIR": str(config.data_dir), "LOCKGATE_DB_URL": config.sql_url,
           "LOCKGATE_KEY_PREFIX": config.key_prefix, "LOCKGATE_REDIS_URL": config.redis_url or "",
           "PATH": "/usr/bin:/bin", "PYTHONIOENCODING": "utf-8"}
    import os

    env = {**os.environ, **env}
    human = subprocess.run([*LOCKGATE, "runs", "list"], env=env, capture_output=True, text=True, timeout=60)
    assert human.returncode == 0, human.stderr
    assert "deep-inputs" in human.stdout and "surrogate-inputs" in human.stdout
    as_json = subprocess.run([*LOCKGATE, "runs", "list", "--json"], env=env, capture_output=True, text=True,
                             timeout=60)
    assert as_json.returncode == 0, as_json.stderr
    assert {run["id"] for run in json.loads(as_json.stdout)["runs"]} == {"deep-inputs", "surrogate-inputs"}
    shown = subprocess.run([*LOCKGATE, "runs", "show", "surrogate-inputs", "--json"], env=env, capture_output=True,
                           text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr
    assert "not shown" in json.loads(shown.stdout)["inputs"]["data"]
