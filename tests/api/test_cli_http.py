"""The command line end to end: `lockgate webhooks enable|list`, `lockgate schedules`, and `lockgate worker
--http` serving a signed webhook delivery and the API, as separate processes."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import time
from pathlib import Path

import httpx

from engine.config import EngineConfig
from engine.flow import flow_from_data
from engine.publish import publish
from engine.store.db import open_store
from engine.triggers.webhooks import signature_of
from tests.api.conftest import TICKETS
from tests.cli import LOCKGATE, cli_env, lockgate


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_cli_enables_a_webhook_and_the_worker_serves_it(tmp_path: Path, redis_url: str, key_prefix: str) -> None:
    data = tmp_path / "data"
    data.mkdir()
    sql = open_store(EngineConfig(data_dir=data, redis_url=redis_url, key_prefix=key_prefix))
    publish(sql, flow_from_data(TICKETS))
    sql.dispose()
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    env = cli_env(tmp_path, redis_url, key_prefix, LOCKGATE_HTTP_URL=base)

    before = json.loads(lockgate(env, "webhooks", "list", "tickets", "--json").stdout)
    assert [(row["trigger"], row["enabled"], row["token"]) for row in before] == [("hook", False, None)]
    enabled = lockgate(env, "webhooks", "enable", "tickets")
    assert enabled.returncode == 0, enabled.stderr
    assert "enabled" in enabled.stdout and f"{base}/webhooks/whk_" in enabled.stdout
    rows = json.loads(lockgate(env, "webhooks", "list", "tickets", "--json").stdout)
    token = rows[0]["token"]
    assert rows[0]["url"] == f"{base}/webhooks/{token}"
    no_schedule = lockgate(env, "schedules", "enable", "tickets")
    assert no_schedule.returncode == 2
    assert 'flow "tickets" has no schedule trigger' in no_schedule.stderr
    unknown = lockgate(env, "webhooks", "list", "ghost")
    assert unknown.returncode == 2 and "ghost" in unknown.stderr
    key = lockgate(env, "keys", "create", "ci").stdout.strip()

    worker = subprocess.Popen([*LOCKGATE, "worker", "--workers", "1", "--http", f"127.0.0.1:{port}"], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        body = json.dumps({"ticket": {"subject": "Where is my order?"}}).encode()
        deadline = time.monotonic() + 30
        answer = None
        while time.monotonic() < deadline:
            try:
                answer = httpx.post(f"{base}/webhooks/{token}", content=body, timeout=5,
                                    headers={"X-Hub-Signature-256": signature_of(body, token), "X-Delivery-Id": "1"})
                break
            except httpx.TransportError:
                time.sleep(0.1)
        assert answer is not None and answer.status_code == 202, answer and answer.text
        run_id = answer.json()["run_id"]
        run: dict[str, object] = {}
        while time.monotonic() < deadline and run.get("status") != "succeeded":
            run = httpx.get(f"{base}/api/v1/runs/{run_id}", headers={"Authorization": f"Bearer {key}"}).json()
            time.sleep(0.05)
        assert run["status"] == "succeeded"
        assert run["result"] == "Where is my order?"
    finally:
        worker.send_signal(signal.SIGTERM)
        _, stderr = worker.communicate(timeout=30)
    assert worker.returncode == 0
    assert f"HTTP API and webhooks on {base}" in stderr
