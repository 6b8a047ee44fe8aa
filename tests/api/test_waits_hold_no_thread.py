"""A sync start waiting for its run holds no thread of the server's: more starts waiting than the server has threads
for blocking calls leave every other request (a webhook, a listing) answered at once, and each waiting start still
gets its answer when its wait runs out. A server stopping with starts still waiting answers each at once with its
run's status, ends its live streams cleanly, and stops without waiting for them or its grace period."""

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


def _start_waiting(url: str, key: str, outcomes: list[tuple[int, dict[str, object]] | str]) -> None:
    try:
        answer = httpx.post(f"{url}/api/v1/runs", headers={"Authorization": f"Bearer {key}"}, timeout=90,
                            json={"flow_id": "hello", "inputs": {"name": "Ada"}, "wait": 60})
        outcomes.append((answer.status_code, answer.json()))
    except (httpx.HTTPError, ValueError) as exc:
        outcomes.append(type(exc).__name__)


def test_a_stopping_server_answers_its_waiting_starts_at_once_with_their_runs_status(
        idle_engine_api: IdleEngineApi) -> None:
    outcomes: list[tuple[int, dict[str, object]] | str] = []
    clients = [threading.Thread(target=_start_waiting, args=(idle_engine_api.url, idle_engine_api.key, outcomes))
               for _ in range(5)]
    for client in clients:
        client.start()
    time.sleep(1.0)
    asked = time.monotonic()
    idle_engine_api.server.stop()
    took = time.monotonic() - asked
    assert took < GRACE_SECONDS - 2, f"the server took {took:.1f} s to stop: it waited for its starts' connections"
    assert idle_engine_api.server.thread is not None and not idle_engine_api.server.thread.is_alive()
    for client in clients:
        client.join(10)
    assert len(outcomes) == 5
    for outcome in outcomes:
        assert not isinstance(outcome, str), outcomes
        status, body = outcome
        assert (status, body["status"], body["retry_after_seconds"]) == (202, "queued", 1), body
        assert isinstance(body["run_id"], str)


async def _streams_while_stopping(api: IdleEngineApi, run_id: str) -> tuple[list[str], float]:
    """Two live streams open (one run's, every run's), then the server stops: what each stream ended with."""
    headers = {"Authorization": f"Bearer {api.key}"}
    ended: list[str] = []

    async def follow(client: httpx.AsyncClient, path: str, opened: asyncio.Event) -> None:
        try:
            async with client.stream("GET", path, headers=headers) as answer:
                assert answer.status_code == 200
                opened.set()
                async for _ in answer.aiter_bytes():
                    pass
            ended.append("closed")
        except httpx.HTTPError as exc:
            ended.append(type(exc).__name__)

    async with httpx.AsyncClient(base_url=api.url, timeout=30) as client:
        opened = [asyncio.Event(), asyncio.Event()]
        streams = [asyncio.create_task(follow(client, f"/api/v1/runs/{run_id}/events", opened[0])),
                   asyncio.create_task(follow(client, "/api/v1/live", opened[1]))]
        await asyncio.wait_for(asyncio.gather(*(event.wait() for event in opened)), 10)
        asked = time.monotonic()
        await asyncio.to_thread(api.server.stop)
        took = time.monotonic() - asked
        await asyncio.wait_for(asyncio.gather(*streams), 10)
    return ended, took


def test_a_stopping_server_ends_its_live_streams_at_once_and_cleanly(idle_engine_api: IdleEngineApi) -> None:
    started = httpx.post(f"{idle_engine_api.url}/api/v1/runs", timeout=30,
                         headers={"Authorization": f"Bearer {idle_engine_api.key}"},
                         json={"flow_id": "hello", "inputs": {"name": "Ada"}, "wait": 0})
    assert started.status_code == 202, started.text
    ended, took = asyncio.run(_streams_while_stopping(idle_engine_api, started.json()["run_id"]))
    assert ended == ["closed", "closed"]  # each stream's end arrived whole, not a connection cut mid-stream
    assert took < GRACE_SECONDS - 2, f"the server took {took:.1f} s to stop: it waited for its streams"
