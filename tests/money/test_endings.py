"""No hold is ever left placed for a finished run, however it ends: succeeded, a failed step, cancelled
while running or waiting, parked_expired, and a provider that answers garbage or 500, times out or
drops the connection mid-response."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
import pytest

from tests.engine.conftest import Site, wait_until
from tests.money.conftest import MoneyEngine, model_flow

HOUR = 3600.0
MS = 0.001


def _no_placed_holds(engine: MoneyEngine, run_id: str, count: int) -> list[dict[str, object]]:
    holds = engine.settled_holds(run_id, count)
    assert engine.money.ledger.placed_hold_ids() == []
    assert engine.money.ledger.budget("default").held_micros == 0
    wait_until(lambda: engine.sql_budget()["held"] == 0, timeout=20, what="the SQL budget to hold nothing")
    return holds


def test_succeeded(money_engine: MoneyEngine) -> None:
    money_engine.publish(model_flow("ok", {}))
    run = money_engine.wait(money_engine.start("ok"))
    assert run["status"] == "succeeded" and run["result"].startswith("Simulated answer")
    [hold] = _no_placed_holds(money_engine, run["id"], 1)
    assert hold["state"] == "charged"


@pytest.mark.parametrize(("fault", "error_type"), [
    ("garbage", "provider_bad_response"),
    ("500", "provider_error"),
    ("hang", "provider_timeout"),
    ("drop", "provider_connection_lost"),
])
def test_provider_faults_fail_the_step_with_the_error_recorded(
        start_money_engine: Callable[..., MoneyEngine], fault: str, error_type: str) -> None:
    engine = start_money_engine(timeout_seconds=0.5)
    engine.publish(model_flow("faulty", {"model": f"sim-fault-{fault}"}))
    run = engine.wait(engine.start("faulty"))
    assert run["status"] == "failed" and run["error_type"] == error_type
    step = next(s for s in run["steps"] if s["step"] == "model")
    assert step["status"] == "failed" and step["error_type"] == error_type and step["error"]
    [hold] = _no_placed_holds(engine, run["id"], 1)
    assert hold["state"] == "released"


def test_failed_step_before_the_call_returns_the_reserve_hold(money_engine: MoneyEngine) -> None:
    # An unpriced model fails inside ModelCaller before it touches the hold; the run's end returns it.
    money_engine.publish(model_flow("unpriced", {"model": "no-such-model"}))
    run = money_engine.wait(money_engine.start("unpriced"))
    assert run["status"] == "failed" and run["error_type"] == "unknown_model_price"
    [hold] = _no_placed_holds(money_engine, run["id"], 1)
    assert hold["state"] == "released"


def test_cancelled_while_running(money_engine: MoneyEngine, site: Site) -> None:
    site.release.clear()
    between = [{"id": "fetch", "type": "http.request", "config": {"method": "GET", "url": f"{site.url}/hold"}}]
    money_engine.publish(model_flow("cancel-running", {}, between=between))
    run_id = money_engine.start("cancel-running")
    wait_until(lambda: site.hits.get("/hold", 0) > 0, what="the run to be inside its slow step")
    assert money_engine.services.cancel_run(run_id) == "cancelling"
    site.release.set()
    run = money_engine.wait(run_id)
    assert run["status"] == "cancelled"
    [hold] = _no_placed_holds(money_engine, run_id, 1)
    assert hold["state"] == "released"
    assert money_engine.sim.counters.requests == 0


def test_cancelled_while_waiting_on_a_background_call(start_money_engine: Callable[..., MoneyEngine],
                                                      db_url: str) -> None:
    engine = start_money_engine(background_seconds=3600, db_url=db_url)
    engine.publish(model_flow("cancel-waiting", {"background": True}))
    run_id = engine.start("cancel-waiting")
    engine.wait_parked(run_id, "provider_response")
    assert engine.holds(run_id)[0]["state"] == "placed"
    assert engine.services.cancel_run(run_id) == "cancelled"
    assert engine.wait(run_id)["status"] == "cancelled"
    [hold] = _no_placed_holds(engine, run_id, 1)
    assert hold["state"] == "released"


def test_parked_expired_while_a_background_call_runs(start_money_engine: Callable[..., MoneyEngine]) -> None:
    engine = start_money_engine(background_seconds=100 * 3600)
    engine.publish(model_flow("expire", {"background": True, "hold_ttl": "80h"}))
    run_id = engine.start("expire")
    engine.wait_parked(run_id, "provider_response")
    engine.advance(73 * 3600)
    run = engine.wait(run_id)
    assert run["status"] == "failed" and run["error_type"] == "parked_expired"
    [hold] = _no_placed_holds(engine, run_id, 1)
    assert hold["state"] == "released"


def _polled_again(engine: MoneyEngine, run_id: str) -> dict[str, Any]:
    """The run once it parked on its background call after the last advance (its due time moved past now)."""
    def parked_again() -> dict[str, Any] | None:
        run = engine.services.get_run(run_id, with_steps=False)
        assert run is not None and run["status"] not in ("succeeded", "failed", "cancelled"), run
        waiting = run.get("waiting_on") or {}
        if run["status"] == "waiting" and waiting.get("reason") == "provider_response" \
                and waiting["due_at"] > engine.clock.now():
            return run
        return None

    return dict(wait_until(parked_again, what="the background call to be polled and parked again"))


def test_a_background_call_unanswered_at_24h_fails_with_suspended_step_timeout(
        start_money_engine: Callable[..., MoneyEngine]) -> None:
    engine = start_money_engine(background_seconds=100 * HOUR)
    engine.publish(model_flow("slow-answer", {"background": True, "hold_ttl": "30h"}))
    run_id = engine.start("slow-answer")
    engine.wait_parked(run_id, "provider_response")
    first_park = engine.clock.now()
    handles = engine.services.handles
    assert handles is not None
    for at in (8 * HOUR, 16 * HOUR, 24 * HOUR - MS):  # each poll parks the step again
        engine.advance(first_park + at - engine.clock.now())
        run = _polled_again(engine, run_id)
        assert run["waiting_on"]["due_at"] - engine.clock.now() <= 30
    checkpoint = orjson.loads(handles.client.get(handles.keys.run_checkpoint(run_id)) or b"{}")
    assert (checkpoint["step_parked_at"], checkpoint["wake_kind"]) == (first_park, "suspended_step_timeout")
    assert checkpoint["wake_at"] == first_park + 24 * HOUR  # not 24h after the last poll
    assert engine.holds(run_id)[0]["state"] == "placed"

    engine.advance(first_park + 24 * HOUR - engine.clock.now())
    run = engine.wait(run_id)
    assert run["status"] == "failed" and run["error_type"] == "suspended_step_timeout"
    assert "counted from its first park" in run["error"]
    [hold] = _no_placed_holds(engine, run_id, 1)
    assert hold["state"] == "released"
