"""One `lockgate serve` process per test module (its engine and HTTP API), the `lockgate` commands run against it
as processes, and JSON-Schema checks of their `--json` against the committed OpenAPI document."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest

from engine.approvals.keys import create_key
from engine.store.db import make_engine
from tests.cli import LOCKGATE, cli_env, lockgate
from tests.conftest import ROOT
from tests.engine.conftest import make_flow
from tests.fixtures import own_key_prefix, own_pg_database

OPENAPI = json.loads((ROOT / "engine" / "api" / "openapi.json").read_text(encoding="utf-8"))
START_GUARD_SECONDS = 60.0
APPROVER = "ops-bot"
TRIGGER = {"id": "start", "type": "trigger.manual"}
GATE = make_flow(
    "gate",
    [
        TRIGGER,
        {
            "id": "ask",
            "type": "approval",
            "title": "Release sign-off",
            "config": {"timeout": "1h", "approvers": [APPROVER], "message": "Ship {{ inputs.tag }}?"},
        },
        {"id": "go", "type": "terminal", "config": {"output": "{{ 'shipped ' ~ inputs.tag }}"}},
        {"id": "stop", "type": "terminal", "config": {"output": "{{ 'stopped' }}"}},
    ],
    [("start", "ask"), ("ask", "approved", "go"), ("ask", "rejected", "stop")],
    inputs={"tag": {"type": "string", "required": True}},
)


def assert_schema(data: Any, name: str) -> None:
    """`data` validates against the OpenAPI document's `name` schema."""
    schema = {"$ref": f"#/components/schemas/{name}", "components": OPENAPI["components"]}
    jsonschema.Draft202012Validator(schema).validate(data)


@dataclass
class Served:
    """A `lockgate serve` process and how to reach it."""

    env: dict[str, str]
    url: str
    key: str
    process: subprocess.Popen[bytes]
    folder: Path

    def lockgate(self, *args: str) -> subprocess.CompletedProcess[str]:
        return lockgate(self.env, *args)

    def http(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {self.key}"}, timeout=30)

    def start_run(self, flow_id: str, inputs: dict[str, Any], wait: float = 0) -> dict[str, Any]:
        with self.http() as http:
            answer = http.post("/api/v1/runs", json={"flow_id": flow_id, "inputs": inputs, "wait": wait})
        assert answer.status_code in (200, 201, 202), answer.text
        started: dict[str, Any] = answer.json()
        return started

    def wait_status(self, run_id: str, status: str) -> dict[str, Any]:
        deadline = time.monotonic() + START_GUARD_SECONDS  # a hang guard, not a timing assert
        with self.http() as http:
            while True:
                run: dict[str, Any] = http.get(f"/api/v1/runs/{run_id}").json()
                if run["status"] == status or time.monotonic() > deadline:
                    assert run["status"] == status, run
                    return run
                time.sleep(0.05)

    def decide(self, run_id: str, decision: str) -> None:
        with self.http() as http:
            [approval] = [a for a in http.get("/api/v1/approvals").json()["approvals"] if a["run_id"] == run_id]
            answer = http.post(f"/api/v1/approvals/{approval['id']}/decision", json={"decision": decision})
        assert answer.status_code == 200, answer.text

    def stop(self, sig: int = signal.SIGTERM) -> tuple[int, str]:
        """Stop the server with `sig`; its exit code and stderr."""
        if self.process.poll() is None:
            self.process.send_signal(sig)
        code = self.process.wait(30)
        return code, (self.folder / "serve.err").read_text(encoding="utf-8")


def serve(folder: Path, redis_url: str, key_prefix: str, **extra: str) -> Served:
    env = cli_env(folder, redis_url, key_prefix, LOCKGATE_API_KEY="", **extra)
    errors = folder / "serve.err"
    with errors.open("wb") as err:
        process = subprocess.Popen(
            [*LOCKGATE, "serve", "--port", "0", "--workers", "2"], env=env, stdout=subprocess.DEVNULL, stderr=err
        )
    deadline = time.monotonic() + START_GUARD_SECONDS
    marker = "lockgate serve: HTTP API and webhooks on "
    while True:
        text = errors.read_text(encoding="utf-8")
        if marker in text and "Ctrl-C stops" in text:
            url = text.split(marker, 1)[1].split()[0]
            break
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise AssertionError(f"lockgate serve did not start: {text}")
        time.sleep(0.05)
    store = make_engine(extra.get("LOCKGATE_DB_URL") or f"sqlite:///{folder / 'data' / 'lockgate.db'}")
    try:
        key = create_key(store, APPROVER)  # as `lockgate keys create` does, one process fewer
    finally:
        store.dispose()
    return Served(env, url, key, process, folder)


@pytest.fixture(scope="module")
def module_prefix(redis_url: str) -> Iterator[str]:
    with own_key_prefix(redis_url) as prefix:
        yield prefix


@pytest.fixture(scope="module")
def module_pg_url() -> Iterator[str]:
    """A fresh PostgreSQL database for the module, dropped afterwards."""
    with own_pg_database() as url:
        yield url


def write_flow(folder: Path, doc: dict[str, Any]) -> Path:
    path = folder / f"{doc['id']}.flow.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def watch(served: Served, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*LOCKGATE, "runs", "watch", *args], env=served.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def next_line(process: subprocess.Popen[str]) -> str:
    assert process.stdout is not None
    line = process.stdout.readline()
    assert line, f"runs watch ended early: {process.wait(30)} {process.stderr.read() if process.stderr else ''}"
    return line.rstrip("\n")
