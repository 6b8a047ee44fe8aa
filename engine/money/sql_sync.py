"""The ledger's durable side: budget definitions in SQL, and rebuilding the Redis ledger from SQL rows.

Redis holds the live, atomic ledger; SQL (written by `budgets set` and, for holds, by the projector)
survives a Redis restart. `restore_ledger` puts back whatever Redis lost and never overwrites what it has.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa

from engine.money.ledger import BudgetLedger, BudgetState, HoldState
from engine.store.db import read_scope, session_scope
from engine.store.models import Budget, Hold


@dataclass(frozen=True)
class RestoreReport:
    budgets: int
    holds: int


def save_budget_definition(engine: sa.Engine, state: BudgetState, now: float) -> None:
    """Insert or update the budget's SQL row (limit and period; spent/held are the projector's)."""
    stamp = datetime.fromtimestamp(now, UTC)
    with session_scope(engine) as session:
        row = session.get(Budget, state.name)
        if row is None:
            session.add(Budget(name=state.name, limit_micros=state.limit_micros, period=state.period,
                               period_start=datetime.fromtimestamp(state.period_start, UTC),
                               spent_micros=state.spent_micros, held_micros=state.held_micros, updated_at=stamp))
        else:
            row.limit_micros, row.period, row.updated_at = state.limit_micros, state.period, stamp


def restore_ledger(engine: sa.Engine, ledger: BudgetLedger) -> RestoreReport:
    """Budgets and holds Redis does not have, from SQL; a budget's held amount is its placed holds' sum."""
    with read_scope(engine) as session:
        budgets = list(session.scalars(sa.select(Budget)))
        holds = list(session.scalars(sa.select(Hold)))
    held: dict[str, int] = {}
    for hold in holds:
        if hold.state == "placed":
            held[hold.budget_name] = held.get(hold.budget_name, 0) + hold.amount_micros
    restored_budgets = sum(
        ledger.restore_budget(BudgetState(
            name=row.name, limit_micros=row.limit_micros, period=row.period,
            period_start=int(row.period_start.timestamp()) if row.period_start else 0,
            spent_micros=row.spent_micros, held_micros=held.get(row.name, 0)))
        for row in budgets if row.period in ("day", "week", "month"))
    restored_holds = sum(ledger.restore_hold(_hold_state(row)) for row in holds)
    return RestoreReport(budgets=restored_budgets, holds=restored_holds)


def hold_rows(engine: sa.Engine, state: str | None = None) -> list[dict[str, Any]]:
    """The SQL hold rows (newest first), as plain dicts for listing."""
    query = sa.select(Hold).order_by(Hold.created_at.desc())
    if state is not None:
        query = query.where(Hold.state == state)
    with read_scope(engine) as session:
        return [{
            "id": row.id, "run_id": row.run_id, "node_id": row.node_id, "budget": row.budget_name,
            "state": row.state, "amount_micros": row.amount_micros, "charged_micros": row.charged_micros,
            "expires_at": row.expires_at.isoformat(), "created_at": row.created_at.isoformat(),
        } for row in session.scalars(query)]


def _hold_state(row: Hold) -> HoldState:
    settled = row.state != "placed"
    return HoldState(
        hold_id=row.id, budget=row.budget_name, state=row.state,  # type: ignore[arg-type]
        amount_micros=row.amount_micros, placed_at=row.created_at.timestamp(),
        expires_at=row.expires_at.timestamp(), run_id=row.run_id, node_id=row.node_id,
        charged_micros=row.charged_micros or 0, late_charged_micros=None,
        settled_at=row.updated_at.timestamp() if settled else None, reason="")
