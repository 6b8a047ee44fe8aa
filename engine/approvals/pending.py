"""Pending approvals, as `lockgate approvals list` and the app's panel show them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

import sqlalchemy as sa

from engine.runtime.handles import EngineHandles
from engine.runtime.queries import version_nodes
from engine.store.db import reading
from engine.store.models import Approval, ApprovalAttempt, Run

APPROVALS = cast(sa.Table, Approval.__table__)
ATTEMPTS = cast(sa.Table, ApprovalAttempt.__table__)
RUNS = cast(sa.Table, Run.__table__)


@dataclass(frozen=True)
class Vote:
    """One approver's accepted decision on an approval."""

    by: str
    decision: str
    """`approve` or `reject`."""
    comment: str
    at: float

    def to_data(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class PendingApproval:
    id: str
    flow_id: str
    run_id: str
    node_id: str
    message: str
    requested_at: float
    expires_at: float
    required: int = 1
    approved_count: int = 0
    decisions: list[Vote] = field(default_factory=list)
    escalated: bool = False
    reminders_sent: int = 0
    node_title: str = ""
    """The node's title in the run's published version ('' when it has none)."""

    def to_data(self) -> dict[str, Any]:
        return {**self.__dict__, "decisions": [vote.to_data() for vote in self.decisions]}


def votes_of(conn: sa.Connection, approval_ids: list[str]) -> dict[str, list[Vote]]:
    """The accepted decisions of each approval, in the order they came."""
    found: dict[str, list[Vote]] = {approval_id: [] for approval_id in approval_ids}
    if not approval_ids:
        return found
    rows = conn.execute(sa.select(ATTEMPTS.c.approval_id, ATTEMPTS.c.actor, ATTEMPTS.c.decision, ATTEMPTS.c.comment,
                                  ATTEMPTS.c.attempted_at)
                        .where(ATTEMPTS.c.approval_id.in_(approval_ids), ATTEMPTS.c.outcome == "accepted")
                        .order_by(ATTEMPTS.c.id)).all()
    for row in rows:
        found[row.approval_id].append(Vote(row.actor, row.decision, row.comment or "", row.attempted_at.timestamp()))
    return found


def list_pending(handles: EngineHandles, *, include_expired: bool = False) -> list[PendingApproval]:
    """Approvals still open, soonest to expire first: no decision claimed yet, the run still waiting for it
    (not cancelled meanwhile) and (unless asked) not timed out."""
    with reading(handles.sql) as conn:
        rows = conn.execute(sa.select(APPROVALS, RUNS.c.version).join(RUNS, RUNS.c.id == APPROVALS.c.run_id)
                            .where(APPROVALS.c.status == "pending", RUNS.c.status.in_(("waiting", "running")))
                            .order_by(APPROVALS.c.expires_at, APPROVALS.c.id)).mappings().all()
        if not rows:
            return []
        votes = votes_of(conn, [row["id"] for row in rows])
    # A decision claimed but not yet projected is no longer pending.
    claimed = handles.client.mget([handles.keys.approval_decision(row["id"]) for row in rows])
    now = handles.clock.now()
    return [PendingApproval(row["id"], row["flow_id"], row["run_id"], row["node_id"], row["message"] or "",
                            row["requested_at"].timestamp(), row["expires_at"].timestamp(), int(row["required"] or 1),
                            sum(1 for vote in votes[row["id"]] if vote.decision == "approve"), votes[row["id"]],
                            row["escalated_at"] is not None, int(row["reminders_sent"] or 0),
                            _node_title(handles, row["flow_id"], row["version"], row["node_id"]))
            for row, claim in zip(rows, claimed, strict=True)
            if claim is None and (include_expired or row["expires_at"].timestamp() > now)]


def _node_title(handles: EngineHandles, flow_id: str, version: int, node_id: str) -> str:
    facts = (version_nodes(handles.sql, flow_id, version) or {}).get(node_id)
    return facts.title if facts is not None else ""
