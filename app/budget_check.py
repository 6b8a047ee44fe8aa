"""`budget_missing`: a `budget.reserve` drawing on a budget the engine does not have. The flow file cannot know
the engine's budgets, so the app adds this check to each open document once it has read them."""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass

from engine.flow import Flow
from engine.money.preflight import DEFAULT_BUDGET
from engine.validation import Diagnostic

BUDGET_MISSING = "budget_missing"


@dataclass(frozen=True)
class BudgetDiagnostic(Diagnostic):
    """A diagnostic about one budget; Problems offers to open Settings ▸ Budgets on it."""

    budget: str = DEFAULT_BUDGET


def budget_missing(flow: Flow, known: Collection[str]) -> list[Diagnostic]:
    """One warning per `budget.reserve` node whose budget is not among `known`."""
    found: list[Diagnostic] = []
    for node in flow.nodes:
        if node.type != "budget.reserve":
            continue
        name = str(node.config.get("budget") or DEFAULT_BUDGET)
        if name not in known:
            found.append(BudgetDiagnostic(
                BUDGET_MISSING, "warning", node.id,
                f'node "{node.id}" reserves from budget "{name}", which the engine does not have: every run '
                f"will be refused until it does. Add it in Settings ▸ Budgets (the button here).", name))
    return found


def budget_check(known: Callable[[], Collection[str] | None]) -> Callable[[Flow], list[Diagnostic]]:
    """A document check over the budgets `known()` returns (None: not read yet, so nothing is reported)."""

    def check(flow: Flow) -> list[Diagnostic]:
        names = known()
        return [] if names is None else budget_missing(flow, names)

    return check
