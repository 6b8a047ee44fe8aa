"""The budget ledger on a real Redis: boundaries, exactly-once settlement, expiry, roll-over, races."""

from __future__ import annotations

import multiprocessing
import threading
from datetime import UTC, datetime

import pytest
import redis

from engine.clock import ManualClock
from engine.money.ledger import (
    BudgetError,
    BudgetLedger,
    HoldConflict,
    Refused,
    Reserved,
    UnknownBudget,
    UnknownHold,
)
from engine.transport.keys import Keyspace

HOUR = 3600.0


@pytest.fixture
def ledger(redis_url: str, key_prefix: str, clock: ManualClock) -> BudgetLedger:
    return BudgetLedger(redis.Redis.from_url(redis_url), Keyspace(key_prefix), clock)


def reserve(ledger: BudgetLedger, hold_id: str, amount: object, budget: str = "ops") -> Reserved | Refused:
    return ledger.reserve(budget, hold_id, amount, ledger._clock.now() + HOUR, run_id="run1", node_id="classify")


@pytest.mark.parametrize("limit", [-1, "-0.01", "ten", float("nan"), float("inf"), True, None, [1]])
def test_bad_limits_are_refused_with_a_clear_error(ledger: BudgetLedger, limit: object) -> None:
    with pytest.raises(BudgetError, match="budget 'ops' limit"):
        ledger.set_budget("ops", limit)


def test_bad_period_and_name_are_refused(ledger: BudgetLedger) -> None:
    with pytest.raises(BudgetError, match="period 'year' is not one of day, week, month"):
        ledger.set_budget("ops", 10, "year")
    with pytest.raises(BudgetError, match="not usable"):
        ledger.set_budget("has space", 10)


def test_a_limit_given_without_a_period_keeps_the_budgets_period(ledger: BudgetLedger) -> None:
    ledger.set_budget("ops", 1, "day")
    reserve(ledger, "h1", "0.25")
    lowered = ledger.set_budget("ops", "0.5")  # `lockgate budgets set ops --limit 0.5`: what a 402 tells people
    assert (lowered.period, lowered.limit_micros, lowered.held_micros) == ("day", 500_000, 250_000)
    assert ledger.set_budget("ops", 2, "week").period == "week"
    assert ledger.set_budget("ops", 3).period == "week"
    assert ledger.set_budget("new", 3).period == "month"  # a new budget given no period


def test_unknown_budget_names_the_fix(ledger: BudgetLedger) -> None:
    ledger.set_budget("ops", 10)
    with pytest.raises(UnknownBudget, match=r"no budget 'nope' \(budgets: ops\).*lockgate budgets set nope"):
        reserve(ledger, "h1", 1, budget="nope")
    with pytest.raises(UnknownBudget):
        ledger.budget("nope")


def test_limit_exactly_reached_then_refused(ledger: BudgetLedger) -> None:
    ledger.set_budget("ops", "1.00")
    assert isinstance(reserve(ledger, "h1", 0.6), Reserved)
    last = reserve(ledger, "h2", "0.40")
    assert isinstance(last, Reserved) and last.budget_after.held_micros == 1_000_000
    refused = reserve(ledger, "h3", "0.000001")
    assert isinstance(refused, Refused) and refused.reason == "budget_exhausted"
    assert ledger.is_exhausted("ops")
    assert "has $0.00 left" in refused.message


def test_partial_remaining_is_insufficient(ledger: BudgetLedger) -> None:
    ledger.set_budget("ops", 1)
    reserve(ledger, "h1", 0.7)
    refused = reserve(ledger, "h2", 0.5)
    assert isinstance(refused, Refused)
    assert refused.reason == "insufficient_budget" and refused.remaining_micros == 300_000
    assert ledger.budget("ops").held_micros == 700_000


def test_tenths_add_up_without_float_drift(ledger: BudgetLedger) -> None:
    ledger.set_budget("ops", 1)
    outcomes = [reserve(ledger, f"h{i}", 0.1) for i in range(11)]
    assert [isinstance(o, Reserved) for o in outcomes] == [True] * 10 + [False]


