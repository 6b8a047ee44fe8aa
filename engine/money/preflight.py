"""`create_run()`'s budget preflight: refuse a run whose flow reserves from an exhausted or unknown budget."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engine.flow import Flow
from engine.money.amounts import format_usd
from engine.money.ledger import BudgetError, BudgetLedger, UnknownBudget

DEFAULT_BUDGET = "default"


class BudgetExhausted(BudgetError):
    """The run's budget has nothing left this period (`budget_exhausted`)."""

    reason = "budget_exhausted"

    def __init__(self, message: str, budget: str) -> None:
        super().__init__(message)
        self.budget = budget


def budgets_used(flow: Flow) -> list[str]:
    """Names of the budgets the flow's `budget.reserve` nodes draw on, sorted."""
    names = {str(node.config.get("budget") or DEFAULT_BUDGET) for node in flow.nodes if node.type == "budget.reserve"}
    return sorted(names)


def ledger_preflight(ledger: BudgetLedger) -> Callable[[Flow, dict[str, Any]], None]:
    """A `BudgetPreflight` for `create_run()`: raises `BudgetExhausted` or `UnknownBudget` before the run exists."""

    def preflight(flow: Flow, inputs: dict[str, Any]) -> None:
        for name in budgets_used(flow):
            try:
                budget = ledger.budget(name)
            except UnknownBudget as exc:
                raise UnknownBudget(f'flow "{flow.id}" reserves from {exc}') from None
            if budget.exhausted:
                raise BudgetExhausted(
                    f'flow "{flow.id}": budget "{name}" is exhausted for this {budget.period} '
                    f"(limit {format_usd(budget.limit_micros)}); raise it with "
                    f"`lockgate budgets set {name} --limit USD` or wait for the next {budget.period}", name)

    return preflight
