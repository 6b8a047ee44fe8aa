"""The money runtime inside EngineServices: ledger restore at start, the expired-hold sweep, the control
loop's cap key, and the projector applying hold events exactly once."""

from __future__ import annotations

import time
from collections.abc import Callable

import redis

from engine.events import ExternalStamper, encode_event
from engine.money.amounts import usd_to_micros
from engine.runtime.projection import apply_batch
from tests.money.conftest import MoneyEngine, model_flow, stop_engine


def test_a_restarted_engine_restores_budgets_and_placed_holds_from_sql(
        start_money_engine: Callable[..., MoneyEngine], redis_url: str, key_prefix: str) -> None:
    first = start_money_engine(background_seconds=3600)
    first.publish(model_flow("held", {"background": True}))
    run_id = first.start("held")
    first.wait_parked(run_id, "provider_response")
    [hold] = first.holds(run_id)
    stop_engine(first)
    client = redis.Redis.from_url(redis_url)
    client.delete(*client.scan_iter(match=f"{key_prefix}:*"))  # Redis lost everything (no persistence)

    second = start_money_engine(background_seconds=3600, default_budget=False)
    budget = second.money.ledger.budget("default")
    assert (budget.limit_micros, budget.held_micros) == (usd_to_micros(1), hold["amount_micros"])
    restored = second.money.ledger.hold(hold["id"])
    assert (restored.state, restored.run_id) == ("placed", run_id)


def test_the_sweep_returns_expired_holds_with_their_events(start_money_engine: Callable[..., MoneyEngine]) -> None:
    engine = start_money_engine(background_seconds=3600)
    engine.publish(model_flow("sweep", {"background": True, "hold_ttl": "2m"}))
    run_id = engine.start("sweep")
    engine.wait_parked(run_id, "provider_response")
    engine.clock.advance(121)  # past the hold's expiry, without waking the run
    released = engine.services.money.sweep_once()
    # The engine's own sweep (every 5 s) may return the hold first; either way it is returned once, as expired.
    assert [(s.run_id, s.reason) for s in released] in ([(run_id, "expired")], [])
    [hold] = engine.settled_holds(run_id, 1)
    assert hold["state"] == "released"
    assert engine.services.money.sweep_once() == []


def test_the_control_loop_keeps_the_cap_key(money_engine: MoneyEngine, redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    key = money_engine.money.keys.concurrency_cap
    deadline = time.monotonic() + 30
    while client.get(key) is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert int(client.get(key) or 0) >= 1
    assert 0 < client.pttl(key) <= 15_000  # a TTL: workers fall back to the static cap if the loop dies


def test_hold_events_apply_exactly_once(start_money_engine: Callable[..., MoneyEngine], db_url: str) -> None:
    engine = start_money_engine(db_url=db_url)
    engine.publish(model_flow("once", {}))
    run = engine.wait(engine.start("once"))
    [hold] = engine.settled_holds(run["id"], 1)
    spent = engine.sql_budget()["spent"]
    assert spent == hold["charged_micros"]
    sql = engine.services.sql
    assert sql is not None
    stamper = ExternalStamper(run["id"], engine.clock, 100)
    placed = stamper.hold_placed("reserve", "h-extra", "default", 0.05, engine.clock.now() + 600)
    charged = stamper.hold_charged("model", "h-extra", 0.01, "default")
    again = stamper.hold_charged("model", "h-extra", 0.01, "default")  # a second charge, new event id
    released = stamper.hold_released("model", "h-extra", 0.05, "late", "default")
    batch = [(f"m{i}", encode_event(e)) for i, e in enumerate((placed, charged, again, released))]
    apply_batch(sql, batch)
    apply_batch(sql, batch)  # a redelivered batch changes nothing
    extra = next(h for h in engine.holds(run["id"]) if h["id"] == "h-extra")
    assert (extra["state"], extra["charged_micros"]) == ("charged", 10_000)
    assert engine.sql_budget() == {"spent": spent + 10_000, "held": 0}
    assert engine.run_cost(run["id"]) == spent + 10_000