def test_reservation_of_zero_is_placed_even_on_a_full_budget(ledger: BudgetLedger) -> None:
    ledger.set_budget("ops", 1)
    reserve(ledger, "h1", 1)
    zero = reserve(ledger, "h0", 0)
    assert isinstance(zero, Reserved) and zero.amount_micros == 0
    assert ledger.budget("ops").held_micros == 1_000_000
    assert ledger.release("h0").applied


def test_negative_and_bad_amounts_are_refused(ledger: BudgetLedger) -> None:
    ledger.set_budget("ops", 1)
    with pytest.raises(BudgetError, match="negative"):
        reserve(ledger, "h1", -0.1)
    with pytest.raises(BudgetError, match="not a number"):
        reserve(ledger, "h1", "lots")
    with pytest.raises(BudgetError, match="future expiry"):
        ledger.reserve("ops", "h1", 1, ledger._clock.now())


def test_charge_takes_the_real_cost_and_releases_the_rest_exactly_once(ledger: BudgetLedger) -> None:
    ledger.set_budget("ops", 1)
    reserve(ledger, "h1", 0.2)
    charged = ledger.charge("h1", cost_micros=12_345)
    assert charged.applied and charged.state == "charged"
    assert (charged.amount_micros, charged.charged_micros, charged.released_micros) == (200_000, 12_345, 187_655)
    assert (charged.run_id, charged.node_id) == ("run1", "classify")
    again = ledger.charge("h1", cost_micros=12_345)
    never_released = ledger.release("h1")
    assert not again.applied and not never_released.applied and never_released.state == "charged"
    budget = ledger.budget("ops")
    assert (budget.spent_micros, budget.held_micros) == (12_345, 0)
    assert ledger.hold("h1").state == "charged"


def test_release_is_exactly_once_and_blocks_a_later_charge(ledger: BudgetLedger) -> None:
    ledger.set_budget("ops", 1)
    reserve(ledger, "h1", 0.5)
    first = ledger.release("h1", reason="run_failed")
    assert first.applied and first.released_micros == 500_000 and first.reason == "run_failed"
    assert not ledger.release("h1").applied
    late = ledger.charge("h1", 0.1)
    assert not late.applied and late.state == "released"
    assert ledger.budget("ops").spent_micros == 0 and ledger.budget("ops").held_micros == 0


def test_overspend_is_charged_in_full(ledger: BudgetLedger) -> None:
    ledger.set_budget("ops", 1)
    reserve(ledger, "h1", 0.1)
    settled = ledger.charge("h1", 0.25)
    assert settled.overspend_micros == 150_000 and settled.released_micros == 0
    assert ledger.budget("ops").spent_micros == 250_000


def test_unknown_hold(ledger: BudgetLedger) -> None:
    with pytest.raises(UnknownHold, match="no hold 'ghost'"):
        ledger.charge("ghost", 0.1)
    with pytest.raises(UnknownHold):
        ledger.release("ghost")


def test_replayed_reserve_returns_the_same_hold(ledger: BudgetLedger) -> None:
    ledger.set_budget("ops", 1)
    first = reserve(ledger, "run1:reserve", 0.3)
    again = reserve(ledger, "run1:reserve", 0.3)
    assert isinstance(again, Reserved) and again.replayed and not isinstance(first, Refused) and not first.replayed
    assert ledger.budget("ops").held_micros == 300_000
    with pytest.raises(HoldConflict, match="already exists"):
        reserve(ledger, "run1:reserve", 0.4)


