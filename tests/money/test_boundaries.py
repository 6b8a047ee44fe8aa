"""Boundaries with the injected clock: at most `max_pool_waits` pool waits, the overspend policies
(fail, allow, approve → decided or timed out), and create_run's budget preflight."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from engine.approvals.decide import decide
from engine.money.engine_loop import BudgetRefused
from engine.runtime.handles import EngineHandles
from engine.runtime.transitions import TERMINAL
from tests.money.conftest import MoneyEngine, model_flow

GREEDY = {"max_tokens": 4000}
"""Estimate (4,000 completion tokens) far above a $0.001 hold."""


def _handles(engine: MoneyEngine) -> EngineHandles:
    assert engine.services.handles is not None
    return engine.services.handles


def _next_park_count(engine: MoneyEngine, run_id: str, parks: int, after_due: float = 0.0) -> dict[str, Any]:
    """The run once it has parked `parks` times on pool capacity; fails when it ends or does not park in time.

    The pool-wait count lives in Redis at once, the stored run follows through the projector: until that
    catches up, the store still shows the previous park, so the park is new only once its due time is later."""
    deadline = time.monotonic() + 10
    while True:
        run = engine.services.get_run(run_id)
        assert run is not None
        waits = engine.money.state.progress(run_id, "model").pool_waits
        if (run["status"] == "waiting" and waits == parks
                and (run["waiting_on"] or {}).get("due_at", 0.0) > after_due):
            return run
        if run["status"] in TERMINAL or time.monotonic() > deadline:
            raise AssertionError(f"run {run_id} did not make pool wait {parks} (due after {after_due}): "
                                 f"{run['status']} {run['waiting_on']} after {waits} pool waits, {run.get('error')}")
        time.sleep(0.01)


def test_pool_wait_retries_at_most_max_pool_waits_then_fails(money_engine: MoneyEngine) -> None:
    engine = money_engine
    engine.publish(model_flow("waits", {"model": "sim-fault-429", "pool_wait": True, "max_pool_waits": 3}))
    run_id = engine.start("waits")
    last_due = 0.0
    for wait in range(1, 4):
        run = _next_park_count(engine, run_id, wait, after_due=last_due)
        assert run["waiting_on"]["reason"] == "pool_capacity"
        assert engine.money.ledger.budget("default").held_micros == 0  # its hold went back while waiting
        last_due = run["waiting_on"]["due_at"]
        engine.advance(last_due - engine.clock.now() + 1)
    run = engine.wait(run_id)
    assert run["status"] == "failed" and run["error_type"] == "rate_limited"
    assert "gave up after 3 pool waits" in run["error"]
    holds = engine.settled_holds(run_id, 4)  # the first, then a new one for each of the 3 retries
    assert {h["state"] for h in holds} == {"released"}
    assert engine.sql_budget() == {"spent": 0, "held": 0}


def test_without_pool_wait_a_rate_limit_fails_at_once(money_engine: MoneyEngine) -> None:
    engine = money_engine
    engine.publish(model_flow("nowait", {"model": "sim-fault-429"}))
    run = engine.wait(engine.start("nowait"))
    assert run["status"] == "failed" and run["error_type"] == "rate_limited"
    [hold] = engine.settled_holds(run["id"], 1)
    assert hold["state"] == "released"


def test_overspend_fail_returns_the_hold(money_engine: MoneyEngine) -> None:
    engine = money_engine
    engine.publish(model_flow("os-fail", {**GREEDY, "overspend": "fail"}, amount=0.001))
    run = engine.wait(engine.start("os-fail"))
    assert run["status"] == "failed" and run["error_type"] == "overspend"
    assert "above its hold of $0.001" in run["error"]
    [hold] = engine.settled_holds(run["id"], 1)
    assert hold["state"] == "released"
    assert engine.sim.counters.requests == 0  # no money was spent


def test_overspend_allow_calls_and_charges(money_engine: MoneyEngine) -> None:
    engine = money_engine
    engine.publish(model_flow("os-allow", {**GREEDY, "overspend": "allow"}, amount=0.001))
    run = engine.wait(engine.start("os-allow"))
    assert run["status"] == "succeeded"
    [hold] = engine.settled_holds(run["id"], 1)
    assert hold["state"] == "charged" and hold["charged_micros"] > 0


def test_overspend_approve_parks_returns_the_hold_and_an_approval_resumes_it(money_engine: MoneyEngine) -> None:
    engine = money_engine
    engine.publish(model_flow("os-approve", {**GREEDY, "overspend": "approve"}, amount=0.001))
    run_id = engine.start("os-approve")
    engine.wait_parked(run_id, "overspend_approval")
    [returned] = engine.settled_holds(run_id, 1)
    assert returned["state"] == "released"
    assert engine.money.ledger.budget("default").held_micros == 0
    approval_id = engine.money.state.progress(run_id, "model").approval_id
    assert approval_id
    result = decide(_handles(engine), approval_id, "approve", "ada", "fine, this once")
    assert result.accepted, result.message
    run = engine.wait(run_id)
    assert run["status"] == "succeeded"
    first, second = engine.settled_holds(run_id, 2)
    assert (first["state"], second["state"]) == ("released", "charged")  # the retry placed a new hold
    assert engine.sim.counters.requests == 1


def test_overspend_rejected_or_timed_out_fails_the_step(money_engine: MoneyEngine) -> None:
    engine = money_engine
    engine.publish(model_flow("os-reject", {**GREEDY, "overspend": "approve"}, amount=0.001))
    rejected, timed_out = engine.start("os-reject"), engine.start("os-reject")
    engine.wait_parked(rejected, "overspend_approval")
    engine.wait_parked(timed_out, "overspend_approval")
    approval_id = engine.money.state.progress(rejected, "model").approval_id
    assert approval_id and decide(_handles(engine), approval_id, "reject", "ada").accepted
    run = engine.wait(rejected)
    assert run["status"] == "failed" and run["error_type"] == "overspend_rejected"

    engine.advance(24 * 3600)
    run = engine.wait(timed_out)
    assert run["status"] == "failed" and run["error_type"] == "overspend_rejected"
    assert "timeout" in run["error"]
    assert engine.sim.counters.requests == 0
    for run_id in (rejected, timed_out):
        assert {h["state"] for h in engine.settled_holds(run_id, 1)} == {"released"}


def test_create_run_refuses_an_exhausted_or_unknown_budget(
        start_money_engine: Callable[..., MoneyEngine]) -> None:
    engine = start_money_engine(background_seconds=3600)
    engine.set_budget("tight", "0.20", "day")
    engine.publish(model_flow("tight", {"background": True}, amount=0.2, budget="tight"))
    first = engine.start("tight")
    engine.wait_parked(first, "provider_response")  # its hold takes the whole budget
    with pytest.raises(BudgetRefused, match=r'budget "tight" is exhausted for this day') as refused:
        engine.start("tight")
    assert refused.value.reason == "budget_exhausted"
    engine.publish(model_flow("nobudget", {}, budget="missing"))
    with pytest.raises(BudgetRefused, match="no budget 'missing'") as unknown:
        engine.start("nobudget")
    assert unknown.value.reason == "unknown_budget"
    assert len(engine.services.list_runs()) == 1  # refused runs leave no trace
