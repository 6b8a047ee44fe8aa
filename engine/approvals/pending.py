"""Pending approvals, as `lockgate approvals list` and the app's panel show them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import sqlalchemy as sa

from engine.runtime.handles import EngineHandles
from engine.store.models import Approval, Run

APPROVALS = cast(sa.Table, Approval.__table__)
RUNS = cast(sa.Table, Run.__table__)


@dataclass(frozen=True)
class PendingApproval:
    id: str
    flow_id: str
    run_id: str
    node_id: str
    message: str
    requested_at: float
    expires_at: float

    def to_data(self) -> dict[str, Any]:
        return dict(self.__dict__)


def list_pending(handles: EngineHandles, *, include_expired: bool = False) -> list[PendingApproval]:
    """Approvals still open, soonest to expire first: no decision claimed yet, the run still waiting for it
    (not cancelled meanwhile) and (unless asked) not timed out."""
    with handles.sql.connect() as conn:
        rows = conn.execute(sa.select(APPROVALS).join(RUNS, RUNS.c.id == APPROVALS.c.run_id)
                            .where(APPROVALS.c.status == "pending", RUNS.c.status.in_(("waiting", "running")))
                            .order_by(APPROVALS.c.expires_at, APPROVALS.c.id)).mappings().all()
    if not rows:
        return []
    # A decision claimed but not yet projected is no longer pending.
    claimed = handles.client.mget([handles.keys.approval_decision(row["id"]) for row in rows])
    now = handles.clock.now()
    return [PendingApproval(row["id"], row["flow_id"], row["run_id"], row["node_id"], row["message"] or "",
                            row["requested_at"].timestamp(), row["expires_at"].timestamp())
            for row, claim in zip(rows, claimed, strict=True)
            if claim is None and (include_expired or row["expires_at"].timestamp() > now)]
