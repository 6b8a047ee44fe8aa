"""`lockgate keys` and `lockgate approvals` as processes, on a data folder an in-process engine also serves."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from engine.flow import flow_from_data
from tests.cli import cli_env, lockgate
from tests.engine.conftest import make_flow, start_engine
from tests.parking.conftest import TRIGGER


def test_keys_create_list_revoke(tmp_path: Path, redis_url: str, key_prefix: str) -> None:
    env = cli_env(tmp_path, redis_url, key_prefix, LOCKGATE_API_KEY="")
    created = lockgate(env, "keys", "create", "ops-bot")
    assert created.returncode == 0, created.stderr
    key = created.stdout.strip()
    assert created.stdout == key + "\n" and key.startswith("lgk_") and len(key) == 47
    assert "shown only this once" in created.stderr
    db = (tmp_path / "data" / "lockgate.db").read_bytes()
    assert key.encode() not in db  # only the hash is stored
    taken = lockgate(env, "keys", "create", "ops-bot")
    assert taken.returncode == 1 and 'key name "ops-bot" is taken' in taken.stderr and taken.stdout == ""
    listed = json.loads(lockgate(env, "keys", "list", "--json").stdout)
    assert [(k["name"], k["active"], k["scopes"]) for k in listed] == [
        ("ops-bot", True, ["runs:read", "runs:start", "flows:publish", "approvals:decide"])]
    bot = lockgate(env, "keys", "create", "approver", "--rights", "decide,read")
    assert bot.returncode == 0 and "with the rights read, decide" in bot.stderr, bot.stderr
    wrong = lockgate(env, "keys", "create", "other", "--rights", "read,approve")
    assert wrong.returncode == 2 and "unknown right 'approve'" in wrong.stderr and wrong.stdout == ""
    assert "approver\tactive\tread,decide\n" in lockgate(env, "keys", "list").stdout
    assert key not in lockgate(env, "keys", "list").stdout
    assert lockgate(env, "keys", "revoke", "ops-bot").returncode == 0
    again = lockgate(env, "keys", "revoke", "ops-bot")
    assert again.returncode == 1 and "already revoked" in again.stderr
    unknown = lockgate(env, "keys", "revoke", "nobody")
    assert unknown.returncode == 1 and 'no key is named "nobody"' in unknown.stderr
    states = {k["name"]: k["active"] for k in json.loads(lockgate(env, "keys", "list", "--json").stdout)}
    assert states == {"approver": True, "ops-bot": False}


def test_approvals_list_and_decide_by_key(tmp_path: Path, redis_url: str, key_prefix: str) -> None:
    env = cli_env(tmp_path, redis_url, key_prefix, LOCKGATE_API_KEY="")
    services, _ = start_engine(tmp_path, redis_url, f"sqlite:///{tmp_path / 'data' / 'lockgate.db'}", key_prefix)
    try:
        services.publish_flow(flow_from_data(make_flow("deploy", [
            TRIGGER, {"id": "ask", "type": "approval", "config": {"timeout": "1h", "approvers": ["ops-bot"],
                                                                   "message": "Deploy {{ inputs.tag }}?"}},
            {"id": "go", "type": "terminal", "config": {"output": "{{ 'deployed' }}"}},
            {"id": "stop", "type": "terminal", "config": {"output": "{{ 'stopped' }}"}}],
            [("start", "ask"), ("ask", "approved", "go"), ("ask", "rejected", "stop")],
            inputs={"tag": {"type": "string", "required": True}})))
        run_id = services.create_run("deploy", {"tag": "v1.2"}).run_id
        services.wait_for_run(run_id, statuses=frozenset({"waiting"}))
        key = lockgate(env, "keys", "create", "ops-bot").stdout.strip()
        other = lockgate(env, "keys", "create", "intern").stdout.strip()
        pending: list[dict[str, Any]] = json.loads(lockgate(env, "approvals", "list", "--json").stdout)["approvals"]
        assert [(p["run_id"], p["node_id"], p["message"]) for p in pending] == [(run_id, "ask", "Deploy v1.2?")]
        approval_id = pending[0]["id"]
        assert approval_id in lockgate(env, "approvals", "list").stdout
        no_key = lockgate(env, "approvals", "decide", approval_id, "approve")
        assert no_key.returncode == 2 and "no API key" in no_key.stderr
        malformed = lockgate(env, "approvals", "decide", approval_id, "approve", "--key", "hunter2")
        assert malformed.returncode == 1 and "refused (malformed_key)" in malformed.stderr
        outsider = lockgate(env, "approvals", "decide", approval_id, "approve", "--key", other)
        assert outsider.returncode == 1 and "key:intern may not decide" in outsider.stderr
        unknown = lockgate(env, "approvals", "decide", "ap_nope", "approve", "--key", key)
        assert unknown.returncode == 1 and "refused (unknown_approval)" in unknown.stderr
        assert services.get_run(run_id, with_steps=False)["status"] == "waiting"  # type: ignore[index]
        decided = lockgate(env, "approvals", "decide", approval_id, "approve", "--comment", "ship it", "--key", key)
        assert decided.returncode == 0, decided.stderr
        assert "approved by key:ops-bot" in decided.stdout
        run = services.wait_for_run(run_id, timeout=10)
        assert run["result"] == "deployed" and run["state"]["ask"]["comment"] == "ship it"
        twice = lockgate(env, "approvals", "decide", approval_id, "reject", "--key", key, "--json")
        assert twice.returncode == 1 and json.loads(twice.stdout)["reason"] == "already_decided"
        assert json.loads(lockgate(env, "approvals", "list", "--json").stdout) == {"approvals": []}
    finally:
        services.stop()


def test_approvals_v2_quorum_progress_and_notify_secret(tmp_path: Path, redis_url: str, key_prefix: str) -> None:
    env = cli_env(tmp_path, redis_url, key_prefix, LOCKGATE_API_KEY="")
    services, _ = start_engine(tmp_path, redis_url, f"sqlite:///{tmp_path / 'data' / 'lockgate.db'}", key_prefix)
    try:
        services.publish_flow(flow_from_data(make_flow("release", [
            TRIGGER, {"id": "ask", "type": "approval", "config": {"timeout": "1h", "required": 2,
                                                                   "message": "Release?"}},
            {"id": "go", "type": "terminal", "config": {"output": "{{ 'released' }}"}},
            {"id": "stop", "type": "terminal", "config": {"output": "{{ 'stopped' }}"}}],
            [("start", "ask"), ("ask", "approved", "go"), ("ask", "rejected", "stop")])))
        run_id = services.create_run("release", {}).run_id
        services.wait_for_run(run_id, statuses=frozenset({"waiting"}))
        ada = lockgate(env, "keys", "create", "ada").stdout.strip()
        bob = lockgate(env, "keys", "create", "bob").stdout.strip()
        [pending] = json.loads(lockgate(env, "approvals", "list", "--json").stdout)["approvals"]
        assert (pending["required"], pending["approved_count"]) == (2, 0)
        first = lockgate(env, "approvals", "decide", pending["id"], "approve", "--comment", "tests green", "--key", ada)
        assert first.returncode == 0 and "1 of 2 approved" in first.stdout
        assert "keeps waiting for 1 more" in first.stdout
        listed = lockgate(env, "approvals", "list").stdout
        assert "1 of 2 approved" in listed and "approved by key:ada" in listed and "tests green" in listed
        twice = lockgate(env, "approvals", "decide", pending["id"], "approve", "--key", ada)
        assert twice.returncode == 1 and "refused (already_voted)" in twice.stderr
        last = lockgate(env, "approvals", "decide", pending["id"], "approve", "--key", bob, "--json")
        assert last.returncode == 0 and json.loads(last.stdout)["port"] == "approved"
        assert services.wait_for_run(run_id, timeout=10)["result"] == "released"
        secret = lockgate(env, "approvals", "notify-secret")
        assert secret.returncode == 0 and secret.stdout.startswith("lgan_")
        assert lockgate(env, "approvals", "notify-secret").stdout == secret.stdout  # made once, then kept
    finally:
        services.stop()
