"""Save-as-test and replay through the CLI (real `lockgate` processes, exit codes for CI) and the HTTP API."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from engine.api.server import ApiServer
from engine.approvals.keys import create_key
from engine.flowtest.model import dump_test, load_test_text
from tests.cli import cli_env, lockgate
from tests.flowtest.conftest import MoneyEngine, question_run, triage_document, write_flow


def test_cli_saves_a_run_as_a_test_and_replays_it_with_exit_codes(
    money_engine: MoneyEngine, tmp_path: Path, redis_url: str, key_prefix: str, sqlite_url: str
) -> None:
    run_id = question_run(money_engine)
    env = cli_env(tmp_path, redis_url, key_prefix, LOCKGATE_DB_URL=sqlite_url)
    flows = tmp_path / "flows"
    flows.mkdir()
    write_flow(flows, triage_document())

    saved = lockgate(env, "runs", "save-test", run_id, "--name", "question", "--dir", str(flows))
    assert saved.returncode == 0, saved.stderr
    test_file = flows / "ticket-triage.question.flowtest.json"
    assert str(test_file) in saved.stdout

    passed = lockgate(env, "test", str(test_file))
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "PASS question" in passed.stdout and "1 passed" in passed.stdout
    assert lockgate(env, "test", str(flows)).returncode == 0  # a folder: every test in it

    document = triage_document()
    for node in document["nodes"]:
        if node["id"] == "note":
            node["config"]["values"]["note"] = "Closed {{ inputs.ticket.id }}"
    changed = write_flow(tmp_path, document)
    failed = lockgate(env, "test", str(test_file), "--flow", str(changed))
    assert failed.returncode == 1
    assert "FAIL question" in failed.stdout and "state.note" in failed.stdout
    assert '- "Followed up on T-7"' in failed.stdout and '+ "Closed T-7"' in failed.stdout

    as_json = lockgate(env, "test", str(test_file), "--flow", str(changed), "--json")
    assert as_json.returncode == 1
    report = json.loads(as_json.stdout)
    assert report["passed"] is False
    [only] = report["tests"]
    assert only["verdict"] == "failed"
    assert [(d["aspect"], d["key"]) for d in only["differences"]] == [("state", "note")]

    assert lockgate(env, "test", str(tmp_path / "empty-folder-that-is-not-there")).returncode == 1  # unreadable
    (tmp_path / "none").mkdir()
    assert lockgate(env, "test", str(tmp_path / "none")).returncode == 2  # no tests at all
    unknown = lockgate(env, "runs", "save-test", "no-such-run", "--name", "x", "--dir", str(flows))
    assert unknown.returncode == 1 and "does not exist" in unknown.stderr
    assert lockgate(env, "runs", "save-test", run_id, "--name", "bad name!", "--dir", str(flows)).returncode == 2


def test_api_records_a_finished_run_and_refuses_unknown_or_unfinished_ones(money_engine: MoneyEngine) -> None:
    run_id = question_run(money_engine)
    unfinished = money_engine.start("ticket-triage", {"ticket": {"id": "T-9", "body": "Where is my order?"}}, "hook")
    money_engine.wait_parked(unfinished, "queue_delay")
    assert money_engine.services.sql is not None
    key = create_key(money_engine.services.sql, "flowtest", money_engine.clock)
    server = ApiServer(money_engine.services, "127.0.0.1", 0).start()
    try:
        headers = {"Authorization": f"Bearer {key}"}

        def post(run: str, name: str) -> httpx.Response:
            return httpx.post(
                f"{server.url}/api/v1/runs/{run}/test-recording", json={"name": name}, headers=headers, timeout=20
            )

        answer = post(run_id, "question")
        assert answer.status_code == 200, answer.text
        test = load_test_text(answer.content)
        assert test.name == "question" and test.recorded_from.run_id == run_id
        assert test.expected.result == "question"
        assert dump_test(test) == dump_test(load_test_text(post(run_id, "question").content))

        assert post("no-such-run", "x").json()["error"]["code"] == "unknown_run"
        assert post("no-such-run", "x").status_code == 404
        refused = post(unfinished, "x")
        assert refused.status_code == 409 and refused.json()["error"]["code"] == "run_not_finished"
        assert post(run_id, "bad name!").status_code == 422
        money_engine.services.cancel_run(unfinished)
        assert money_engine.wait(unfinished)["status"] == "cancelled"
        cancelled = post(unfinished, "x")
        assert cancelled.status_code == 409 and cancelled.json()["error"]["code"] == "run_not_replayable"
    finally:
        server.stop()
