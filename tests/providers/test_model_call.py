"""`ModelCaller`: every way an `ai.model` call ends, with the hold never left placed unless the run waits on
a background answer. Real simulator over HTTP, real Redis, injected clock."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest
import redis

from engine.catalog import ModelConfig
from engine.clock import ManualClock
from engine.concurrency.pool import ProviderPool
from engine.concurrency.settings import AimdSettings
from engine.concurrency.telemetry import RedisTelemetrySink
from engine.money.ledger import BudgetLedger, Reserved, Settled
from engine.providers.base import ChatRequest
from engine.providers.config import ModelPrice, ProviderConfig, simulator_provider
from engine.providers.model_call import Answered, Failed, HoldRef, LateCharge, ModelCaller, Parked, next_poll_delay
from engine.providers.registry import ProviderRegistry
from engine.providers.simulator import FAULTS, ProviderSimulator
from engine.transport.keys import Keyspace

PROMPT = "Label this ticket as refund, bug or question: refund my order"


class World:
    def __init__(self, sim: ProviderSimulator, redis_url: str, prefix: str, clock: ManualClock,
                 telemetry: bool = True) -> None:
        client = redis.Redis.from_url(redis_url)
        keys = Keyspace(prefix)
        base = simulator_provider(sim.url)
        fault_prices = {f"sim-fault-{f}": ModelPrice(prompt_per_1m=Decimal(1), completion_per_1m=Decimal(1))
                        for f in FAULTS}
        self.provider = ProviderConfig(name="local", connections=base.connections, timeout_seconds=0.5,
                                       prices={**base.prices, **fault_prices})
        self.ledger = BudgetLedger(client, keys, clock)
        self.ledger.set_budget("default", 1)
        sink = RedisTelemetrySink(client, keys, clock=clock) if telemetry else None
        self.registry = ProviderRegistry([self.provider], telemetry=sink, clock=clock)
        pool = ProviderPool(client, keys, self.provider, settings=AimdSettings(static_cap=8), clock=clock)
        self.caller = ModelCaller(self.registry, {"local": pool}, self.ledger, clock)
        self.clock = clock

    def hold(self, hold_id: str = "run:reserve", amount: str = "0.20") -> HoldRef:
        placed = self.ledger.reserve("default", hold_id, amount, self.clock.now() + 1800)
        assert isinstance(placed, Reserved)
        return HoldRef("default", amount, hold_id)

    def no_hold_left(self) -> bool:
        return self.ledger.placed_hold_ids() == [] and self.ledger.budget("default").held_micros == 0


def model(**config: Any) -> ModelConfig:
    return ModelConfig.model_validate({"provider": "local", "model": "sim-small", "prompt": PROMPT,
                                       "output_key": "label", **config})


def request(name: str = "sim-small", max_tokens: int | None = 16) -> ChatRequest:
    return ChatRequest.from_prompt(name, PROMPT, max_tokens=max_tokens)


@pytest.fixture
def world(simulator: ProviderSimulator, redis_url: str, key_prefix: str, clock: ManualClock) -> World:
    return World(simulator, redis_url, key_prefix, clock)


def test_answer_is_charged_from_its_hold(world: World) -> None:
    outcome = world.caller.call("classify", model(), request(), hold=world.hold())
    assert isinstance(outcome, Answered) and outcome.result.text == "refund"
    (charged,) = outcome.ledger
    assert isinstance(charged, Settled) and charged.state == "charged"
    assert charged.charged_micros == outcome.result.cost_micros
    assert world.no_hold_left() and world.ledger.budget("default").spent_micros == outcome.result.cost_micros


def test_overspend_fail_releases_the_hold(world: World) -> None:
    outcome = world.caller.call("classify", model(), request(max_tokens=4000), hold=world.hold(amount="0.000010"))
    assert isinstance(outcome, Failed) and outcome.error_type == "overspend"
    assert "reserve more, lower max_tokens" in outcome.message
    assert [c.state for c in outcome.ledger if isinstance(c, Settled)] == ["released"]
    assert world.no_hold_left()


def test_overspend_approve_parks_without_a_hold_then_retries_approved(world: World) -> None:
    config = model(overspend="approve")
    parked = world.caller.call("classify", config, request(max_tokens=4000), hold=world.hold(amount="0.000010"))
    assert isinstance(parked, Parked) and parked.reason == "overspend_approval"
    assert world.no_hold_left()
    retry = world.caller.call("classify", config, request(max_tokens=4000), overspend_approved=True,
                              hold=HoldRef("default", "0.000010", "run:reserve:approved"))
    assert isinstance(retry, Answered)
    placed, charged = retry.ledger
    assert isinstance(placed, Reserved) and isinstance(charged, Settled) and charged.state == "charged"
    assert world.no_hold_left()


def test_overspend_allow_calls_anyway(world: World) -> None:
    outcome = world.caller.call("classify", model(overspend="allow"), request(max_tokens=4000),
                                hold=world.hold(amount="0.000010"))
    assert isinstance(outcome, Answered) and world.no_hold_left()


def test_pool_wait_parks_at_most_max_pool_waits_then_fails(
        start_simulator: Callable[..., ProviderSimulator], redis_url: str, key_prefix: str,
        clock: ManualClock) -> None:
    clock.set(1_800_000_020.0)
    world = World(start_simulator(requests_per_window=1, window_seconds=60), redis_url, key_prefix, clock)
    config = model(pool_wait=True)
    assert isinstance(world.caller.call("classify", config, request(), hold=world.hold("h0")), Answered)
    for waits in range(3):
        parked = world.caller.call("classify", config, request(), hold=world.hold(f"h{waits + 1}"), pool_waits=waits)
        assert isinstance(parked, Parked) and parked.reason == "pool_capacity"
        assert parked.retry_after_seconds == pytest.approx(40, abs=0.01)
        assert f"waiting ({waits + 1} of 3)" in parked.detail and world.no_hold_left()
    failed = world.caller.call("classify", config, request(), hold=world.hold("h4"), pool_waits=3)
    assert isinstance(failed, Failed) and failed.error_type == "pool_capacity"
    assert "gave up after 3 pool waits" in failed.message and world.no_hold_left()
    clock.advance(40)
    resumed = world.caller.call("classify", config, request(), hold=HoldRef("default", "0.20", "h5"), pool_waits=2)
    assert isinstance(resumed, Answered) and world.no_hold_left()


def test_429_without_telemetry_parks_or_fails(start_simulator: Callable[..., ProviderSimulator], redis_url: str,
                                              key_prefix: str, clock: ManualClock) -> None:
    world = World(start_simulator(requests_per_window=1), redis_url, key_prefix, clock, telemetry=False)
    world.caller.call("classify", model(), request())
    parked = world.caller.call("classify", model(pool_wait=True), request(), hold=world.hold("a"))
    assert isinstance(parked, Parked) and parked.reason == "pool_capacity" and world.no_hold_left()
    failed = world.caller.call("classify", model(), request(), hold=world.hold("b"))
    assert isinstance(failed, Failed) and failed.error_type == "rate_limited" and failed.retryable
    assert world.no_hold_left()


@pytest.mark.parametrize(("fault", "error_type"), [
    ("500", "provider_error"), ("garbage", "provider_bad_response"), ("hang", "provider_timeout"),
    ("drop", "provider_connection_lost")])
def test_provider_faults_fail_the_step_and_return_the_hold(world: World, fault: str, error_type: str) -> None:
    outcome = world.caller.call("classify", model(model=f"sim-fault-{fault}"), request(f"sim-fault-{fault}"),
                                hold=world.hold())
    assert isinstance(outcome, Failed) and outcome.error_type == error_type
    assert outcome.message.startswith('node "classify" (ai.model): provider \'local\'')
    assert world.no_hold_left() and world.ledger.hold("run:reserve").state == "released"


def test_background_hold_lapses_at_hold_ttl_and_the_late_answer_is_charged(
        start_simulator: Callable[..., ProviderSimulator], redis_url: str, key_prefix: str,
        clock: ManualClock) -> None:
    world = World(start_simulator(background_seconds=40 * 60), redis_url, key_prefix, clock)
    config = model(background=True)
    hold = world.hold()
    started = world.caller.call("classify", config, request(), hold=hold)
    assert isinstance(started, Parked) and started.reason == "provider_response" and started.background
    assert started.retry_after_seconds == next_poll_delay(0) == 2.0
    call = started.background
    polls = 0
    while True:
        outcome = world.caller.poll("classify", config, call, hold=hold)
        polls += 1
        assert isinstance(outcome, Parked) and outcome.retry_after_seconds <= 30
        if outcome.ledger:
            break
        clock.advance(outcome.retry_after_seconds)
    (released,) = outcome.ledger  # returned by the first poll at or past hold_ttl (30 min), polled every <= 30 s
    assert isinstance(released, Settled) and released.reason == "hold_ttl"
    assert 1800 <= clock.now() - call.started_at < 1830
    assert world.no_hold_left()
    while isinstance(outcome := world.caller.poll("classify", config, call, hold=hold), Parked):
        clock.advance(outcome.retry_after_seconds)
    assert isinstance(outcome, Answered)
    (late,) = outcome.ledger
    assert isinstance(late, LateCharge) and late.cost_micros == outcome.result.cost_micros
    assert world.ledger.budget("default").spent_micros == outcome.result.cost_micros
    assert polls > 60  # every few seconds, then every 30 s at most


def test_background_answer_within_hold_ttl_is_charged_normally(world: World, clock: ManualClock) -> None:
    config = model(background=True)
    hold = world.hold()
    started = world.caller.call("classify", config, request(), hold=hold)
    assert isinstance(started, Parked) and started.background is not None
    clock.advance(6)
    answered = world.caller.poll("classify", config, started.background, hold=hold)
    assert isinstance(answered, Answered)
    assert [c.state for c in answered.ledger if isinstance(c, Settled)] == ["charged"]
    assert world.no_hold_left()


def test_unknown_provider_and_exhausted_budget_fail_clearly(world: World) -> None:
    unknown = world.caller.call("classify", model(provider="openai"), request())
    assert isinstance(unknown, Failed) and unknown.error_type == "unknown_provider"
    assert "'openai' is not configured" in unknown.message
    above = world.caller.call("classify", model(), request(), hold=HoldRef("default", "100.00", "too-big"))
    assert isinstance(above, Failed) and above.error_type == "insufficient_budget"
    world.hold("big", "1.00")
    refused = world.caller.call("classify", model(), request(), hold=HoldRef("default", "0.20", "retry"))
    assert isinstance(refused, Failed) and refused.error_type == "budget_exhausted"
    settled_hold = world.caller.call("classify", model(), request(), hold=HoldRef("default", "1.00", "big"))
    assert isinstance(settled_hold, Answered)
    again = world.caller.call("classify", model(), request(), hold=HoldRef("default", "1.00", "big"))
    assert isinstance(again, Failed) and again.error_type == "hold_settled"
