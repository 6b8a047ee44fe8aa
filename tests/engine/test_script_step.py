"""`script` end to end: real child processes under real workers, SQLite and PostgreSQL stores."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from engine.flow import flow_from_data
from engine.runtime.idempotency import step_is_idempotent
from engine.runtime.plan import FlowPlan
from engine.validation import validate
from tests.engine.conftest import Engine, make_flow, wait_until

T = {"id": "start", "type": "trigger.manual"}
SEED = {"id": "seed", "type": "set", "config": {"values": {"count": "{{ 2 }}"}}}
DONE = {"id": "done", "type": "terminal", "config": {"output": "{{ state.out }}"}}
PIDFILE_INPUT = {"pidfile": {"type": "string"}, "token": {"type": "string", "secret": True}}
SECRET = "tok-77c1-script-secret"


def _flow(flow_id: str, language: str, code: str, *, env: dict[str, str] | None = None,
          extra: dict[str, Any] | None = None) -> dict[str, Any]:
    script = {"id": "run", "type": "script",
              "config": {"language": language, "code": code, "output_key": "out", "env": env or {}, **(extra or {})}}
    return make_flow(flow_id, [T, SEED, script, DONE], [("start", "seed"), ("seed", "run"), ("run", "done")],
                     {"name": {"type": "string"}, **PIDFILE_INPUT})


def _alive(pid: int) -> bool:
    """True while `pid` is a process that is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as file:
            return file.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def _pids(pidfile: Path) -> list[int]:
    return [int(line) for line in pidfile.read_text().split()] if pidfile.exists() else []


def _no_script_processes_left(pidfile: Path) -> None:
    pids = _pids(pidfile)
    assert pids, "the script wrote no pids; the test would prove nothing"
    assert [pid for pid in pids if _alive(pid)] == []


def test_python_script_reads_the_state_container_and_its_json_output_is_stored(any_db_engine: Engine) -> None:
    code = ("import json, sys\n"
            "box = json.load(sys.stdin)\n"
            "print(json.dumps({'hello': box['inputs']['name'], 'count': box['state']['count'] + 1,\n"
            "                  'run': box['run']['id'], 'flow': box['run']['flow']}))\n")
    run = any_db_engine.run(_flow("py_echo", "python", code), {"name": "Ada"})
    assert run["status"] == "succeeded", run.get("error")
    assert run["state"]["out"] == {"hello": "Ada", "count": 3, "run": run["id"], "flow": "py_echo"}
    step = any_db_engine.step(run, "run")
    assert step["status"] == "succeeded" and step["output"] == {"out": run["state"]["out"]}


def test_shell_script_text_output_env_by_template_and_a_fresh_folder(any_db_engine: Engine, tmp_path: Path) -> None:
    code = ('echo "folder=$(pwd) entries=$(ls -A | wc -l) greeting=$GREETING"\n'
            "echo '{{ inputs.name }} is not rendered'\n")
    doc = _flow("sh_text", "shell", code, env={"GREETING": "hi {{ inputs.name }}"})
    run = any_db_engine.run(doc, {"name": "Ada"})
    assert run["status"] == "succeeded", run.get("error")
    first, second = run["state"]["out"].split("\n")
    folder = first.split()[0].removeprefix("folder=")
    assert first.split()[1:] == ["entries=0", "greeting=hi", "Ada"]
    assert second == "{{ inputs.name }} is not rendered"  # code is never a template
    assert not Path(folder).exists() and not Path(folder).parent.exists()
    assert not run["state"]["out"].endswith("\n")


