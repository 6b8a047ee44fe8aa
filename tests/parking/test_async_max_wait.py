"""`max_wait` of a run created in async mode counts from its acceptance, queued time included."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from engine.api.runs import start_run
from engine.clock import ManualClock
from engine.flow import flow_from_data
from engine.host import EngineServices
from tests.engine.conftest import make_flow, start_engine
from tests.idle import Idle
from tests.parking.conftest import HOUR, START, TRIGGER, Parked

MS = 0.001


def two_queue_flow(flow_id: str = "slow") -> dict[str, Any]:
    """trigger → queue 71h → queue 71h → terminal: waits longer than max_wait whenever it starts."""
    return make_flow(flow_id, [
        TRIGGER,
        {"id": "hold", "type": "queue", "config": {"delay": "71h"}},
        {"id": "again", "type": "queue", "config": {"delay": "71h"}},
        {"id": "done", "type": "terminal", "config": {"output": "{{ 'done' }}"}},
    ], [("start", "hold"), ("hold", "again"), ("again", "done")])


class Staged:
    """Runs accepted while no worker runs (they stay `queued`), then an engine with workers on the same clock."""

    def __init__(self, tmp_path: Path, redis_url: str, db_url: str, key_prefix: str) -> None:
        self.clock = ManualClock(START)
        self.args = (tmp_path, redis_url, db_url, key_prefix)
        self.acceptor, _ = start_engine(*self.args, clock=self.clock, workers=0)
        self.engine: Parked | None = None

    def accept(self, flow_id: str, mode: str) -> str:
        return self.acceptor.create_run(flow_id, {}, mode=mode).run_id

    def start_workers(self) -> Parked:
        self.acceptor.stop()
        services, _ = start_engine(*self.args, clock=self.clock)
        self.engine = Parked(services, self.clock, Idle(services))
        return self.engine

    def stop(self) -> None:
        if self.engine is not None:
            self.engine.services.stop()
        else:
            self.acceptor.stop()


@pytest.fixture
def staged(tmp_path: Path, redis_url: str, sqlite_url: str, key_prefix: str) -> Iterator[Staged]:
    stage = Staged(tmp_path, redis_url, sqlite_url, key_prefix)
    try:
        yield stage
    finally:
        stage.stop()


def _publish(services: EngineServices, document: dict[str, Any]) -> None:
    services.publish_flow(flow_from_data(document))


def _checkpoint(parked: Parked, run_id: str) -> dict[str, Any]:
    raw = parked.handles.client.get(parked.handles.keys.run_checkpoint(run_id))
    assert raw is not None, f"run {run_id} has no checkpoint"
    loaded: dict[str, Any] = orjson.loads(raw)
    return loaded


def _queued_for_10h_then_parked(staged: Staged, mode: str) -> tuple[Parked, str]:
    _publish(staged.acceptor, two_queue_flow())
    run_id = staged.accept("slow", mode)
    run = staged.acceptor.get_run(run_id, with_steps=False)
    assert run is not None and run["status"] == "queued"
    staged.clock.advance(10 * HOUR)
    parked = staged.start_workers()
    parked.waiting_on(run_id, "hold")
    return parked, run_id


def test_an_async_run_queued_10h_expires_72h_after_acceptance_not_after_its_first_park(staged: Staged) -> None:
    parked, run_id = _queued_for_10h_then_parked(staged, "async")
    checkpoint = _checkpoint(parked, run_id)
    assert checkpoint["job"]["accepted_at"] == START
    assert checkpoint["first_parked_at"] == START + 10 * HOUR
    assert (checkpoint["wake_at"], checkpoint["wake_kind"]) == (START + 72 * HOUR, "parked_expired")
    parked.advance(62 * HOUR - MS)  # 72h minus 1 ms after acceptance; the 71h queue is due at 81h
    parked.still_waiting(run_id, "hold")
    parked.advance(MS)
    run = parked.wait_status(run_id, "succeeded", "failed")
    assert run["status"] == "failed" and run["error_type"] == "parked_expired", run["error"]
    assert "counted from its acceptance" in run["error"], run["error"]
    assert {s["step"]: s["status"] for s in run["steps"]}["hold"] == "failed"


def test_a_sync_run_in_the_same_flow_expires_72h_after_its_first_park(staged: Staged) -> None:
    parked, run_id = _queued_for_10h_then_parked(staged, "sync")
    checkpoint = _checkpoint(parked, run_id)
    assert checkpoint["job"].get("accepted_at") is None
    assert (checkpoint["wake_at"], checkpoint["wake_kind"]) == (START + 81 * HOUR, "due")
    parked.advance(62 * HOUR)  # 72h after acceptance: a sync run is not counted from there
    parked.still_waiting(run_id, "hold")
    parked.advance(9 * HOUR)  # 81h: the 71h queue is due, the run parks again on the second one
    parked.waiting_on(run_id, "again")
    parked.advance(HOUR - MS)  # 82h minus 1 ms: 72h minus 1 ms after its first park
    parked.still_waiting(run_id, "again")
    parked.advance(MS)
    run = parked.wait_status(run_id, "succeeded", "failed")
    assert run["status"] == "failed" and run["error_type"] == "parked_expired", run["error"]
    assert "counted from its first park" in run["error"], run["error"]
    assert {s["step"]: s["status"] for s in run["steps"]}["again"] == "failed"


def test_an_async_run_still_queued_at_72h_fails_without_starting(staged: Staged) -> None:
    _publish(staged.acceptor, two_queue_flow())
    expired = staged.accept("slow", "async")
    staged.clock.advance(MS)
    in_time = staged.accept("slow", "async")  # accepted 1 ms later: 1 ms of its max_wait is left
    late_sync = staged.accept("slow", "sync")  # sync runs count from their first park only
    staged.clock.advance(72 * HOUR - MS)
    parked = staged.start_workers()
    run = parked.wait_status(expired, "succeeded", "failed")
    assert run["status"] == "failed" and run["error_type"] == "parked_expired", run["error"]
    assert "stayed queued past max_wait" in run["error"] and '"start"' in run["error"], run["error"]
    full = parked.services.get_run(expired)
    assert full is not None and full["steps"] == []  # the trigger never started
    parked.waiting_on(in_time, "hold")
    assert _checkpoint(parked, in_time)["wake_at"] == START + MS + 72 * HOUR
    parked.waiting_on(late_sync, "hold")
    assert _checkpoint(parked, late_sync)["wake_kind"] == "due"


def test_the_api_with_wait_0_creates_an_async_run_and_with_a_wait_a_sync_one(parked: Parked) -> None:
    parked.publish(two_queue_flow())
    status, answer = start_run(parked.services, {"flow_id": "slow", "wait": 0})
    assert status == 202, answer
    async_id = answer["run_id"]
    status, answer = start_run(parked.services, {"flow_id": "slow", "wait": 5})
    assert status == 202 and answer["status"] == "waiting", answer
    sync_id = answer["run_id"]
    parked.waiting_on(async_id, "hold")
    assert _checkpoint(parked, async_id)["job"]["accepted_at"] == START
    assert _checkpoint(parked, sync_id)["job"].get("accepted_at") is None


def test_create_run_refuses_an_unknown_mode(parked: Parked) -> None:
    parked.publish(two_queue_flow())
    with pytest.raises(ValueError, match='mode must be "sync" or "async"'):
        parked.services.create_run("slow", {}, mode="later")