def test_expired_holds_are_swept_once_and_late_answer_charged_once(ledger: BudgetLedger, clock: ManualClock) -> None:
    ledger.set_budget("ops", 1)
    ledger.reserve("ops", "bg", 0.5, clock.now() + 1800)
    ledger.reserve("ops", "later", 0.1, clock.now() + 7200)
    clock.advance(1799)
    assert ledger.sweep_expired() == []
    clock.advance(1)
    (swept,) = ledger.sweep_expired()
    assert swept.hold_id == "bg" and swept.reason == "expired" and swept.released_micros == 500_000
    assert ledger.sweep_expired() == []
    assert ledger.placed_hold_ids() == ["later"]
    assert ledger.budget("ops").held_micros == 100_000
    assert ledger.charge_late("bg", 40_000) is True
    assert ledger.charge_late("bg", 40_000) is False
    assert ledger.budget("ops").spent_micros == 40_000
    assert ledger.hold("bg").late_charged_micros == 40_000
    with pytest.raises(HoldConflict, match="not released"):
        ledger.charge_late("later", 1)


def test_period_rolls_over_and_keeps_holds(ledger: BudgetLedger, clock: ManualClock) -> None:
    clock.set(datetime(2027, 1, 31, 23, 0, tzinfo=UTC).timestamp())
    ledger.set_budget("ops", 1, "month")
    reserve(ledger, "spent", 0.6)
    ledger.charge("spent", 0.6)
    reserve(ledger, "open", 0.3)
    assert isinstance(reserve(ledger, "more", 0.2), Refused)
    clock.advance(2 * HOUR)  # February
    budget = ledger.budget("ops")
    assert (budget.spent_micros, budget.held_micros) == (0, 300_000)
    assert isinstance(reserve(ledger, "more", 0.7), Reserved)
    assert isinstance(reserve(ledger, "too-much", 0.01), Refused)
    ledger.charge("open", 0.1)
    assert ledger.budget("ops").spent_micros == 100_000


def test_daily_budget_rolls_at_utc_midnight(ledger: BudgetLedger, clock: ManualClock) -> None:
    clock.set(datetime(2027, 3, 3, 23, 59, tzinfo=UTC).timestamp())
    ledger.set_budget("ops", 1, "day")
    reserve(ledger, "a", 1)
    ledger.charge("a", 1)
    assert ledger.is_exhausted("ops")
    clock.advance(60)
    assert not ledger.is_exhausted("ops")


def test_concurrent_charge_and_release_settle_once(ledger: BudgetLedger) -> None:
    ledger.set_budget("ops", 10)
    reserve(ledger, "h", 1)
    barrier = threading.Barrier(16)
    results = []

    def settle(index: int) -> None:
        barrier.wait()
        results.append(ledger.charge("h", 0.5) if index % 2 else ledger.release("h"))

    threads = [threading.Thread(target=settle, args=(i,)) for i in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(r.applied for r in results) == 1
    budget = ledger.budget("ops")
    assert budget.held_micros == 0 and budget.spent_micros in (0, 500_000)


def _reserve_in_process(redis_url: str, prefix: str, worker: int, attempts: int, barrier: object,
                        results: object) -> None:
    reserved: int | str = 0
    try:
        ledger = BudgetLedger(redis.Redis.from_url(redis_url), Keyspace(prefix), ManualClock())
        barrier.wait()  # type: ignore[attr-defined]
        for attempt in range(attempts):
            outcome = ledger.reserve("shared", f"w{worker}-{attempt}", 1, 1_800_003_600.0)
            reserved += isinstance(outcome, Reserved)  # type: ignore[operator]
    except Exception as exc:  # reported to the test instead of leaving it waiting
        reserved = repr(exc)
    results.put(reserved)  # type: ignore[attr-defined]


def test_reservations_from_several_processes_never_overdraw(ledger: BudgetLedger, redis_url: str,
                                                            key_prefix: str) -> None:
    ledger.set_budget("shared", 50)
    context = multiprocessing.get_context("fork")
    barrier, results = context.Barrier(4), context.Queue()
    processes = [context.Process(target=_reserve_in_process, args=(redis_url, key_prefix, w, 30, barrier, results))
                 for w in range(4)]
    for process in processes:
        process.start()
    counts = [results.get(timeout=30) for _ in processes]
    for process in processes:
        process.join(timeout=10)
    assert sum(counts) == 50
    budget = ledger.budget("shared")
    assert budget.held_micros == 50_000_000 and budget.spent_micros == 0
    assert len(ledger.placed_hold_ids()) == 50
