"""Money through crashes: real worker processes killed (SIGKILL) inside an `ai.model` call to the provider
simulator. The call is idempotent by default, so it runs again and is charged once; a run lost past the retry
cap is interrupted with its hold returned and its progress, checkpoint and secrets deleted."""

from __future__ import annotations

import itertools
import json
import signal
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from engine.config import EngineConfig
from engine.flow import flow_from_data
from engine.host import EngineServices
from engine.money.sql_sync import hold_rows, save_budget_definition
from engine.providers.simulator import ProviderSimulator, SimulatorSettings
from tests.money.conftest import model_flow, provider_file
from tests.recovery.conftest import FAST, WorkerProcess, wait_until

SLOW_CALL = SimulatorSettings(latency_ms=4000)
"""A model call that takes 4 s (under the provider's 5 s timeout): long enough to kill its worker inside it."""


@pytest.fixture
def sim() -> Iterator[ProviderSimulator]:
    simulator = ProviderSimulator(port=0, settings=SLOW_CALL).start()
    try:
        yield simulator
    finally:
        simulator.stop()


@pytest.fixture
def money_supervisor(recovery_config: EngineConfig, sim: ProviderSimulator) -> Iterator[EngineServices]:
    """The recovery supervisor (projector, due waker, reaper, watchdog; no workers) with the simulator as its
    `local` provider and a $1 monthly budget; worker processes read the same providers file."""
    recovery_config.data_dir.mkdir(parents=True, exist_ok=True)
    (recovery_config.data_dir / "providers.json").write_text(json.dumps(provider_file(sim.url)))
    services = EngineServices(recovery_config, workers=0, scheduler=False, block_ms=100, recovery=FAST,
                              heartbeat_seconds=0.2).start()
    try:
        assert services.sql is not None
        state = services.money.services.ledger.set_budget("default", 1, "month")
        save_budget_definition(services.sql, state, services.clock.now())
        yield services
    finally:
        services.stop()


def _settled_holds(engine: EngineServices, run_id: str) -> list[dict[str, Any]]:
    """The run's SQL hold rows once at least one exists and none is placed (the projector follows the ledger)."""
    assert engine.sql is not None
    sql = engine.sql

    def settled() -> list[dict[str, Any]] | None:
        rows = [row for row in hold_rows(sql) if row["run_id"] == run_id]
        return rows if rows and all(row["state"] != "placed" for row in rows) else None

    found: list[dict[str, Any]] = wait_until(settled, what=f"the holds of run {run_id} to settle")
    return found


def _kill_inside_call(sim: ProviderSimulator, worker: WorkerProcess, calls: int) -> None:
    wait_until(lambda: sim.counters.requests == calls, what=f"model call {calls} to be in flight")
    worker.signal(signal.SIGKILL)
    worker.proc.wait(5)


def test_a_model_call_cut_by_a_crash_runs_again_and_is_charged_once(
        money_supervisor: EngineServices, spawn_worker: Callable[[], WorkerProcess], sim: ProviderSimulator) -> None:
    engine = money_supervisor
    engine.publish_flow(flow_from_data(model_flow("charged-once", {})))
    first = spawn_worker()
    run_id = engine.create_run("charged-once", {}).run_id
    _kill_inside_call(sim, first, 1)
    sim.settings = SimulatorSettings()  # the call made again answers at once
    spawn_worker()
    run = engine.wait_for_run(run_id, timeout=20)
    assert run["status"] == "succeeded", run
    assert sim.counters.requests == 2  # ai.model is idempotent by default: it was called again
    [hold] = _settled_holds(engine, run_id)  # the reserve step's one hold, kept through the crash
    assert hold["state"] == "charged" and 0 < hold["charged_micros"] < hold["amount_micros"]
    budget = engine.money.services.ledger.budget("default")
    assert (budget.spent_micros, budget.held_micros) == (hold["charged_micros"], 0)  # charged once
    assert {step["step"]: step["status"] for step in run["steps"]}["model"] == "succeeded"


def _parked_model_flow(flow_id: str) -> dict[str, Any]:
    """start → queue 1s → reserve → ai.model → end, with a secret input: a run with progress, a checkpoint (from
    its park) and secrets in Redis while its model call is in flight."""
    document = model_flow(flow_id, {})
    start, reserve, model, end = document["nodes"]
    document["nodes"] = [start, {"id": "pause", "type": "queue", "config": {"delay": "1s"}}, reserve, model, end]
    document["edges"] = [{"from": a["id"], "to": b["id"]} for a, b in itertools.pairwise(document["nodes"])]
    document["inputs"]["token"] = {"type": "string", "secret": True}
    return document


def test_a_run_lost_past_the_retry_cap_returns_its_hold_and_forgets_its_state(
        money_supervisor: EngineServices, spawn_worker: Callable[[], WorkerProcess], sim: ProviderSimulator) -> None:
    engine = money_supervisor
    keys = engine.keys
    assert engine.handles is not None
    client = engine.handles.client
    document = _parked_model_flow("lost-thrice")
    engine.publish_flow(flow_from_data(document))
    run_id = engine.create_run("lost-thrice", {"token": "s3cret"}).run_id

    def state() -> list[bool]:
        """Whether the run's progress (any job's), checkpoint and secrets are kept."""
        progress = list(client.scan_iter(match=keys.run_progress(run_id, "*")))
        return [bool(progress), *(bool(client.exists(key)) for key in (keys.run_checkpoint(run_id),
                                                                         keys.run_secrets(run_id)))]

    for attempt in range(1, FAST.retry_cap + 2):  # the first attempt and each redelivery, every one killed
        worker = spawn_worker()
        _kill_inside_call(sim, worker, attempt)
        assert state() == [True, True, True], attempt
        assert engine.money.services.ledger.budget("default").held_micros > 0  # the reserve's hold is placed
    run = engine.wait_for_run(run_id, timeout=20)
    assert (run["status"], run["error_type"]) == ("interrupted", "interrupted"), run
    assert f"retry cap {FAST.retry_cap}" in run["error"]
    assert client.xlen(keys.jobs_dead) == 1
    assert state() == [False, False, False]  # progress, checkpoint, secrets
    [hold] = _settled_holds(engine, run_id)
    assert (hold["state"], hold["charged_micros"]) == ("released", None)  # no hold left placed
    budget = engine.money.services.ledger.budget("default")
    assert (budget.spent_micros, budget.held_micros) == (0, 0)
