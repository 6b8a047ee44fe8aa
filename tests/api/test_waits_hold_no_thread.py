"""A sync start waiting for its run holds no thread of the server's: more starts waiting than the server has threads
for blocking calls leave every other request (a webhook, a listing) answered at once, and each waiting start still
gets its answer when its wait runs out; a server stopping with starts still waiting stops within its grace period,
not when their waits end."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from engine.api.app import THREADS
from engine.api.server import GRACE_SECONDS, ApiServer
from engine.approvals.keys import create_key
from engine.clock import ManualClock
from engine.config import EngineConfig
from engine.flow import flow_from_data
from engine.host import EngineServices
from tests.api.conftest import HELLO

WAITING = THREADS + 20
WAIT_SECONDS = 4.0


@dataclass
class IdleEngineApi:
    server: ApiServer
    url: str
    key: str


@pytest.fixture
def idle_engine_api(tmp_path: Path, redis_url: str, sqlite_url: str, key_prefix: str) -> Iterator[IdleEngineApi]:
    """The API over an engine with no workers: every run stays queued, so a sync start waits all of its `wait`."""
    clock = ManualClock()
    config = EngineConfig(data_dir=tmp_path / "data", redis_url=redis_url, db_url=sqlite_url, key_prefix=key_prefix)
    services = EngineServices(config, clock=clock, workers=0, block_ms=100, scheduler=False).start()
    server = ApiServer(services, "127.0.0.1", 0).start()
    try:
        services.publish_flow(flow_from_data(HELLO))
        assert services.sql is not None
        yield IdleEngineApi(server, server.url, create_key(services.sql, "tests", clock))
    finally:
        server.stop()
        services.stop()


async def _load(url: str, key: str) -> tuple[list[int], list[float], float]:
    headers = {"Authorization": f"Bearer {key}"}
    limits = httpx.Limits(max_connections=WAITING + 10, max_keepalive_connections=WAITING + 10)
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60, limits=limits) as client:
        body = {"flow_id": "hello", "inputs": {"name": "Ada"}, "wait": WAIT_SECONDS}
        started = time.monotonic()
        starts = [asyncio.create_task(client.post("/api/v1/runs", json=body)) for _ in range(WAITING)]
        await asyncio.sleep(1.0)  # every start is in and waiting
        others: list[float] = []
        for path in ("/api/v1/flows", "/api/v1/runs?limit=5", "/api/v1/approvals"):
            asked = time.monotonic()
            answer = await client.get(path)
            assert answer.status_code == 200, answer.text
            others.append(time.monotonic() - asked)
        statuses = [answer.status_code for answer in await asyncio.gather(*starts)]
        return statuses, others, time.monotonic() - started


def test_waiting_starts_leave_other_requests_answered(idle_engine_api: IdleEngineApi) -> None:
    statuses, others, took = asyncio.run(_load(idle_engine_api.url, idle_engine_api.key))
    assert max(others) < 1.0, f"other requests waited behind the starts: {others}"
    assert statuses == [202] * WAITING
    assert took < WAIT_SECONDS + 10


def _start_waiting(url: str, key: str, outcomes: list[str]) -> None:
    try:
        answer = httpx.post(f"{url}/api/v1/runs", headers={"Authorization": f"Bearer {key}"}, timeout=90,
                            json={"flow_id": "hello", "inputs": {"name": "Ada"}, "wait": 60})
        outcomes.append(str(answer.status_code))
    except httpx.HTTPError as exc:
        outcomes.append(type(exc).__name__)


def test_a_server_stops_within_its_grace_period_with_starts_waiting(idle_engine_api: IdleEngineApi) -> None:
    outcomes: list[str] = []
    clients = [threading.Thread(target=_start_waiting, args=(idle_engine_api.url, idle_engine_api.key, outcomes))
               for _ in range(5)]
    for client in clients:
        client.start()
    time.sleep(1.0)
    asked = time.monotonic()
    idle_engine_api.server.stop()
    took = time.monotonic() - asked
    assert took < GRACE_SECONDS + 2, f"the server took {took:.1f} s to stop"
    assert idle_engine_api.server.thread is not None and not idle_engine_api.server.thread.is_alive()
    for client in clients:
        client.join(10)
    assert len(outcomes) == 5 and "201" not in outcomes  # each start's connection was closed, none answered late
