"""The ticket-triage example's model path in real runs against the provider simulator:
reserve → classify (charged from its hold, the rest released) → route, then the rate-limited and
background variants, with the engine's injected clock."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engine.money.amounts import usd_to_micros
from engine.providers.base import ChatRequest
from tests.engine.conftest import wait_until
from tests.money.conftest import MoneyEngine, triage_document

QUESTION = {"ticket": {"id": "T-7", "body": "How do I export my invoices?"}}
REFUND = {"ticket": {"id": "T-8", "body": "I was charged twice, please refund me"}}


def test_reserve_classify_route_charges_from_the_hold(start_money_engine: Callable[..., MoneyEngine],
                                                      db_url: str) -> None:
    engine = start_money_engine(db_url=db_url)  # SQLite, and PostgreSQL where one answers
    engine.publish(triage_document())
    run_id = engine.start("ticket-triage", QUESTION, trigger="hook")
    run = engine.wait_parked(run_id, "queue_delay")  # the router sent it down the follow-up path
    assert run["state"]["label"] == "question"
    [hold] = engine.settled_holds(run_id, 1)
    assert hold["state"] == "charged" and hold["node_id"] == "reserve"
    assert hold["amount_micros"] == usd_to_micros("0.20")
    cost = hold["charged_micros"]
    assert 0 < cost < hold["amount_micros"]  # the rest went back to the budget
    budget = engine.money.ledger.budget("default")
    assert (budget.spent_micros, budget.held_micros) == (cost, 0)
    assert engine.sql_budget() == {"spent": cost, "held": 0}
    assert engine.run_cost(run_id) == cost

    engine.advance(24 * 3600)
    done = engine.wait(run_id)
    assert done["status"] == "succeeded" and done["result"] == "question"
    assert [s["step"] for s in done["steps"] if s["status"] == "succeeded"][:4] == ["hook", "reserve", "classify",
                                                                                    "route"]


def test_refund_ticket_reaches_the_approval_with_its_hold_charged(money_engine: MoneyEngine) -> None:
    engine = money_engine
    engine.publish(triage_document())
    run_id = engine.start("ticket-triage", REFUND, trigger="hook")
    run = engine.wait_parked(run_id, "approval")
    assert run["state"]["label"] == "refund"
    [hold] = engine.settled_holds(run_id, 1)
    assert hold["state"] == "charged"


def test_rate_limited_run_parks_on_pool_capacity_and_continues(
        start_money_engine: Callable[..., MoneyEngine]) -> None:
    engine = start_money_engine(requests_per_window=1, window_seconds=60)
    adapter = engine.money.registry.adapter("local")
    adapter.complete(ChatRequest.from_prompt("sim-small", "use the window up"))
    engine.publish(triage_document())
    run_id = engine.start("ticket-triage", QUESTION, trigger="hook")
    run = engine.wait_parked(run_id, "pool_capacity")
    assert 0 < run["waiting_on"]["due_at"] - engine.clock.now() <= 60
    [returned] = engine.settled_holds(run_id, 1)
    assert returned["state"] == "released"  # nothing is held while the run waits
    assert engine.money.ledger.budget("default").held_micros == 0

    engine.advance(61)
    run = engine.wait_parked(run_id, "queue_delay")
    assert run["state"]["label"] == "question"
    first, second = engine.settled_holds(run_id, 2)
    assert (first["state"], second["state"]) == ("released", "charged")  # the retry placed a new hold
    assert engine.sql_budget() == {"spent": second["charged_micros"], "held": 0}


def test_background_call_parks_and_a_late_answer_is_charged_late(
        start_money_engine: Callable[..., MoneyEngine]) -> None:
    engine = start_money_engine(background_seconds=45 * 60)
    engine.publish(triage_document(background=True))
    run_id = engine.start("ticket-triage", QUESTION, trigger="hook")
    run = engine.wait_parked(run_id, "provider_response")
    started = engine.clock.now()
    assert run["waiting_on"]["due_at"] - started <= 30
    [hold] = engine.holds(run_id)
    assert hold["state"] == "placed"

    engine.advance(29 * 60)  # polled: still running, the hold still lives
    run = _next_park(engine, run_id, "provider_response")
    assert 0 < run["waiting_on"]["due_at"] - engine.clock.now() <= 30
    assert engine.money.ledger.hold(hold["id"]).state == "placed"

    engine.advance(2 * 60)  # past hold_ttl from the call's start: the hold goes back, polling goes on
    run = _next_park(engine, run_id, "provider_response")
    assert 0 < run["waiting_on"]["due_at"] - engine.clock.now() <= 30
    [hold] = engine.settled_holds(run_id, 1)
    assert hold["state"] == "released" and hold["charged_micros"] is None
    assert engine.money.ledger.budget("default").held_micros == 0

    engine.advance(15 * 60)  # the answer came: charged late, against the released hold
    run = engine.wait_parked(run_id, "queue_delay")
    assert run["state"]["label"] == "question"
    cost = engine.money.ledger.hold(hold["id"]).late_charged_micros
    assert cost and cost > 0
    assert engine.money.ledger.budget("default").spent_micros == cost
    wait_until(lambda: engine.sql_budget() == {"spent": cost, "held": 0})
    [hold] = engine.holds(run_id)
    assert (hold["state"], hold["charged_micros"]) == ("released", cost)


def _next_park(engine: MoneyEngine, run_id: str, reason: str) -> dict[str, Any]:
    """Wait until the run parked again after the last advance (its due time moved past now)."""
    def parked_again() -> dict[str, Any] | None:
        run = engine.services.get_run(run_id, with_steps=False)
        assert run is not None
        waiting = run.get("waiting_on") or {}
        if run["status"] == "waiting" and waiting.get("reason") == reason and waiting["due_at"] > engine.clock.now():
            return run
        return None

    found = wait_until(parked_again)
    assert isinstance(found, dict)
    return found
