"""`lockgate run`'s progress on stderr names each step's node type, the skipped steps' too (the read model fills
theirs from the run's flow version): `  late (terminal): skipped`, not `  late (?): skipped`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.cli.run import RunProgress
from engine.read_models import Run, Step
from tests.cli import cli_env, lockgate
from tests.cli_commands.conftest import write_flow
from tests.engine.conftest import make_flow

BRANCHED = make_flow(
    "branched",
    [
        {"id": "start", "type": "trigger.manual"},
        {"id": "route", "type": "router", "config": {"branches": [{"port": "late", "when": "{{ false }}"}]}},
        {"id": "late", "type": "terminal", "config": {"output": "late"}},
        {"id": "done", "type": "terminal", "config": {"output": "done"}},
    ],
    [("start", "route"), ("route", "late", "late"), ("route", "default", "done")],
)


def test_a_skipped_step_is_shown_with_its_nodes_type(capsys: pytest.CaptureFixture[str]) -> None:
    run = Run(id="r1", flow_id="branched", version=1, status="running", steps=[
        Step(step="route", node="route", type="router", status="succeeded"),
        Step(step="late", node="late", type="terminal", status="skipped"),
    ])
    RunProgress()(run)
    lines = capsys.readouterr().err.splitlines()
    assert "  late (terminal): skipped" in lines, lines
    assert "  route (router): succeeded" in lines, lines


def test_lockgate_run_names_the_skipped_steps_type(tmp_path: Path, redis_url: str, key_prefix: str) -> None:
    env = cli_env(tmp_path, redis_url, key_prefix)
    done = lockgate(env, "run", str(write_flow(tmp_path, BRANCHED)), "--timeout", "30")
    assert done.returncode == 0, done.stderr
    assert "  late (terminal): skipped" in done.stderr.splitlines(), done.stderr
    assert "(?)" not in done.stderr, done.stderr


PAUSED = make_flow(
    "paused",
    [
        {"id": "start", "type": "trigger.manual"},
        {"id": "pause", "type": "queue", "config": {"delay": "1s"}},
        {"id": "done", "type": "terminal", "config": {"output": "done"}},
    ],
    [("start", "pause"), ("pause", "done")],
)


def test_lockgate_runs_rerun_says_where_its_run_parks(tmp_path: Path, redis_url: str, key_prefix: str) -> None:
    """Without --detach, `runs rerun` waits through parks as `lockgate run` does, and says so: a rerun parked for a
    day was a silent wait of a day."""
    env = cli_env(tmp_path, redis_url, key_prefix)
    original = lockgate(env, "run", str(write_flow(tmp_path, PAUSED)), "--json", "--timeout", "30")
    assert original.returncode == 0, original.stderr
    run_id = json.loads(original.stdout)["id"]
    rerun = lockgate(env, "runs", "rerun", run_id, "--from", "pause")
    assert rerun.returncode == 0, rerun.stderr
    assert any(line.startswith("run ") and " parked at pause (queue_delay) until " in line
               for line in rerun.stderr.splitlines()), rerun.stderr
