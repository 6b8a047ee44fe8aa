"""Money-area fixtures: a running engine on the real Redis and a SQLite file, the provider simulator
over real HTTP on the engine's manual clock, and helpers to drive runs through parks."""

from __future__ import annotations

import copy
import itertools
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from engine.clock import ManualClock
from engine.config import EngineConfig
from engine.flow import flow_from_data
from engine.host import EngineServices
from engine.money.ledger import BudgetState
from engine.money.sql_sync import hold_rows, save_budget_definition
from engine.money.wiring import MoneyServices
from engine.providers.config import SIMULATOR_PRICES
from engine.providers.simulator import FAULT_MODEL_PREFIX, FAULTS, ProviderSimulator, SimulatorSettings
from engine.runtime.transitions import TERMINAL
from engine.store.models import Budget, Run
from tests.conftest import EXAMPLES
from tests.engine.conftest import site  # noqa: F401  (a fixture: the engine tests' HTTP server)

START = 1_800_000_000.0


def provider_file(sim_url: str, timeout_seconds: float = 5.0, capacity: int = 8) -> dict[str, Any]:
    prices = {name: {"prompt_per_1m": str(p.prompt_per_1m), "completion_per_1m": str(p.completion_per_1m)}
              for name, p in SIMULATOR_PRICES.items()}
    prices.update({FAULT_MODEL_PREFIX + fault: prices["sim-small"] for fault in FAULTS})
    return {"providers": [{"name": "local", "timeout_seconds": timeout_seconds, "prices": prices,
                           "connections": [{"name": "main", "base_url": sim_url, "api_key": "sim-key",
                                            "capacity": capacity}]}]}


