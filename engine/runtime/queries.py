"""Reading runs and their steps from the store (what `lockgate runs`, the app and the API show)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

import sqlalchemy as sa

from engine.store.models import Run, Step

RUNS = cast(sa.Table, Run.__table__)
STEPS = cast(sa.Table, Step.__table__)


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _run_data(row: Any) -> dict[str, Any]:
    return {
        "id": row["id"],
        "flow_id": row["flow_id"],
        "version": row["version"],
        "status": row["status"],
        "trigger": row["trigger"],
        "inputs": row["inputs"],
        "result": row["result"],
        "error": row["error"],
        "error_type": row["error_type"],
        "waiting_on": row["waiting_on"],
        "current_node": row["current_node"],
        "cost_micros": row["cost_micros"],
        "created_at": _iso(row["created_at"]),
        "started_at": _iso(row["started_at"]),
        "finished_at": _iso(row["finished_at"]),
    }


def _step_data(row: Any) -> dict[str, Any]:
    return {
        "step": row["step"],
        "node": row["node_id"],
        "type": row["node_type"],
        "status": row["status"],
        "attempts": row["attempts"],
        "duration_ms": row["duration_ms"],
        "ports": row["ports"],
        "given": row["input"],
        "output": row["output"],
        "error": row["error"],
        "error_type": row["error_type"],
        "started_at": _iso(row["started_at"]),
        "finished_at": _iso(row["finished_at"]),
    }


def get_run(sql: sa.Engine, run_id: str, *, with_steps: bool = True) -> dict[str, Any] | None:
    """A run with its steps (ordered by start, each with `started_at` / `finished_at`) and step counts, or None."""
    with sql.connect() as conn:
        row = conn.execute(sa.select(RUNS).where(RUNS.c.id == run_id)).mappings().first()
        if row is None:
            return None
        data = _run_data(row)
        data["state"] = row["state"]
        if with_steps:
            steps = conn.execute(sa.select(STEPS).where(STEPS.c.run_id == run_id)
                                 .order_by(STEPS.c.started_at.is_(None), STEPS.c.started_at, STEPS.c.id)).mappings()
            data["steps"] = [_step_data(step) for step in steps]
            counts: dict[str, int] = {}
            for step in data["steps"]:
                counts[step["status"]] = counts.get(step["status"], 0) + 1
            data["step_counts"] = counts
    return data


def list_runs(sql: sa.Engine, *, flow_id: str | None = None, status: str | None = None,
              limit: int = 50) -> list[dict[str, Any]]:
    """Newest runs first, each with `cost_micros` (charged so far), `current_node` and `waiting_on`."""
    query = sa.select(RUNS).order_by(RUNS.c.created_at.desc(), RUNS.c.id).limit(limit)
    if flow_id:
        query = query.where(RUNS.c.flow_id == flow_id)
    if status:
        query = query.where(RUNS.c.status == status)
    with sql.connect() as conn:
        return [_run_data(row) for row in conn.execute(query).mappings()]
