"""`lockgate runs rerun` as a user runs it (real processes, SQLite and PostgreSQL): the counting server sees
no second upstream effect, a repeated effect needs --yes, refusals name their kind."""

from __future__ import annotations

import json
from pathlib import Path

from engine.read_models import RerunStarted
from tests.cli import cli_env, lockgate
from tests.engine.conftest import Site, make_flow


def test_lockgate_runs_rerun_reuses_the_upstream_steps(tmp_path: Path, redis_url: str, key_prefix: str,
                                                       db_url: str, site: Site) -> None:
    env = cli_env(tmp_path, redis_url, key_prefix, LOCKGATE_DB_URL=db_url)
    flow = tmp_path / "counted.flow.json"
    flow.write_text(json.dumps(make_flow("counted", [
        {"id": "start", "type": "trigger.manual"},
        {"id": "charge", "type": "http.request", "config": {"method": "POST", "url": site.url + "/charge",
                                                             "output_key": "charged"}},
        {"id": "notify", "type": "http.request", "config": {"method": "POST", "url": site.url + "/notify"}},
        {"id": "done", "type": "terminal", "config": {"output": "#{{ state.charged.body.count }}"}},
    ], [("start", "charge"), ("charge", "notify"), ("notify", "done")])))
    first = lockgate(env, "run", str(flow), "--json")
    assert first.returncode == 0, first.stderr
    run_id = json.loads(first.stdout)["id"]

    asked = lockgate(env, "runs", "rerun", run_id, "--from", "notify")
    assert asked.returncode == 1
    assert "already had their effect" in asked.stderr and "notify" in asked.stderr and "--yes" in asked.stderr
    assert site.hits == {"/charge": 1, "/notify": 1}

    rerun = lockgate(env, "runs", "rerun", run_id, "--from", "notify", "--yes", "--json")
    assert rerun.returncode == 0, rerun.stderr
    shown = json.loads(rerun.stdout)
    assert (shown["status"], shown["result"], shown["rerun_of"], shown["from_node"]) == (
        "succeeded", "#1", run_id, "notify")
    assert [(s["step"], s["reused_from"]) for s in shown["steps"]] == [
        ("start", run_id), ("charge", run_id), ("notify", None), ("done", None)]
    assert site.hits == {"/charge": 1, "/notify": 2}
    show = lockgate(env, "runs", "show", shown["id"]).stdout
    assert f"rerun of run {run_id} from node notify" in show
    charge = next(line for line in show.splitlines() if line.split()[:1] == ["charge"])
    assert "reused" in charge.split(), show

    detached = lockgate(env, "runs", "rerun", run_id, "--from", "done", "--detach", "--json")
    assert detached.returncode == 0, detached.stderr
    started = RerunStarted.model_validate_json(detached.stdout)  # the answer of POST /api/v1/runs/{id}/rerun
    assert (started.rerun_of, started.from_node) == (run_id, "done")
    assert started.reused_steps == ["start", "charge", "notify"] and started.run_id is not None

    unknown = lockgate(env, "runs", "rerun", run_id, "--from", "ghost")
    assert unknown.returncode == 1 and "unknown_node" in unknown.stderr
    bad = lockgate(env, "runs", "rerun", run_id, "--from", "notify", "--version", "newest")
    assert bad.returncode == 2 and "--version" in bad.stderr


def test_lockgate_runs_rerun_refuses_a_reused_callback_url_and_names_the_original_version(
        tmp_path: Path, redis_url: str, key_prefix: str) -> None:
    env = cli_env(tmp_path, redis_url, key_prefix)  # the data folder's SQLite
    flow = tmp_path / "told.flow.json"
    flow.write_text(json.dumps(make_flow("told", [
        {"id": "start", "type": "trigger.manual"},
        {"id": "tell", "type": "set", "config": {"values": {"url": "{{ callback_url('wait') }}"}}},
        {"id": "wait", "type": "wait.callback", "config": {"timeout": "0s"}},
        {"id": "late", "type": "terminal"},
    ], [("start", "tell"), ("tell", "wait"), ("wait", "timed_out", "late")])))
    first = lockgate(env, "run", str(flow), "--json")
    assert first.returncode == 0, first.stderr
    run_id = json.loads(first.stdout)["id"]

    refused = lockgate(env, "runs", "rerun", run_id, "--from", "wait", "--detach")
    assert refused.returncode == 1
    assert "callback_url_reused" in refused.stderr and 'Rerun from "tell" or earlier' in refused.stderr
    assert "differing nodes" not in refused.stderr
    unknown = lockgate(env, "runs", "rerun", run_id, "--from", "tell", "--version", "9")
    assert unknown.returncode == 1 and "unknown_version" in unknown.stderr
    assert "the original run's version (1)" in unknown.stderr and "latest" not in unknown.stderr
    listed = lockgate(env, "runs", "list", "--json")
    assert len(json.loads(listed.stdout)["runs"]) == 1, listed.stdout  # nothing started