class MoneyEngine:
    """Engine services with the money runtime, the simulator and the manual clock they share."""

    def __init__(self, services: EngineServices, clock: ManualClock, sim: ProviderSimulator) -> None:
        self.services = services
        self.clock = clock
        self.sim = sim

    @property
    def money(self) -> MoneyServices:
        return self.services.money.services

    def set_budget(self, name: str, limit_usd: Any, period: str = "month") -> BudgetState:
        state = self.money.ledger.set_budget(name, limit_usd, period)
        assert self.services.sql is not None
        save_budget_definition(self.services.sql, state, self.clock.now())
        return state

    def publish(self, document: dict[str, Any]) -> None:
        self.services.publish_flow(flow_from_data(document))

    def start(self, flow_id: str, inputs: dict[str, Any] | None = None, trigger: str | None = None) -> str:
        return self.services.create_run(flow_id, inputs or {}, trigger=trigger).run_id

    def wait(self, run_id: str, *statuses: str, timeout: float = 15.0) -> dict[str, Any]:
        return self.services.wait_for_run(run_id, timeout=timeout,
                                          statuses=frozenset(statuses) if statuses else TERMINAL)

    def wait_parked(self, run_id: str, reason: str, timeout: float = 15.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            run = self.services.get_run(run_id, with_steps=False)
            assert run is not None
            waiting = run.get("waiting_on") or {}
            if run["status"] == "waiting" and waiting.get("reason") == reason:
                return run
            if run["status"] in TERMINAL or time.monotonic() > deadline:
                raise AssertionError(f"run {run_id} did not park on {reason}: {run['status']} {waiting} "
                                     f"{run.get('error')}")
            time.sleep(0.01)

    def advance(self, seconds: float) -> None:
        """Move the shared clock and wake the due waker (parked runs due by now resume)."""
        self.clock.advance(seconds)
        assert self.services.waker is not None
        self.services.waker.due.nudge()

    def holds(self, run_id: str | None = None) -> list[dict[str, Any]]:
        assert self.services.sql is not None
        rows = hold_rows(self.services.sql)
        return sorted((r for r in rows if run_id is None or r["run_id"] == run_id), key=lambda r: r["id"])

    def settled_holds(self, run_id: str, count: int, timeout: float = 10.0) -> list[dict[str, Any]]:
        """The run's SQL holds once `count` exist and none is placed (the projector lags a little)."""
        deadline = time.monotonic() + timeout
        while True:
            rows = self.holds(run_id)
            if len(rows) == count and all(r["state"] != "placed" for r in rows):
                return rows
            if time.monotonic() > deadline:
                raise AssertionError(f"run {run_id}: holds did not settle: {rows}")
            time.sleep(0.01)

    def sql_budget(self, name: str = "default") -> dict[str, Any]:
        assert self.services.sql is not None
        with self.services.sql.connect() as conn:
            row = conn.execute(sa.select(Budget.spent_micros, Budget.held_micros).where(Budget.name == name)).first()
        return {"spent": row.spent_micros, "held": row.held_micros} if row else {}

    def run_cost(self, run_id: str) -> int:
        assert self.services.sql is not None
        with self.services.sql.connect() as conn:
            return int(conn.execute(sa.select(Run.cost_micros).where(Run.id == run_id)).scalar() or 0)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture
def start_money_engine(tmp_path: Path, redis_url: str, sqlite_url: str, key_prefix: str,
                       clock: ManualClock) -> Iterator[Callable[..., MoneyEngine]]:
    """Start a simulator (settings as keywords) and an engine whose `local` provider is that simulator."""
    started: list[tuple[EngineServices, ProviderSimulator]] = []

    def start(timeout_seconds: float = 5.0, capacity: int = 8, default_budget: bool = True,
              db_url: str | None = None, event_journal: int = 0, **settings: Any) -> MoneyEngine:
        settings.setdefault("hang_seconds", 3.0)
        sim = ProviderSimulator(port=0, settings=SimulatorSettings(**settings), clock=clock).start()
        data_dir = tmp_path / "data"
        data_dir.mkdir(parents=True, exist_ok=True)
        (data_dir / "providers.json").write_text(json.dumps(provider_file(sim.url, timeout_seconds, capacity)))
        config = EngineConfig(data_dir=data_dir, redis_url=redis_url, db_url=db_url or sqlite_url,
                              key_prefix=key_prefix, event_journal=event_journal)
        services = EngineServices(config, clock=clock, workers=2, block_ms=100).start()
        started.append((services, sim))
        engine = MoneyEngine(services, clock, sim)
        if default_budget:
            engine.set_budget("default", 1, "month")
        return engine

    yield start
    for services, sim in started:
        services.stop()
        sim.stop()


def stop_engine(engine: MoneyEngine) -> None:
    engine.services.stop()
    engine.sim.stop()


@pytest.fixture
def money_engine(start_money_engine: Callable[..., MoneyEngine]) -> MoneyEngine:
    return start_money_engine()


def triage_document(**model_changes: Any) -> dict[str, Any]:
    """The shared ticket-triage example, its model node changed as given, its refund URL left alone."""
    document = copy.deepcopy(json.loads((EXAMPLES / "ticket-triage.flow.json").read_text()))
    for node in document["nodes"]:
        if node["id"] == "classify":
            node["config"].update(model_changes)
    return document


def model_flow(flow_id: str, model: dict[str, Any], amount: float = 0.2, budget: str = "default",
               between: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """start → reserve → [between...] → ai.model → end, the model's answer as the result."""
    config = {"provider": "local", "model": "sim-small", "prompt": "Say hello to {{ inputs.name }}",
              "output_key": "answer", **model}
    middle = between or []
    nodes = [{"id": "start", "type": "trigger.manual", "config": {}},
             {"id": "reserve", "type": "budget.reserve", "config": {"for": "model", "amount": amount,
                                                                      "budget": budget}},
             *middle,
             {"id": "model", "type": "ai.model", "config": config},
             {"id": "end", "type": "terminal", "config": {"output": "{{ state.answer }}"}}]
    chain = [n["id"] for n in nodes]
    return {"format": "lockgate.flow/1", "id": flow_id, "name": flow_id,
            "inputs": {"name": {"type": "string", "default": "Ada"}},
            "nodes": nodes, "edges": [{"from": a, "to": b} for a, b in itertools.pairwise(chain)]}
