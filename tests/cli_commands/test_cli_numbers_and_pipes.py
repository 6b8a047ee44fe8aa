"""The list commands piped (one tab-separated line per row, no header, hints on stderr), a pipe whose reader went
away (`| head`: exit 141, nothing on stderr), `budgets set` keeping the period it is not given, and the numbers the
CLI refuses before it asks the engine anything: `runs list --limit` outside the API's range, `run --timeout` below
0."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.read_models import MAX_LIST_LIMIT
from tests.cli import LOCKGATE, cli_env, lockgate
from tests.cli_commands.conftest import GATE, TRIGGER, Served, serve, write_flow
from tests.engine.conftest import make_flow

QUORUM = make_flow(
    "pair",
    [
        TRIGGER,
        {"id": "ask", "type": "approval", "config": {"timeout": "1h", "required": 2, "message": "Release?"}},
        {"id": "go", "type": "terminal", "config": {"output": "{{ 'released' }}"}},
        {"id": "stop", "type": "terminal", "config": {"output": "{{ 'stopped' }}"}},
    ],
    [("start", "ask"), ("ask", "approved", "go"), ("ask", "rejected", "stop")],
)
HOOKED, UNHOOKED = (make_flow(flow_id, [{"id": "hook", "type": "trigger.webhook"}, {"id": "done", "type": "terminal"}],
                              [("hook", "done")]) for flow_id in ("hooked", "unhooked"))
EXIT_BROKEN_PIPE = 141


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, redis_url: str, module_prefix: str) -> Iterator[Served]:
    engine = serve(tmp_path_factory.mktemp("serve"), redis_url, module_prefix)
    try:
        with engine.http() as http:
            for doc in (GATE, QUORUM, HOOKED, UNHOOKED):
                assert http.post("/api/v1/flows", json=doc).status_code == 201
        yield engine
    finally:
        code, stderr = engine.stop(signal.SIGTERM)
    assert code == 0, stderr


def test_approvals_list_piped_is_one_tab_separated_line_per_approval(served: Served) -> None:
    plain = served.start_run("gate", {"tag": "v5"})["run_id"]
    quorum = served.start_run("pair", {})["run_id"]
    served.wait_status(plain, "waiting")
    served.wait_status(quorum, "waiting")
    pending = json.loads(served.lockgate("approvals", "list", "--json").stdout)["approvals"]
    [vote_on] = [approval["id"] for approval in pending if approval["run_id"] == quorum]
    voted = served.lockgate("approvals", "decide", vote_on, "approve", "--comment", "lgtm", "--key", served.key)
    assert voted.returncode == 0, voted.stderr

    listed = served.lockgate("approvals", "list")
    assert listed.returncode == 0 and listed.stderr == "", listed.stderr
    lines = [line.split("\t") for line in listed.stdout.splitlines()]
    assert len(lines) == len(pending) and all(len(row) == 7 and row[4].endswith(" UTC") for row in lines)
    rows = {row[3]: row for row in lines}
    assert rows[plain][1:4] + rows[plain][5:] == ["gate", "ask", plain, "Ship v5?", ""]
    progress = rows[quorum][6]
    assert rows[quorum][:4] == [vote_on, "pair", "ask", quorum] and rows[quorum][5] == "Release?"
    assert progress.startswith("1 of 2 approved; approved by key:ops-bot at ") and progress.endswith(" UTC: lgtm")


def test_empty_lists_print_nothing_and_rows_are_tab_separated(tmp_path: Path, redis_url: str,
                                                              key_prefix: str) -> None:
    env = cli_env(tmp_path, redis_url, key_prefix, LOCKGATE_API_KEY="")
    for command, hint in (("approvals", "no pending approvals"), ("keys", "no keys yet"),
                          ("budgets", "no budgets"), ("holds", "no holds")):
        empty = lockgate(env, command, "list")
        assert (empty.returncode, empty.stdout) == (0, ""), empty.stderr
        assert hint in empty.stderr

    assert lockgate(env, "keys", "create", "ops-bot").returncode == 0
    assert lockgate(env, "budgets", "set", "ops", "--limit", "12.5", "--period", "week").returncode == 0
    keys = lockgate(env, "keys", "list")
    assert (keys.returncode, keys.stdout) == (0, "ops-bot\tactive\tread,start,publish,decide\n"), keys.stderr
    budgets = lockgate(env, "budgets", "list")
    assert (budgets.returncode, budgets.stdout) == (0, "ops\tweek\t$12.50\t$0.00\t$0.00\t$12.50\n"), budgets.stderr


def test_runs_list_refuses_a_limit_the_api_refuses(served: Served) -> None:
    for run in (served.start_run("gate", {"tag": f"v{n}"})["run_id"] for n in (6, 7)):
        served.wait_status(run, "waiting")
    for limit in ("0", "-3", str(MAX_LIST_LIMIT + 1)):
        refused = served.lockgate("runs", "list", "--limit", limit)
        assert (refused.returncode, refused.stdout) == (2, ""), refused.stderr
        assert f"--limit {limit}" in refused.stderr and f"from 1 to {MAX_LIST_LIMIT}" in refused.stderr
    one = served.lockgate("runs", "list", "--limit", "1")
    assert one.returncode == 0 and len(one.stdout.splitlines()) == 1, one.stderr
    more = one.stderr.strip().splitlines()[-1]  # a page that is not the last says how to read on
    assert more.startswith("more runs: lockgate runs list --cursor ") and more.endswith(" --limit 1"), one.stderr
    following = served.lockgate(*more.removeprefix("more runs: lockgate ").split())
    assert following.returncode == 0 and len(following.stdout.splitlines()) == 1, following.stderr
    assert following.stdout.split("\t")[0] != one.stdout.split("\t")[0]
    most = served.lockgate("runs", "list", "--limit", str(MAX_LIST_LIMIT), "--json")
    assert most.returncode == 0 and len(json.loads(most.stdout)["runs"]) >= 2, most.stderr


def test_run_refuses_a_negative_timeout_before_starting_anything(served: Served, tmp_path: Path) -> None:
    flow = write_flow(tmp_path, make_flow("late", [TRIGGER, {"id": "end", "type": "terminal"}], [("start", "end")]))
    for timeout in ("-1", "nan"):
        refused = served.lockgate("run", str(flow), "--timeout", timeout)
        assert (refused.returncode, refused.stdout) == (2, ""), refused.stderr
        assert f"--timeout {timeout}" in refused.stderr
    assert "late" not in [f["flow_id"] for f in json.loads(served.lockgate("flows", "list", "--json").stdout)["flows"]]
    assert json.loads(served.lockgate("runs", "list", "--flow", "late", "--json").stdout)["runs"] == []


def _reader_gone(served: Served, *args: str) -> subprocess.CompletedProcess[str]:
    """`lockgate *args | head -0`: stdout a pipe whose reader closed before the command started."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run([*LOCKGATE, *args], env=served.env, stdout=write_end, stderr=subprocess.PIPE, text=True,
                              timeout=60)
    finally:
        os.close(write_end)


