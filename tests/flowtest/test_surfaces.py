"""Save-as-test and replay through the CLI (real `lockgate` processes, exit codes for CI) and the HTTP API."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from engine.api.server import ApiServer
from engine.approvals.keys import create_key
from engine.flow import flow_from_data
from engine.flowtest.model import dump_test, load_test_text
from tests.cli import cli_env, lockgate
from tests.engine.conftest import make_flow, start_engine
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

    # Saved again under the same name: refused, the file left as it was, unless --force.
    kept = test_file.read_bytes() + b"\n"  # edited by hand since
    test_file.write_bytes(kept)
    again = lockgate(env, "runs", "save-test", run_id, "--name", "question", "--dir", str(flows))
    assert again.returncode == 1, again.stdout + again.stderr
    assert f"{test_file} exists already" in again.stderr and "--force" in again.stderr
    assert test_file.read_bytes() == kept and not list(flows.glob("*.tmp"))
    forced = lockgate(env, "runs", "save-test", run_id, "--name", "question", "--dir", str(flows), "--force")
    assert forced.returncode == 0, forced.stderr
    assert f"replaced {test_file}" in forced.stdout and test_file.read_bytes() != kept

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


def test_cli_saves_and_replays_a_run_that_handed_out_its_callback_url(
    tmp_path: Path, redis_url: str, key_prefix: str, sqlite_url: str
) -> None:
    document = make_flow(
        "handoff",
        [
            {"id": "start", "type": "trigger.manual"},
            {"id": "tell", "type": "set", "config": {"values": {"url": "{{ callback_url('wait') }}"}}},
            {"id": "wait", "type": "wait.callback", "config": {"timeout": "1h"}},
            {"id": "done", "type": "terminal", "config": {"output": "{{ state.wait.ok }}"}},
            {"id": "late", "type": "terminal", "config": {"output": "late"}},
        ],
        [("start", "tell"), ("tell", "wait"), ("wait", "received", "done"), ("wait", "timed_out", "late")],
    )
    services, _sleeps = start_engine(tmp_path, redis_url, sqlite_url, key_prefix)  # tmp_path/data, as the CLI's
    server = ApiServer(services, "127.0.0.1", 0).start()
    try:
        services.publish_flow(flow_from_data(document))
        run_id = services.create_run("handoff", {}).run_id
        services.wait_for_run(run_id, statuses=frozenset({"waiting"}))
        run = services.get_run(run_id)
        assert run is not None
        token = run["state"]["url"].rsplit("/callbacks/", 1)[1]
        posted = httpx.post(f"{server.url}/callbacks/{token}", json={"ok": "yes"}, timeout=20)
        assert posted.status_code == 200, posted.text
        assert services.wait_for_run(run_id)["status"] == "succeeded"
    finally:
        server.stop()
        services.stop()

    env = cli_env(tmp_path, redis_url, key_prefix, LOCKGATE_DB_URL=sqlite_url)
    flows = tmp_path / "flows"
    flows.mkdir()
    write_flow(flows, document)
    saved = lockgate(env, "runs", "save-test", run_id, "--name", "got", "--dir", str(flows))
    assert saved.returncode == 0, saved.stderr
    text = (flows / "handoff.got.flowtest.json").read_text(encoding="utf-8")
    assert token not in text and '"url": "https://lockgate.test/callbacks/wait"' in text

    replayed = lockgate(env, "test", str(flows))
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert "PASS got" in replayed.stdout and "1 passed" in replayed.stdout
