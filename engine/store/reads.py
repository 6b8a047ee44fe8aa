"""Reads of published flows and money holds for the engine's read models (`engine.facade`)."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from engine.store.db import reading
from engine.store.models import FlowRecord, Hold, Run


def list_flows(sql: sa.Engine) -> list[dict[str, Any]]:
    """Every published flow by id: its name, newest version and enabled flag."""
    query = (sa.select(FlowRecord.id, FlowRecord.name, FlowRecord.latest_version, FlowRecord.enabled)
             .where(FlowRecord.latest_version > 0).order_by(FlowRecord.id))
    with reading(sql) as conn:
        return [dict(row) for row in conn.execute(query).mappings()]


def flow_ids(sql: sa.Engine) -> set[str]:
    with reading(sql) as conn:
        return {str(row) for row in conn.execute(sa.select(FlowRecord.id)).scalars()}


def list_holds(sql: sa.Engine, limit: int) -> list[dict[str, Any]]:
    """The newest holds, placed ones first, then charged and released."""
    query = (sa.select(Hold.id, Hold.run_id, Hold.node_id, Hold.budget_name, Hold.amount_micros,
                       Hold.charged_micros, Hold.state, Hold.expires_at)
             .order_by((Hold.state != "placed"), Hold.updated_at.desc()).limit(limit))
    with reading(sql) as conn:
        return [dict(row) for row in conn.execute(query).mappings()]


def runs_by_trigger(sql: sa.Engine, flow_id: str) -> dict[str, int]:
    """How many runs of `flow_id` each trigger node started."""
    query = (sa.select(Run.trigger, sa.func.count()).where(Run.flow_id == flow_id, Run.trigger.is_not(None))
             .group_by(Run.trigger))
    with reading(sql) as conn:
        return {str(trigger): int(total) for trigger, total in conn.execute(query)}
