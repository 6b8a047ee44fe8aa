"""A secret input never reaches the disk in plain text: not the embedded Valkey's AOF, not SQLite, not a log.

The run uses its secret twice (a `set` node copies it into state before a park, an `http.request`
sends it as a header to a real server that echoes it back into state), parks once on a queue delay
so a checkpoint is written, and ends. Then every file of the data folder is searched for the secret
in the forms a store could hold it. A non-secret marker input is searched the same way and must be
found, so the search itself cannot miss what is there.
"""

from __future__ import annotations

import base64
import json
import logging
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.clock import ManualClock
from engine.config import EngineConfig
from engine.flow import flow_from_data
from engine.host import EngineServices
from engine.runtime.create import RunRefused
from engine.runtime.sealed import SEALED_FIELD
from engine.secret_box import ENV_KEY, VERSION
from tests.engine.conftest import LocalServer, QuietHandler, make_flow, start_engine, wait_until

START = 1_800_000_000.0
HOUR = 3600.0


class HeaderServer(LocalServer):
    """A real HTTP server that records each request's Authorization header and echoes it back."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self.lock = threading.Lock()
        server = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:
                auth = self.headers.get("authorization") or ""
                with server.lock:
                    server.seen.append(auth)
                self.send_json(200, {"auth": auth})

        super().__init__(Handler)


@pytest.fixture
def header_server() -> Iterator[HeaderServer]:
    server = HeaderServer()
    try:
        yield server
    finally:
        server.close()


def secret_flow(url: str, flow_id: str = "uses-token") -> dict[str, Any]:
    return make_flow(flow_id, [
        {"id": "start", "type": "trigger.manual"},
        {"id": "remember", "type": "set", "config": {"values": {
            "copy": "{{ inputs.token }}", "label": "{{ inputs.marker }}"}}},
        {"id": "hold", "type": "queue", "config": {"delay": "1h"}},
        {"id": "call", "type": "http.request", "config": {
            "method": "GET", "url": url + "/echo", "headers": {"authorization": "Bearer {{ inputs.token }}"}}},
        {"id": "done", "type": "terminal", "config": {"output": "{{ state.call.body.auth }}"}},
    ], [("start", "remember"), ("remember", "hold"), ("hold", "call"), ("call", "done")],
        inputs={"token": {"type": "string", "secret": True}, "marker": {"type": "string"}})


def stored_forms(text: str) -> list[bytes]:
    """`text` as a file could hold it: raw, JSON-escaped (ASCII or not), base64 and URL-safe base64."""
    raw = text.encode()
    forms = {raw, json.dumps(text)[1:-1].encode(), json.dumps(text, ensure_ascii=False)[1:-1].encode(),
             base64.b64encode(raw), base64.urlsafe_b64encode(raw), base64.b64encode(raw).rstrip(b"=")}
    return sorted(forms)


def hits(folder: Path, text: str) -> list[str]:
    """Files under `folder` holding `text` in any stored form."""
    found = []
    for path in sorted(folder.rglob("*")):
        if path.is_file() and not path.is_socket():
            content = path.read_bytes()
            found += [f"{path.relative_to(folder)}: {form!r}" for form in stored_forms(text) if form in content]
    return found


@pytest.fixture
def engine_log(tmp_path: Path) -> Iterator[Path]:
    """Every log record of the test, at every level, written to a file in the data folder."""
    path = tmp_path / "data" / "engine-test.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s %(message)s"))
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield path
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
        handler.close()


def test_a_secret_input_is_on_disk_only_sealed(tmp_path: Path, header_server: HeaderServer, engine_log: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_KEY, raising=False)  # the key comes from the data folder's store
    data = tmp_path / "data"
    secret = f'tok-"{uuid.uuid4().hex}\\x'
    marker = f"marker-{uuid.uuid4().hex}"
    clock = ManualClock(START)
    services = EngineServices(EngineConfig(data_dir=data), clock=clock, workers=1, block_ms=100)
    services.start()
    try:
        assert services.redis is not None and services.redis.embedded and services.handles is not None
        client, keys = services.handles.client, services.keys
        services.publish_flow(flow_from_data(secret_flow(header_server.url)))
        run_id = services.create_run("uses-token", {"token": secret, "marker": marker}).run_id
        run = services.wait_for_run(run_id, statuses=frozenset({"waiting"}))
        assert run["waiting_on"]["node"] == "hold"

        stored_secrets = client.get(keys.run_secrets(run_id))
        assert isinstance(stored_secrets, bytes) and stored_secrets.startswith(VERSION)
        checkpoint = json.loads(client.get(keys.run_checkpoint(run_id)) or b"{}")
        assert SEALED_FIELD in checkpoint and "state" not in checkpoint
        assert checkpoint["parked_node"] == "hold" and checkpoint["wake_at"] == START + HOUR

        clock.advance(HOUR)
        assert services.waker is not None
        services.waker.due.nudge()
        run = services.wait_for_run(run_id)
        assert run["status"] == "succeeded", run.get("error")
        # The step was really given the secret, and the echo of it was in state (redaction found it there).
        assert header_server.seen == [f"Bearer {secret}"]
        assert run["result"] == "Bearer ***"
        assert run["state"]["copy"] == "***" and run["state"]["label"] == marker
        wait_until(lambda: client.get(keys.run_secrets(run_id)) is None, what="the run's secrets to be deleted")
    finally:
        services.stop()  # stops the embedded server: its AOF is flushed and closed

    files = {path.name for path in data.rglob("*")}
    assert "appendonlydir" in files and "lockgate.db" in files and "engine-test.log" in files
    aof = data / "appendonlydir"
    assert any(marker.encode() in path.read_bytes() for path in aof.iterdir()), "the AOF search finds nothing"
    assert hits(data, marker), "the search finds nothing"
    assert hits(data, secret) == []


def test_a_worker_with_another_key_fails_the_run_with_a_clear_kind(tmp_path: Path, redis_url: str, sqlite_url: str,
                                                                   key_prefix: str, header_server: HeaderServer,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    first_key, other_key = (base64.b64encode(bytes([n]) * 32).decode() for n in (1, 2))
    clock = ManualClock(START)
    monkeypatch.setenv(ENV_KEY, first_key)
    services, _ = start_engine(tmp_path, redis_url, sqlite_url, key_prefix, clock=clock, workers=1)
    try:
        services.publish_flow(flow_from_data(secret_flow(header_server.url)))
        run_id = services.create_run("uses-token", {"token": "s3cret-value", "marker": "m"}).run_id
        services.wait_for_run(run_id, statuses=frozenset({"waiting"}))
    finally:
        services.stop()

    monkeypatch.setenv(ENV_KEY, other_key)
    services, _ = start_engine(tmp_path, redis_url, sqlite_url, key_prefix, clock=clock, workers=1)
    try:
        clock.advance(HOUR)
        assert services.waker is not None
        services.waker.due.nudge()
        run = services.wait_for_run(run_id)
    finally:
        services.stop()
    assert run["status"] == "failed" and run["error_type"] == "secret_unreadable"
    assert ENV_KEY in run["error"] and "Traceback" not in run["error"]
    assert header_server.seen == []


def test_a_bad_configured_key_refuses_the_run_before_it_exists(tmp_path: Path, redis_url: str, sqlite_url: str,
                                                               key_prefix: str,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_KEY, "not base64 of 32 bytes")
    services, _ = start_engine(tmp_path, redis_url, sqlite_url, key_prefix, workers=1)
    try:
        services.publish_flow(flow_from_data(secret_flow("http://127.0.0.1:9")))
        with pytest.raises(RunRefused, match=ENV_KEY) as refused:
            services.create_run("uses-token", {"token": "s3cret-value", "marker": "m"})
        assert getattr(refused.value, "reason", None) == "secret_key_unavailable"
        assert services.list_runs() == []
    finally:
        services.stop()