def test_a_reader_that_goes_away_ends_each_command_quietly(served: Served) -> None:
    run_id = served.start_run("gate", {"tag": "v8"})["run_id"]
    served.wait_status(run_id, "waiting")  # a pending approval to list, and a run `runs watch` would wait on
    assert served.lockgate("webhooks", "enable", "hooked").returncode == 0
    for args in (("runs", "list"), ("runs", "list", "--json"), ("runs", "show", run_id), ("runs", "watch", run_id),
                 ("approvals", "list"), ("webhooks", "list", "hooked"), ("keys", "list")):
        gone = _reader_gone(served, *args)
        assert (gone.returncode, gone.stderr) == (EXIT_BROKEN_PIPE, ""), args


def test_webhooks_list_piped_is_one_tab_separated_line_per_trigger_and_hints_on_stderr(served: Served) -> None:
    enabled = served.lockgate("webhooks", "enable", "hooked")
    assert enabled.returncode == 0, enabled.stderr
    [row] = json.loads(served.lockgate("webhooks", "list", "hooked", "--json").stdout)
    token = row["token"]
    line = f"hooked/hook\tenabled\t{served.url}/webhooks/{token}\t{token}\t0 (0 while disabled, 0 refused)\n"
    listed = served.lockgate("webhooks", "list", "hooked")
    for done in (enabled, listed):
        assert (done.returncode, done.stdout) == (0, line), done.stderr
        assert "Sign each request: X-Hub-Signature-256" in done.stderr
    never = served.lockgate("webhooks", "list", "unhooked")  # never enabled: no URL or token yet
    assert (never.returncode, never.stdout) == (0, "unhooked/hook\tdisabled\t\t\t0 (0 while disabled, 0 refused)\n")
    assert "unhooked/hook has no token yet: `lockgate webhooks enable unhooked` makes one" in never.stderr
    assert "Sign each request" not in never.stderr


def test_budgets_set_without_a_period_keeps_the_budgets_period(served: Served) -> None:
    daily = served.lockgate("budgets", "set", "small", "--limit", "1", "--period", "day")
    assert (daily.returncode, daily.stdout) == (0, "budget small: $1.00 per day ($1.00 left)\n"), daily.stderr
    lowered = served.lockgate("budgets", "set", "small", "--limit", "0.01")  # what the 402 budget_exhausted says to run
    assert (lowered.returncode, lowered.stdout) == (0, "budget small: $0.01 per day ($0.01 left)\n"), lowered.stderr
    weekly = served.lockgate("budgets", "set", "small", "--limit", "2", "--period", "week")
    assert weekly.stdout == "budget small: $2.00 per week ($2.00 left)\n", weekly.stderr
    fresh = served.lockgate("budgets", "set", "fresh", "--limit", "3")  # a new budget without one: a month
    assert fresh.stdout == "budget fresh: $3.00 per month ($3.00 left)\n", fresh.stderr
    budgets = {row["name"]: row for row in json.loads(served.lockgate("budgets", "list", "--json").stdout)}
    assert (budgets["small"]["period"], budgets["small"]["limit"]) == ("week", "$2.00")
    assert budgets["fresh"]["period"] == "month"
