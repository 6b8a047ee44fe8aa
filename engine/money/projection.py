"""The projector's money half: hold events into `holds`, budget totals and run costs.

Runs inside the projector's batch transaction, after the run rows are written, on events applied
for the first time (the batch dedupes by event id). A hold moves `placed` → `charged` | `released`
once: a later transition event for a settled hold changes nothing, except a late charge, which
adds to spent once. Budget `held` is set to the sum of its placed holds (a value, never `+=`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

import sqlalchemy as sa

from engine.events import Event
from engine.money.amounts import usd_to_micros
from engine.money.periods import period_starts
from engine.store.models import Budget, Hold, Run
from engine.store.types import utc_from_epoch

HOLDS = cast(sa.Table, Hold.__table__)
BUDGETS = cast(sa.Table, Budget.__table__)
RUNS = cast(sa.Table, Run.__table__)

MONEY_EVENT_TYPES = frozenset({"hold_placed", "hold_charged", "hold_released"})


def _micros(amount: float) -> int:
    return usd_to_micros(repr(amount))


def _ensure_budget(conn: sa.Connection, name: str, at: datetime) -> dict[str, Any]:
    row = conn.execute(sa.select(BUDGETS).where(BUDGETS.c.name == name)).mappings().first()
    if row is not None:
        return dict(row)
    # A hold on a budget SQL has not seen (set straight in Redis): a placeholder that restore skips.
    values = {"name": name, "limit_micros": 0, "period": "total", "period_start": None, "spent_micros": 0,
              "held_micros": 0, "updated_at": at}
    conn.execute(sa.insert(BUDGETS).values(values))
    return values


def _add_spent(conn: sa.Connection, budget: str, micros: int, at: datetime) -> None:
    row = _ensure_budget(conn, budget, at)
    spent = row["spent_micros"] or 0
    start = row["period_start"]
    if row["period"] in ("day", "week", "month"):
        current = utc_from_epoch(period_starts(at.timestamp())[row["period"]])
        if start is None or start < current:  # the period rolled over since the last charge
            spent, start = 0, current
    conn.execute(sa.update(BUDGETS).where(BUDGETS.c.name == budget)
                 .values(spent_micros=spent + micros, period_start=start, updated_at=at))


def _add_run_cost(conn: sa.Connection, run_id: str, micros: int) -> None:
    conn.execute(sa.update(RUNS).where(RUNS.c.id == run_id).values(cost_micros=RUNS.c.cost_micros + micros))


def apply_money_events(conn: sa.Connection, events: list[Event]) -> None:
    """Apply first-seen hold and approval events, in order, in the caller's transaction."""
    touched: set[str] = set()
    for event in events:
        at = utc_from_epoch(event.ts)
        if event.type == "hold_placed":
            if conn.execute(sa.select(HOLDS.c.id).where(HOLDS.c.id == event.hold_id)).first() is None:
                _ensure_budget(conn, event.budget, at)
                conn.execute(sa.insert(HOLDS).values(
                    id=event.hold_id, run_id=event.run_id, node_id=event.node, budget_name=event.budget,
                    amount_micros=_micros(event.amount), charged_micros=None, state="placed",
                    expires_at=utc_from_epoch(event.expires_at), created_at=at, updated_at=at))
                touched.add(event.budget)
        elif event.type in ("hold_charged", "hold_released"):
            row = conn.execute(sa.select(HOLDS).where(HOLDS.c.id == event.hold_id)).mappings().first()
            budget = row["budget_name"] if row is not None else event.budget
            if not budget:
                continue
            touched.add(budget)
            amount = _micros(event.amount)
            if event.type == "hold_charged" and event.late:
                if row is not None and row["charged_micros"] is None:
                    conn.execute(sa.update(HOLDS).where(HOLDS.c.id == event.hold_id)
                                 .values(charged_micros=amount, updated_at=at))
                    _add_spent(conn, budget, amount, at)
                    _add_run_cost(conn, event.run_id, amount)
                continue
            if row is None:
                # The settle arrived for a hold whose placement never reached SQL: record it settled.
                _ensure_budget(conn, budget, at)
                conn.execute(sa.insert(HOLDS).values(
                    id=event.hold_id, run_id=event.run_id, node_id=event.node, budget_name=budget,
                    amount_micros=amount, state="charged" if event.type == "hold_charged" else "released",
                    charged_micros=amount if event.type == "hold_charged" else None,
                    expires_at=at, created_at=at, updated_at=at))
            elif row["state"] == "placed":
                charged = event.type == "hold_charged"
                conn.execute(sa.update(HOLDS).where(HOLDS.c.id == event.hold_id).values(
                    state="charged" if charged else "released", charged_micros=amount if charged else None,
                    updated_at=at))
            else:
                continue
            if event.type == "hold_charged":
                _add_spent(conn, budget, amount, at)
                _add_run_cost(conn, event.run_id, amount)
    for budget in sorted(touched):
        held = conn.execute(sa.select(sa.func.coalesce(sa.func.sum(HOLDS.c.amount_micros), 0))
                            .where(HOLDS.c.budget_name == budget, HOLDS.c.state == "placed")).scalar()
        conn.execute(sa.update(BUDGETS).where(BUDGETS.c.name == budget).values(held_micros=int(held or 0)))