def test_secret_inputs_are_redacted_on_stdin_and_reach_the_script_only_through_env(
        any_db_engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOCKGATE_WORKER_ONLY_PROBE", "leak")
    code = ("import json, os, sys\n"
            "box = json.load(sys.stdin)\n"
            f"print(json.dumps({{'stdin': box['inputs']['token'], 'env_ok': os.environ['TOKEN'] == {SECRET!r},\n"
            "                  'probe': os.environ.get('LOCKGATE_WORKER_ONLY_PROBE')}))\n")
    run = any_db_engine.run(_flow("py_secret", "python", code, env={"TOKEN": "{{ inputs.token }}"}),
                            {"token": SECRET})
    assert run["status"] == "succeeded", run.get("error")
    assert run["state"]["out"] == {"stdin": "***", "env_ok": True, "probe": None}
    assert any_db_engine.step(run, "run")["given"]["env"] == {"TOKEN": "***"}
    assert SECRET not in str(any_db_engine.services.get_run(run["id"]))


def test_a_failing_script_reports_its_status_and_the_end_of_stderr(any_db_engine: Engine) -> None:
    code = "import sys\nsys.stderr.write('HEAD' + 'x' * 5000 + 'THE-END')\nsys.exit(3)\n"
    run = any_db_engine.run(_flow("py_exit", "python", code))
    assert run["status"] == "failed" and run["error_type"] == "script_failed"
    error = any_db_engine.step(run, "run")["error"]
    assert "exited with status 3" in error and error.endswith("THE-END")
    assert "HEAD" not in error and len(error) < 2400
    assert run["state"] == {"count": 2}  # nothing written by the failed step


def _pid_writer(language: str) -> str:
    if language == "python":
        return "import os\nopen(os.environ['PIDFILE'], 'a').write(f'{os.getpid()}\\n')\n"
    return 'echo $$ >> "$PIDFILE"\n'


@pytest.mark.parametrize(("case", "language", "code", "error_type", "words"), [
    ("huge_output", "python", "import sys\nfor _ in range(50):\n    sys.stdout.write('x' * 1_000_000)\n",
     "output_too_large", "more than 1 MB"),
    ("stdin_forever", "python", "import sys, time\nwhile True:\n    sys.stdin.read()\n    time.sleep(0.01)\n",
     "script_timeout", "still running at its timeout (1s)"),
    ("signal", "python", "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n",
     "script_killed", "killed by SIGSEGV"),
    ("memory", "python", "block = bytearray(400 * 1024 * 1024)\n", "script_failed", "MemoryError"),
    ("shell_loop", "shell", "sleep 30 &\necho $! >> \"$PIDFILE\"\nwhile :; do :; done\n",
     "script_timeout", "still running at its timeout"),
])
def test_bad_scripts_fail_their_step_clearly_and_leave_no_process(
        engine: Engine, tmp_path: Path, case: str, language: str, code: str, error_type: str, words: str) -> None:
    pidfile = tmp_path / "pids"
    doc = _flow(f"bad_{case}", language, _pid_writer(language) + code, env={"PIDFILE": "{{ inputs.pidfile }}"},
                extra={"timeout": "1s", "memory_mb": 128})
    run = engine.run(doc, {"pidfile": str(pidfile)}, timeout=30)
    assert run["status"] == "failed" and run["error_type"] == error_type
    step = engine.step(run, "run")
    assert step["status"] == "failed" and words in step["error"]
    assert run["state"] == {"count": 2}
    _no_script_processes_left(pidfile)


def test_children_that_outlive_the_script_are_killed_even_outside_its_group(engine: Engine, tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    code = _pid_writer("python") + (
        "import os, sys, time\n"
        "for escape in (False, True):\n"
        "    if os.fork() == 0:\n"
        "        if escape:\n"
        "            os.setsid()\n"
        "        open(os.environ['PIDFILE'], 'a').write(f'{os.getpid()}\\n')\n"
        "        time.sleep(60)\n"
        "        os._exit(0)\n"
        "while len(open(os.environ['PIDFILE']).read().split()) < 3:\n"
        "    time.sleep(0.01)\n"
        "print('parent done')\n")
    run = engine.run(_flow("forks", "python", code, env={"PIDFILE": "{{ inputs.pidfile }}"}),
                     {"pidfile": str(pidfile)}, timeout=30)
    assert run["status"] == "succeeded", run.get("error")
    assert run["state"]["out"] == "parent done"
    assert len(_pids(pidfile)) == 3
    _no_script_processes_left(pidfile)


def test_continue_on_fail_records_the_script_error_and_goes_on(engine: Engine) -> None:
    doc = _flow("cof", "shell", "echo oops >&2\nexit 9\n")
    doc["nodes"][2]["continue_on_fail"] = True
    doc["nodes"][3]["config"]["output"] = "{{ errors.run.type }}"
    run = engine.run(doc)
    assert run["status"] == "succeeded"
    assert run["result"] == "script_failed"
    assert "exited with status 9; stderr (last 2 KB): oops" in engine.step(run, "run")["error"]


def test_json_that_cannot_be_stored_fails_the_step(engine: Engine) -> None:
    run = engine.run(_flow("deep", "python", "print('[' * 100 + ']' * 100)\n"))
    assert run["status"] == "failed" and run["error_type"] == "output_unfit"


def test_scripts_are_not_idempotent_unless_the_node_says_so() -> None:
    doc = _flow("idem", "python", "print(1)\n")
    assert not step_is_idempotent(FlowPlan(flow_from_data(doc)), "run")
    doc["nodes"][2]["idempotent"] = True
    assert step_is_idempotent(FlowPlan(flow_from_data(doc)), "run")


def test_validation_bounds_the_timeout_and_checks_env_templates_and_names() -> None:
    codes = {d.code for d in validate(_flow("v1", "python", "print(1)", extra={"timeout": "2h"}))}
    assert "script_timeout_too_long" in codes
    assert not [d for d in validate(_flow("v2", "python", "print(1)", extra={"timeout": "1h"}))
                if d.severity == "error"]
    bad = validate(_flow("v3", "shell", "true", env={"1BAD": "x", "OK": "{{ unclosed"}))
    assert {d.code for d in bad} >= {"invalid_config", "bad_template"}
    missing = validate(_flow("v4", "ruby", "puts 1"))
    assert any(d.code == "invalid_config" and "language" in d.message for d in missing)
    unknown = validate(_flow("v5", "shell", "true", env={"X": "{{ state.nowhere }}"}))
    assert any(d.code == "template_unknown_reference" for d in unknown)



def test_an_env_value_that_cannot_be_passed_fails_the_step_clearly(engine: Engine) -> None:
    run = engine.run(_flow("nul", "shell", "echo never", env={"NAME": "{{ inputs.name }}"}), {"name": "a\u0000b"})
    assert run["status"] == "failed" and run["error_type"] == "script_failed"
    assert "could not start" in engine.step(run, "run")["error"]


def test_a_script_in_a_foreach_reads_its_item_and_index(engine: Engine) -> None:
    code = "import json, sys\nbox = json.load(sys.stdin)\nprint(json.dumps([box['index'], box['item'] * 10]))\n"
    doc = make_flow("loop", [
        T,
        {"id": "each", "type": "foreach", "config": {"items": "{{ [1, 2, 3] }}", "concurrency": 2,
                                                       "output_key": "all"}},
        {"id": "run", "type": "script", "config": {"language": "python", "code": code, "output_key": "pair"}},
        {"id": "done", "type": "terminal", "config": {"output": "{{ state.all | map(attribute='pair') | list }}"}},
    ], [("start", "each"), ("each", "item", "run"), ("each", "done", "done")])
    run = engine.run(doc, timeout=30)
    assert run["status"] == "succeeded", run.get("error")
    assert run["result"] == [[0, 10], [1, 20], [2, 30]]


@pytest.mark.parametrize("pipes", ["held", "closed"])
def test_cancelling_a_run_stops_its_running_script_and_every_process_it_started(engine: Engine, tmp_path: Path,
                                                                               pipes: str) -> None:
    """A script that would run for ten minutes ends within moments of its run's cancel, with its children,
    whether it still holds its output pipes or closed them (the runner then waits on the process alone)."""
    pidfile = tmp_path / "pids"
    close = "exec >/dev/null 2>&1\n" if pipes == "closed" else ""
    code = _pid_writer("shell") + close + 'sleep 600 &\necho $! >> "$PIDFILE"\nwait\n'
    doc = _flow(f"endless_{pipes}", "shell", code, env={"PIDFILE": "{{ inputs.pidfile }}"}, extra={"timeout": "15m"})
    services = engine.services
    services.publish_flow(flow_from_data(doc))
    created = services.create_run(doc["id"], {"pidfile": str(pidfile)})
    wait_until(lambda: len(_pids(pidfile)) == 2, what="the script and its child to run")
    asked = time.monotonic()
    assert services.cancel_run(created.run_id) == "cancelling"
    run = services.wait_for_run(created.run_id, timeout=20)
    stopped_within = time.monotonic() - asked
    assert (run["status"], run["error_type"]) == ("cancelled", "cancelled"), run
    step = engine.step(run, "run")
    assert (step["status"], step["error_type"]) == ("failed", "cancelled"), step
    assert "the run was cancelled while its script ran, so the script was stopped" in step["error"]
    assert "done" not in {s["step"] for s in run["steps"]}
    assert stopped_within < 10, f"the script ran on {stopped_within:.1f}s after the cancel"  # not its 15m timeout
    _no_script_processes_left(pidfile)
