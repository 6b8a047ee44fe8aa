"""What a new user of the command line meets: `validate --json` prints a JSON document also for a path it cannot
read, a port out of range is called that, usage errors of `keys create` exit 2 like every other command's, the
help of `runs rerun --version` names every value it takes, and the refusals of unknown runs and approvals keep
the command line's hints (the engine's messages name no surface; the HTTP API adds its own)."""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.main import main
from tests.cli import cli_env, lockgate
from tests.cli_commands.conftest import Served, serve, write_flow
from tests.engine.conftest import make_flow

GOOD = make_flow("good", [{"id": "start", "type": "trigger.manual"}, {"id": "done", "type": "terminal"}],
                 [("start", "done")])


def test_validate_json_reports_a_missing_file_as_json(tmp_path: Path, redis_url: str, key_prefix: str) -> None:
    env = cli_env(tmp_path, redis_url, key_prefix)
    missing = str(tmp_path / "nope.flow.json")
    one = lockgate(env, "validate", missing, "--json")
    assert one.returncode == 2, one.stderr
    assert json.loads(one.stdout) == {"file": missing, "ok": False, "diagnostics": [
        {"code": "unreadable_file", "severity": "error", "node": None, "message": "no such file; check the path"}]}
    assert f"lockgate validate: {missing}: no such file; check the path" in one.stderr
    good = str(write_flow(tmp_path, GOOD))
    several = lockgate(env, "validate", missing, good, str(tmp_path), "--json")
    assert several.returncode == 2, several.stderr
    reports = json.loads(several.stdout)
    assert [(r["file"], r["ok"], [d["code"] for d in r["diagnostics"]]) for r in reports] == [
        (missing, False, ["unreadable_file"]), (good, True, []), (str(tmp_path), False, ["unreadable_file"])]
    human = lockgate(env, "validate", missing, good)  # without --json: as before, only the checked files
    assert human.returncode == 2 and "1 file checked, all ok" in human.stdout and "nope" not in human.stdout


@pytest.mark.parametrize("port", ["99999", "65536"])
def test_a_port_out_of_range_is_called_that(tmp_path: Path, redis_url: str, key_prefix: str, port: str) -> None:
    done = lockgate(cli_env(tmp_path, redis_url, key_prefix), "worker", "--http", f"localhost:{port}")
    assert done.returncode == 2
    assert done.stderr.strip() == (f"lockgate: --http 'localhost:{port}': port {port} is out of range (1-65535); "
                                   "write e.g. 127.0.0.1:8080")


def test_keys_create_usage_errors_exit_2(tmp_path: Path, redis_url: str, key_prefix: str) -> None:
    env = cli_env(tmp_path, redis_url, key_prefix, LOCKGATE_API_KEY="")
    right = lockgate(env, "keys", "create", "bot", "--rights", "read,approve")
    assert right.returncode == 2 and "unknown right 'approve'" in right.stderr and right.stdout == ""
    name = lockgate(env, "keys", "create", "bad name")
    assert name.returncode == 2 and "key name 'bad name' is not usable" in name.stderr and name.stdout == ""
    assert lockgate(env, "keys", "create", "bot").returncode == 0
    taken = lockgate(env, "keys", "create", "bot")  # a refusal, not a usage error
    assert taken.returncode == 1 and 'key name "bot" is taken' in taken.stderr


def test_rerun_help_names_every_version_it_takes(tmp_path: Path, redis_url: str, key_prefix: str) -> None:
    shown = lockgate(cli_env(tmp_path, redis_url, key_prefix), "runs", "rerun", "--help")
    assert shown.returncode == 0
    assert "--version N|current|original" in shown.stdout and "`original`" in shown.stdout


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, redis_url: str, module_prefix: str) -> Iterator[Served]:
    engine = serve(tmp_path_factory.mktemp("serve"), redis_url, module_prefix)
    try:
        yield engine
    finally:
        engine.stop(signal.SIGTERM)


def test_unknown_ids_keep_the_command_lines_hints(served: Served) -> None:
    rerun = served.lockgate("runs", "rerun", "nope", "--from", "greet")
    assert rerun.returncode == 1
    assert rerun.stderr.strip() == ('lockgate runs rerun: unknown_run: run "nope" does not exist; list runs with '
                                    "`lockgate runs list`")
    saved = served.lockgate("runs", "save-test", "nope", "--name", "t")
    assert saved.returncode == 1
    assert saved.stderr.strip() == ('lockgate runs save-test: run "nope" does not exist; list runs with '
                                    "`lockgate runs list`")
    cancel = served.lockgate("runs", "cancel", "nope")
    assert cancel.returncode == 1
    assert cancel.stderr.strip() == ("lockgate runs cancel: run 'nope' does not exist; list runs with "
                                     "`lockgate runs list`")
    decided = served.lockgate("approvals", "decide", "ap_nope", "approve", "--key", served.key, "--json")
    message = 'approval "ap_nope" does not exist; see pending ones with `lockgate approvals list`'
    assert decided.returncode == 1
    assert decided.stderr.strip() == f"lockgate approvals decide: refused (unknown_approval): {message}"
    assert json.loads(decided.stdout)["message"] == message


@pytest.mark.parametrize(("argv", "usage", "error"), [
    (["run", "--inptu", "x=1", "f.flow.json"], "usage: lockgate run ",
     "lockgate run: error: unknown option --inptu; did you mean --input?"),
    (["runs", "list", "--limt=3"], "usage: lockgate runs list ",
     "lockgate runs list: error: unknown option --limt; did you mean --limit?"),
    (["runs", "list", "--zzz", "--yyy"], "usage: lockgate runs list ",
     "lockgate runs list: error: unknown option --zzz (also unknown: --yyy)"),
    (["runs", "list", "extra"], "usage: lockgate runs list ",
     "lockgate runs list: error: unexpected argument(s): extra"),
    (["--dat-dir", "x", "runs", "list"], "usage: lockgate [-h]",  # was "invalid choice: 'x'"
     "lockgate: error: unknown option --dat-dir; did you mean --data-dir?"),
    (["--log-level", "info", "--quiet", "runs", "list"], "usage: lockgate [-h]",
     "lockgate: error: unknown option --quiet"),
    (["--data-dir", "x", "rnus", "list"], "usage: lockgate [-h]",
     "lockgate: error: unknown command 'rnus'; did you mean runs? (commands: validate, run, worker, serve, "
     "publish, runs, provider-sim, budgets, holds, keys, approvals, webhooks, schedules, diff, flows, admin, test)"),
    (["runs", "lsit"], "usage: lockgate runs ",  # was "argument runs_command: invalid choice: 'lsit'"
     "lockgate runs: error: unknown command 'lsit'; did you mean list? (commands: list, show, cancel, watch, "
     "rerun, save-test)"),
    (["approvals"], "usage: lockgate approvals ",  # was "the following arguments are required: approvals_command"
     "lockgate approvals: error: a command is needed: list, decide, notify-secret"),
])
def test_a_mistyped_option_or_command_is_named_with_what_was_meant(argv: list[str], usage: str, error: str,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as ended:
        main(argv)
    assert ended.value.code == 2
    stderr = capsys.readouterr().err
    assert stderr.startswith(usage), stderr
    assert stderr.strip().splitlines()[-1] == error
