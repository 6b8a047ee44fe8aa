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
from engine.events.models import HoldCharged, HoldPlaced, HoldReleased, StepCompleted
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


def _ensure_budget(conn: sa.Connection, budgets: dict[str, dict[str, Any]], name: str,
                   at: datetime) -> dict[str, Any]:
    """The budget's row as this batch last left it (read from SQL once per batch, then kept in `budgets`)."""
    row = budgets.get(name)
    if row is not None:
        return row
    found = conn.execute(sa.select(BUDGETS).where(BUDGETS.c.name == name)).mappings().first()
    if found is not None:
        row = budgets[name] = dict(found)
        return row
    # A hold on a budget SQL has not seen (set straight in Redis): a placeholder that restore skips.
    values = {"name": name, "limit_micros": 0, "period": "total", "period_start": None, "spent_micros": 0,
              "held_micros": 0, "updated_at": at}
    conn.execute(sa.insert(BUDGETS).values(values))
    budgets[name] = values
    return values


def _add_spent(conn: sa.Connection, budgets: dict[str, dict[str, Any]], budget: str, micros: int,
               at: datetime) -> None:
    row = _ensure_budget(conn, budgets, budget, at)
    spent = row["spent_micros"] or 0
    start = row["period_start"]
    if row["period"] in ("day", "week", "month"):
        current = utc_from_epoch(period_starts(at.timestamp())[row["period"]])
        if start is None or start < current:  # the period rolled over since the last charge
            spent, start = 0, current
    conn.execute(sa.update(BUDGETS).where(BUDGETS.c.name == budget)
                 .values(spent_micros=spent + micros, period_start=start, updated_at=at))
    row.update(spent_micros=spent + micros, period_start=start, updated_at=at)


def _add_run_cost(conn: sa.Connection, run_id: str, micros: int) -> None:
    conn.execute(sa.update(RUNS).where(RUNS.c.id == run_id).values(cost_micros=RUNS.c.cost_micros + micros))


def _load_holds(conn: sa.Connection, events: list[Event]) -> dict[str, dict[str, Any]]:
    """The batch's holds already in SQL, read in one query per 500 ids (not one per event)."""
    ids = sorted({event.hold_id for event in events if isinstance(event, HoldPlaced | HoldCharged | HoldReleased)})
    holds: dict[str, dict[str, Any]] = {}
    for i in range(0, len(ids), 500):
        for row in conn.execute(sa.select(HOLDS).where(HOLDS.c.id.in_(ids[i:i + 500]))).mappings():
            holds[row["id"]] = dict(row)
    return holds


def apply_money_events(conn: sa.Connection, events: list[Event]) -> None:
    """Apply first-seen hold and approval events, and the cost of model calls no hold charged (`step_completed`
    with `cost_micros`), in order, in the caller's transaction."""
    touched: set[str] = set()
    holds = _load_holds(conn, events)
    """Hold rows as this batch leaves them, so a later event of the batch sees what an earlier one wrote."""
    budgets: dict[str, dict[str, Any]] = {}
    for event in events:
        at = utc_from_epoch(event.ts)
        if isinstance(event, StepCompleted):  # a model call no hold charged: its cost is the run's all the same
            _add_run_cost(conn, event.run_id, event.cost_micros or 0)
        elif event.type == "hold_placed":
            if event.hold_id not in holds:
                _ensure_budget(conn, budgets, event.budget, at)
                values = {"id": event.hold_id, "run_id": event.run_id, "node_id": event.node,
                          "budget_name": event.budget, "amount_micros": _micros(event.amount), "charged_micros": None,
                          "state": "placed", "expires_at": utc_from_epoch(event.expires_at), "created_at": at,
                          "updated_at": at}
                conn.execute(sa.insert(HOLDS).values(values))
                holds[event.hold_id] = values
                touched.add(event.budget)
        elif event.type in ("hold_charged", "hold_released"):
            row = holds.get(event.hold_id)
            budget = row["budget_name"] if row is not None else event.budget
            if not budget:
                continue
            touched.add(budget)
            amount = _micros(event.amount)
            if event.type == "hold_charged" and event.late:
                if row is not None and row["charged_micros"] is None:
                    conn.execute(sa.update(HOLDS).where(HOLDS.c.id == event.hold_id)
                                 .values(charged_micros=amount, updated_at=at))
                    row.update(charged_micros=amount, updated_at=at)
                    _add_spent(conn, budgets, budget, amount, at)
                    _add_run_cost(conn, event.run_id, amount)
                continue
            if row is None:
                # The settle arrived for a hold whose placement never reached SQL: record it settled.
                _ensure_budget(conn, budgets, budget, at)
                values = {"id": event.hold_id, "run_id": event.run_id, "node_id": event.node, "budget_name": budget,
                          "amount_micros": amount, "state": "charged" if event.type == "hold_charged" else "released",
                          "charged_micros": amount if event.type == "hold_charged" else None,
                          "expires_at": at, "created_at": at, "updated_at": at}
                conn.execute(sa.insert(HOLDS).values(values))
                holds[event.hold_id] = values
            elif row["state"] == "placed":
                charged = event.type == "hold_charged"
                settled = {"state": "charged" if charged else "released",
                           "charged_micros": amount if charged else None, "updated_at": at}
                conn.execute(sa.update(HOLDS).where(HOLDS.c.id == event.hold_id).values(settled))
                row.update(settled)
            else:
                continue
            if event.type == "hold_charged":
                _add_spent(conn, budgets, budget, amount, at)
                _add_run_cost(conn, event.run_id, amount)
    for budget in sorted(touched):
        held = conn.execute(sa.select(sa.func.coalesce(sa.func.sum(HOLDS.c.amount_micros), 0))
                            .where(HOLDS.c.budget_name == budget, HOLDS.c.state == "placed")).scalar()
        conn.execute(sa.update(BUDGETS).where(BUDGETS.c.name == budget).values(held_micros=int(held or 0)))
