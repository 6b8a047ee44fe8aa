"""A worker that dies during a `script` step: the script and what it started die with it, and the run fails with
`step_not_idempotent` unless the node says `idempotent: true` (then the script runs again and the run goes on)."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest

from tests.chaos.conftest import TRIGGER, Deployment
from tests.engine.conftest import make_flow, wait_until


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as file:
            return file.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _script_flow(flow_id: str, code: str, idempotent: bool | None) -> dict[str, Any]:
    script: dict[str, Any] = {"id": "work", "type": "script",
                              "config": {"language": "python", "code": code, "output_key": "out"}}
    if idempotent is not None:
        script["idempotent"] = idempotent
    end = {"id": "end", "type": "terminal", "config": {"output": "{{ state.out }}"}}
    return make_flow(flow_id, [TRIGGER, script, end], [("start", "work"), ("work", "end")])


def _blocking_code(pidfile: Path) -> str:
    """Writes its pid and a forked child's pid, then both sleep far past the test."""
    return ("import os, time\n"
            f"path = {str(pidfile)!r}\n"
            "child = os.fork()\n"
            "if child == 0:\n"
            "    time.sleep(120)\n"
            "    os._exit(0)\n"
            "open(path + '.cwd', 'w').write(os.getcwd())\n"
            "open(path, 'a').write(f'{os.getpid()}\\n{child}\\n')\n"
            "time.sleep(120)\n")


@pytest.mark.parametrize("deployment", ["sqlite", "postgres"], indirect=True)
def test_a_worker_killed_mid_script_kills_the_script_and_fails_the_run(deployment: Deployment) -> None:
    pidfile = deployment.tmp / "pids"
    deployment.publish(_script_flow("blocking", _blocking_code(pidfile), None))
    run_ids = deployment.create("blocking", 1)
    worker = deployment.start()
    pids = wait_until(lambda: [int(p) for p in pidfile.read_text().split()] if pidfile.exists() else None,
                      timeout=30, what="the script to start")
    assert len(pids) == 2 and all(_alive(pid) for pid in pids)
    os.killpg(worker, signal.SIGKILL)
    assert deployment.zygote.wait(worker, 10) == -signal.SIGKILL
    wait_until(lambda: not any(_alive(pid) for pid in pids), timeout=10, what="the script's processes to end")
    folder = Path(Path(str(pidfile) + ".cwd").read_text())
    wait_until(lambda: not folder.parent.exists(), timeout=10, what="the script's folder to be removed")
    deployment.start()
    run = deployment.wait_for(run_ids, frozenset({"failed", "succeeded"}), timeout=60)[run_ids[0]]
    assert (run["status"], run["error_type"]) == ("failed", "step_not_idempotent"), deployment.logs()
    assert '"work" (script)' in run["error"]
    assert len(pidfile.read_text().split()) == 2  # the script was not started again
    deployment.check_projection()


@pytest.mark.parametrize("deployment", ["sqlite"], indirect=True)
def test_an_idempotent_script_runs_again_after_a_crash_after_its_effect(deployment: Deployment) -> None:
    runs_file = deployment.tmp / "attempts"
    code = (f"path = {str(runs_file)!r}\n"
            "open(path, 'a').write('ran\\n')\n"
            "print(len(open(path).read().split()))\n")
    deployment.publish(_script_flow("again", code, True))
    run_ids = deployment.create("again", 1)
    deployment.expect_crash(deployment.start("step.after_effect:2"), "step.after_effect")
    deployment.start()
    run = deployment.wait_for(run_ids, frozenset({"failed", "succeeded"}), timeout=60)[run_ids[0]]
    assert run["status"] == "succeeded", (run, deployment.logs())
    assert run["result"] == 2 and runs_file.read_text().split() == ["ran", "ran"]
    deployment.check_projection()


@pytest.mark.parametrize("deployment", ["sqlite"], indirect=True)
def test_a_script_crash_after_its_effect_is_not_repeated_by_default(deployment: Deployment) -> None:
    runs_file = deployment.tmp / "attempts"
    code = f"open({str(runs_file)!r}, 'a').write('ran\\n')\nprint('ok')\n"
    deployment.publish(_script_flow("once", code, None))
    run_ids = deployment.create("once", 1)
    deployment.expect_crash(deployment.start("step.after_effect:2"), "step.after_effect")
    deployment.start()
    run = deployment.wait_for(run_ids, frozenset({"failed", "succeeded"}), timeout=60)[run_ids[0]]
    assert (run["status"], run["error_type"]) == ("failed", "step_not_idempotent"), (run, deployment.logs())
    assert runs_file.read_text().split() == ["ran"]
