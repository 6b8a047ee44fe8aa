"""API fixtures: started engine services on the machine's Redis and a fresh SQLite file, the real HTTP server
on 127.0.0.1 (a free port), an API key, and flow documents."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from engine.api.server import ApiServer
from engine.approvals.keys import create_key
from engine.clock import ManualClock
from engine.config import EngineConfig
from engine.flow import flow_from_data
from engine.host import EngineServices
from tests.engine.conftest import make_flow, site  # noqa: F401  (site: fixture)
from tests.idle import Idle


def flow_doc(flow_id: str, nodes: list[dict[str, Any]], edges: list[tuple[str, str] | tuple[str, str, str]],
             inputs: dict[str, Any] | None = None, enabled: bool = True) -> dict[str, Any]:
    doc = make_flow(flow_id, nodes, edges, inputs)
    if not enabled:
        doc["enabled"] = False
    return doc


HELLO = flow_doc("hello", [
    {"id": "start", "type": "trigger.manual"},
    {"id": "greet", "type": "set", "config": {"values": {"greeting": "Hello, {{ inputs.name }}!"}}},
    {"id": "done", "type": "terminal", "config": {"output": "{{ state.greeting }}"}},
], [("start", "greet"), ("greet", "done")], {"name": {"type": "string", "required": True}})

QUEUED = flow_doc("later", [
    {"id": "start", "type": "trigger.manual"},
    {"id": "wait", "type": "queue", "config": {"delay": "1h"}},
    {"id": "done", "type": "terminal"},
], [("start", "wait"), ("wait", "done")])

APPROVAL = flow_doc("ask", [
    {"id": "start", "type": "trigger.manual"},
    {"id": "ok", "type": "approval", "config": {"timeout": "1h", "message": "go?"}},
    {"id": "yes", "type": "terminal", "config": {"output": "approved"}},
    {"id": "no", "type": "terminal", "config": {"output": "rejected"}},
], [("start", "ok"), ("ok", "approved", "yes"), ("ok", "rejected", "no")])

TICKETS = flow_doc("tickets", [
    {"id": "hook", "type": "trigger.webhook"},
    {"id": "done", "type": "terminal", "config": {"output": "{{ inputs.ticket.subject }}"}},
], [("hook", "done")], {"ticket": {"type": "object", "required": True}})


@dataclass
class Api:
    services: EngineServices
    server: ApiServer
    http: httpx.Client
    key: str
    clock: ManualClock
    idle: Idle

    def publish(self, document: dict[str, Any]) -> None:
        self.services.publish_flow(flow_from_data(document))

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"}


def _serve(tmp_path: Path, redis_url: str, db_url: str, key_prefix: str) -> Iterator[Api]:
    clock = ManualClock()
    config = EngineConfig(data_dir=tmp_path / "data", redis_url=redis_url, db_url=db_url, key_prefix=key_prefix)
    services = EngineServices(config, clock=clock, workers=2, block_ms=100, scheduler=False).start()
    idle = Idle(services)
    server = ApiServer(services, "127.0.0.1", 0).start()
    assert services.sql is not None
    key = create_key(services.sql, "tests", clock)
    try:
        with httpx.Client(base_url=server.url, timeout=20) as http:
            yield Api(services, server, http, key, clock, idle)
    finally:
        server.stop()
        services.stop()


@pytest.fixture
def api(tmp_path: Path, redis_url: str, sqlite_url: str, key_prefix: str) -> Iterator[Api]:
    """The API on SQLite."""
    yield from _serve(tmp_path, redis_url, sqlite_url, key_prefix)


@pytest.fixture
def any_db_api(tmp_path: Path, redis_url: str, db_url: str, key_prefix: str) -> Iterator[Api]:
    """The API on SQLite, and again on PostgreSQL where one answers."""
    yield from _serve(tmp_path, redis_url, db_url, key_prefix)
