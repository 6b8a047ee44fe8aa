"""The `lockgate` commands of the front door as processes against one `lockgate serve` (SQLite, real Redis):
`--json` is the API's schema, plain lines when piped, Rich at a terminal, exit codes, `runs watch` live."""

from __future__ import annotations

import io
import itertools
import json
import os
import pty
import re
import select
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli import LOCKGATE
from tests.cli_commands.conftest import GATE, Served, assert_schema, next_line, serve, watch, write_flow
from tests.conftest import EXAMPLES
from tests.engine.conftest import make_flow


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, redis_url: str, module_prefix: str) -> Iterator[Served]:
    engine = serve(tmp_path_factory.mktemp("serve"), redis_url, module_prefix)
    try:
        with engine.http() as http:
            for doc in (json.loads((EXAMPLES / "hello.flow.json").read_text()), GATE):
                assert http.post("/api/v1/flows", json=doc).status_code == 201
        yield engine
    finally:
        code, stderr = engine.stop(signal.SIGTERM)
    assert code == 0 and "lockgate serve: stopping" in stderr and "lockgate serve: stopped" in stderr, stderr


def test_publish_each_file_then_list_flows(served: Served, tmp_path: Path) -> None:
    good = write_flow(
        tmp_path,
        make_flow(
            "greeter",
            [{"id": "start", "type": "trigger.manual"}, {"id": "end", "type": "terminal"}],
            [("start", "end")],
        ),
    )
    bad = write_flow(
        tmp_path,
        make_flow(
            "broken",
            [{"id": "start", "type": "trigger.manual"}, {"id": "end", "type": "terminal"}],
            [("start", "nowhere")],
        ),
    )
    missing = tmp_path / "missing.flow.json"
    done = served.lockgate("publish", str(good), str(bad), str(missing))
    assert done.returncode == 1
    assert f"{good}: published flow greeter version 1" in done.stdout
    assert f"{bad}: not published (publish_refused)" in done.stderr
    assert f"{missing}: not published (unreadable_file)" in done.stderr and "1 of 3 published" in done.stderr
    as_json = served.lockgate("publish", "--json", str(good), str(bad))
    assert as_json.returncode == 1
    published, refused = (json.loads(line) for line in as_json.stdout.splitlines())
    assert_schema(published, "PublishedFlow")
    assert_schema(refused, "PublishRefusal")
    assert (published["flow_id"], published["version"]) == ("greeter", 1)  # the same content is the same version
    assert refused["error"]["code"] == "publish_refused" and refused["diagnostics"][0]["severity"] == "error"
    listed = served.lockgate("flows", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert_schema(json.loads(listed.stdout), "FlowList")
    assert {"gate", "greeter", "hello"} <= {flow["flow_id"] for flow in json.loads(listed.stdout)["flows"]}
    assert "broken" not in listed.stdout


def test_runs_list_filters_and_show(served: Served) -> None:
    hello = served.start_run("hello", {"name": "Ada"}, wait=30)
    assert hello["status"] == "succeeded"
    gate = served.start_run("gate", {"tag": "v1"})["run_id"]
    served.wait_status(gate, "waiting")

    listed = served.lockgate("runs", "list", "--status", "waiting", "--flow", "gate", "--json")
    assert listed.returncode == 0, listed.stderr
    waiting = json.loads(listed.stdout)
    assert_schema(waiting, "RunList")
    assert gate in [run["id"] for run in waiting["runs"]] and hello["run_id"] not in listed.stdout
    assert {(run["flow_id"], run["status"]) for run in waiting["runs"]} == {("gate", "waiting")}
    rows = [line.split("\t") for line in served.lockgate("runs", "list", "--flow", "gate").stdout.splitlines()]
    assert [gate, "waiting", "gate", "1", "ask", "ask (approval)"] in [row[:6] for row in rows]

    shown = served.lockgate("runs", "show", gate, "--json")
    assert shown.returncode == 0, shown.stderr
    run = json.loads(shown.stdout)
    assert_schema(run, "Run")
    assert (run["current_node"], run["waiting_on"]["node"], run["waiting_on"]["reason"]) == ("ask", "ask", "approval")
    assert (run["errors"], run["cost_micros"], run["tokens_in"], run["tokens_out"]) == ({}, 0, 0, 0)
    human = served.lockgate("runs", "show", gate)
    assert f"run {gate} waiting (flow gate v1)" in human.stdout
    assert "current node: ask" in human.stdout and "waiting on: ask (approval)" in human.stdout
    assert "cost: $0.00, tokens: 0 in, 0 out" in human.stdout
    assert "start\tstart\ttrigger.manual\tsucceeded\t1" in human.stdout
    unknown = served.lockgate("runs", "show", "no-such-run")
    assert unknown.returncode == 1 and "run 'no-such-run' does not exist" in unknown.stderr
    finished = served.lockgate("runs", "cancel", hello["run_id"])
    assert finished.returncode == 0, finished.stderr
    assert finished.stdout.strip() == f"run {hello['run_id']} had already finished (succeeded); nothing to cancel"


def test_watch_follows_a_parked_run_until_it_ends(served: Served) -> None:
    run_id = served.start_run("gate", {"tag": "v2"})["run_id"]
    served.wait_status(run_id, "waiting")
    follower = watch(served, run_id)
    try:
        assert next_line(follower) == f"{run_id}\twaiting\task\task (approval)"
        served.decide(run_id, "approve")
        rest = follower.communicate(timeout=60)[0].splitlines()
    finally:
        follower.kill()
    assert follower.returncode == 0
    assert rest[-1] == f"{run_id}\tsucceeded\tgo\t"
    lines = [f"{run_id}\twaiting\task\task (approval)", *rest]
    assert all(a != b for a, b in itertools.pairwise(lines))  # one line per change


def test_watch_json_and_cancel(served: Served) -> None:
    run_id = served.start_run("gate", {"tag": "v3"})["run_id"]
    served.wait_status(run_id, "waiting")
    follower = watch(served, run_id, "--json")
    stopped = watch(served, run_id)
    try:
        first = json.loads(next_line(follower))
        assert_schema(first, "Run")
        assert first["status"] == "waiting" and first["current_node"] == "ask"
        assert next_line(stopped).startswith(f"{run_id}\twaiting\t")
        stopped.send_signal(signal.SIGTERM)  # a watcher stopped early: the run goes on
        assert stopped.wait(30) == 130 and "interrupted; the run goes on" in (stopped.stderr or io.StringIO()).read()
        cancelled = served.lockgate("runs", "cancel", run_id, "--json")
        assert cancelled.returncode == 0, cancelled.stderr
        assert_schema(json.loads(cancelled.stdout), "CancelledRun")
        assert json.loads(cancelled.stdout) == {"run_id": run_id, "status": "cancelled"}
        rest = [json.loads(line) for line in follower.communicate(timeout=60)[0].splitlines()]
    finally:
        follower.kill()
        stopped.kill()
    assert follower.returncode == 1  # it ended, but did not succeed
    for run in rest:
        assert_schema(run, "Run")
    assert rest[-1]["status"] == "cancelled"


def test_approvals_json_is_the_api_answer(served: Served) -> None:
    run_id = served.start_run("gate", {"tag": "v4"})["run_id"]
    served.wait_status(run_id, "waiting")
    listed = served.lockgate("approvals", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    approvals = json.loads(listed.stdout)
    assert_schema(approvals, "ApprovalList")
    with served.http() as http:
        assert approvals == http.get("/api/v1/approvals").json()
    [approval] = [a for a in approvals["approvals"] if a["run_id"] == run_id]
    assert (approval["node_id"], approval["message"]) == ("ask", "Ship v4?")
    decided = served.lockgate("approvals", "decide", approval["id"], "approve", "--key", served.key, "--json")
    assert decided.returncode == 0, decided.stderr
    assert_schema(json.loads(decided.stdout), "Decision")
    assert json.loads(decided.stdout)["accepted"] is True
    assert served.wait_status(run_id, "succeeded")["result"] == "shipped v4"


ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _at_a_terminal(served: Served, *args: str) -> tuple[int, str]:
    """`lockgate *args` with stdout on a pseudo-terminal: its exit code and what the terminal received."""
    master, slave = pty.openpty()
    process = subprocess.Popen(
        [*LOCKGATE, *args], env={**served.env, "COLUMNS": "160", "TERM": "xterm"}, stdout=slave, stderr=subprocess.PIPE
    )
    os.close(slave)
    received = b""
    while True:
        ready, _, _ = select.select([master], [], [], 60)
        if not ready:
            break
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        received += chunk
    os.close(master)
    return process.wait(60), ANSI.sub("", received.decode("utf-8", "replace"))


def test_people_get_rich_tables_and_live_progress(served: Served) -> None:
    run_id = served.start_run("hello", {"name": "Bo"}, wait=30)["run_id"]
    code, screen = _at_a_terminal(served, "runs", "list", "--flow", "hello")
    assert code == 0
    assert "┃ ID" in screen and "STATUS" in screen and run_id in screen and "\t" not in screen
    code, screen = _at_a_terminal(served, "runs", "watch", run_id)
    assert code == 0
    assert f"run {run_id} succeeded (flow hello v1)" in screen and "│ greet" in screen


def test_people_see_an_approvals_node_by_its_title_and_scripts_by_its_id(served: Served) -> None:
    run_id = served.start_run("gate", {"tag": "v7"})["run_id"]
    served.wait_status(run_id, "waiting")
    code, screen = _at_a_terminal(served, "approvals", "list")
    assert code == 0
    assert "Release sign-off (ask)" in " ".join(screen.split()), screen
    piped = served.lockgate("approvals", "list")
    [row] = [line.split("\t") for line in piped.stdout.splitlines() if f"\t{run_id}\t" in line]
    assert row[2] == "ask"
