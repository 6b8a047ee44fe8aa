"""The ticket-triage example's model path through the seams the runtime calls:
reserve → overspend check → pool slot → model call → charge (rest released) → router,
plus the rate-limited, background-past-hold_ttl and overspend variants, with the injected clock."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import redis

from engine.catalog import BudgetReserveConfig, ModelConfig
from engine.clock import ManualClock
from engine.concurrency.pool import Lease, PoolRefusal, ProviderPool
from engine.concurrency.telemetry import RedisTelemetrySink
from engine.durations import parse_duration
from engine.flow import load_flow
from engine.money.amounts import usd_to_micros
from engine.money.ledger import BudgetLedger, Reserved
from engine.money.overspend import check_overspend
from engine.providers.base import ChatRequest
from engine.providers.config import simulator_provider
from engine.providers.registry import ProviderRegistry, UnknownProvider
from engine.providers.simulator import ProviderSimulator
from engine.templates import render, truthy
from engine.transport.keys import Keyspace
from tests.conftest import EXAMPLES

TICKET = {"id": "T-1", "body": "I was charged twice, please refund me"}


@pytest.fixture
def triage() -> tuple[BudgetReserveConfig, ModelConfig, str]:
    flow = load_flow(EXAMPLES / "ticket-triage.flow.json")
    reserve_node, classify_node, route_node = flow.node("reserve"), flow.node("classify"), flow.node("route")
    assert reserve_node and classify_node and route_node
    when = route_node.config["branches"][0]["when"]
    return (BudgetReserveConfig.model_validate(reserve_node.config),
            ModelConfig.model_validate(classify_node.config), when)


class Path:
    """The money and provider services one worker holds, as the runtime will wire them."""

    def __init__(self, sim: ProviderSimulator, redis_url: str, prefix: str, clock: ManualClock) -> None:
        client = redis.Redis.from_url(redis_url)
        keys = Keyspace(prefix)
        provider = simulator_provider(sim.url)
        self.ledger = BudgetLedger(client, keys, clock)
        self.ledger.set_budget("default", 1, "month")
        self.registry = ProviderRegistry([provider], telemetry=RedisTelemetrySink(client, keys, clock=clock))
        self.pool = ProviderPool(client, keys, provider, clock=clock)
        self.clock = clock

    def request(self, model: ModelConfig, context: dict[str, Any]) -> ChatRequest:
        return ChatRequest.from_prompt(model.model, render(model.prompt, context), max_tokens=model.max_tokens)


def test_reserve_model_charge_route(start_simulator: Callable[..., ProviderSimulator], redis_url: str,
                                    key_prefix: str, clock: ManualClock,
                                    triage: tuple[BudgetReserveConfig, ModelConfig, str]) -> None:
    reserve, model, when = triage
    path = Path(start_simulator(), redis_url, key_prefix, clock)
    hold = path.ledger.reserve(reserve.budget, "run1:reserve", reserve.amount, clock.now() + 1800,
                               run_id="run1", node_id=reserve.for_)
    assert isinstance(hold, Reserved) and hold.amount_micros == 200_000
    request = path.request(model, {"inputs": {"ticket": TICKET}})
    adapter = path.registry.adapter(model.provider)
    check = check_overspend(adapter.estimate_cost_micros(request), hold.amount_micros, model.overspend)
    assert check.action == "call"
    lease = path.pool.try_acquire()
    assert lease is not None
    with lease:
        result = adapter.complete(request)
    settled = path.ledger.charge(hold.hold_id, cost_micros=result.cost_micros)
    assert settled.applied and settled.charged_micros == result.cost_micros > 0
    assert settled.released_micros == 200_000 - result.cost_micros
    assert truthy(when, {"state": {model.output_key: result.text}})
    budget = path.ledger.budget("default")
    assert (budget.spent_micros, budget.held_micros) == (result.cost_micros, 0)


def test_rate_limited_call_returns_its_hold_and_retries_with_a_new_one(
        start_simulator: Callable[..., ProviderSimulator], redis_url: str, key_prefix: str, clock: ManualClock,
        triage: tuple[BudgetReserveConfig, ModelConfig, str]) -> None:
    reserve, model, _ = triage
    clock.set(1_800_000_050.0)
    path = Path(start_simulator(requests_per_window=1, window_seconds=60), redis_url, key_prefix, clock)
    adapter = path.registry.adapter(model.provider)
    request = path.request(model, {"inputs": {"ticket": TICKET}})
    first = path.pool.try_acquire()
    assert first is not None
    with first:
        adapter.complete(request)  # uses the window up: the provider is blocked until it resets
    waits = 0
    hold = path.ledger.reserve("default", "run2:reserve:1", reserve.amount, clock.now() + 1800)
    outcome = path.pool.acquire()
    while isinstance(outcome, PoolRefusal):  # the runtime parks with pool_capacity; at most max_pool_waits
        assert outcome.reason == "rate_limited"
        path.ledger.release(hold.hold_id, reason="pool_wait")  # nothing is held while parked
        assert path.ledger.budget("default").held_micros == 0
        waits += 1
        assert waits <= model.max_pool_waits
        clock.advance(outcome.retry_after_seconds)
        hold = path.ledger.reserve("default", f"run2:reserve:{waits + 1}", reserve.amount, clock.now() + 1800)
        outcome = path.pool.acquire()
    assert waits == 1 and isinstance(outcome, Lease)
    with outcome:
        result = adapter.complete(request)
    assert path.ledger.charge(hold.hold_id, cost_micros=result.cost_micros).applied
    assert path.ledger.placed_hold_ids() == []


def test_background_answer_after_hold_ttl_is_charged_late(
        start_simulator: Callable[..., ProviderSimulator], redis_url: str, key_prefix: str, clock: ManualClock,
        triage: tuple[BudgetReserveConfig, ModelConfig, str]) -> None:
    reserve, model, _ = triage
    path = Path(start_simulator(background_seconds=45 * 60), redis_url, key_prefix, clock)
    adapter = path.registry.adapter(model.provider)
    hold_ttl = parse_duration(model.hold_ttl)
    assert hold_ttl == 1800
    hold = path.ledger.reserve("default", "run3:reserve", reserve.amount, clock.now() + hold_ttl)
    call = adapter.start_background(path.request(model, {"inputs": {"ticket": TICKET}}))
    for _ in range(60):  # polled every 30 s: still running at the hold's end
        assert adapter.poll_background(call) is None
        clock.advance(30)
        path.ledger.sweep_expired()
    assert path.ledger.hold(hold.hold_id).state == "released"
    assert path.ledger.budget("default").held_micros == 0
    while (result := adapter.poll_background(call)) is None:
        clock.advance(30)
    assert not path.ledger.charge(hold.hold_id, cost_micros=result.cost_micros).applied
    assert path.ledger.charge_late(hold.hold_id, result.cost_micros)
    assert path.ledger.budget("default").spent_micros == result.cost_micros > 0


@pytest.mark.parametrize(("policy", "action"), [("fail", "fail"), ("approve", "ask_approval"), ("allow", "call")])
def test_overspend_policies(policy: str, action: str) -> None:
    estimate, hold = usd_to_micros("0.25"), usd_to_micros("0.20")
    check = check_overspend(estimate, hold, policy, node_id="classify")  # type: ignore[arg-type]
    assert check.action == action and check.excess_micros == 50_000
    assert 'node "classify" (ai.model)' in check.message and "$0.25" in check.message
    assert check_overspend(estimate, hold, policy, approved=True).action == "call"  # type: ignore[arg-type]
    assert check_overspend(hold, hold, policy).action == "call"  # type: ignore[arg-type]


def test_unknown_provider_names_the_fix(simulator: ProviderSimulator) -> None:
    registry = ProviderRegistry([simulator_provider(simulator.url)])
    with pytest.raises(UnknownProvider, match=r"'openai' is not configured \(configured: local\).*providers.json"):
        registry.adapter("openai")
    assert registry.adapter("local") is registry.adapter("local", "main")
