"""Approval rows from approval events, inside the projector's batch transaction (idempotent)."""

from __future__ import annotations

from typing import Any, cast

import sqlalchemy as sa

from engine.approvals.claims import TIMEOUT_ACTOR
from engine.events import Event
from engine.events.models import ApprovalDecided, ApprovalEscalated, ApprovalReminded, ApprovalRequested
from engine.runtime.live_change import LiveChange
from engine.store.models import Approval
from engine.store.types import utc_from_epoch

APPROVALS = cast(sa.Table, Approval.__table__)
APPROVAL_EVENT_TYPES = frozenset({"approval_requested", "approval_decided", "approval_reminded",
                                  "approval_escalated"})
V2_SETTINGS = ("forbid_self", "remind_every", "escalate_at", "escalate_to", "notify_url")


def occurrence(change: LiveChange) -> str | None:
    """What an applied approval change stands for, the same each time its event is applied or emitted again (a
    worker's second attempt at the parking step requests the same approval: `approval_id_for`). An approval is
    requested, escalated and decided once per run and node; each reminder is its own. None for other changes."""
    if change.event not in APPROVAL_EVENT_TYPES:
        return None
    if change.event == "approval_reminded":
        return f"{change.node}:{change.event}:{change.seq}"
    return f"{change.node}:{change.event}"


def apply_approval_events(conn: sa.Connection, runs: dict[str, dict[str, Any]], events: list[Event]) -> None:
    """Create pending rows for `approval_requested`; settle them on `approval_decided` (the first one stays).

    Only events the state machine accepted come here."""
    for event in events:
        if isinstance(event, ApprovalRequested):
            exists = conn.execute(sa.select(APPROVALS.c.id).where(APPROVALS.c.id == event.approval_id)).first()
            if exists is None:
                conn.execute(sa.insert(APPROVALS).values(
                    id=event.approval_id, run_id=event.run_id, flow_id=runs[event.run_id]["flow_id"],
                    node_id=event.node, message=event.message, requested_at=utc_from_epoch(event.ts),
                    expires_at=utc_from_epoch(event.timeout_at), status="pending", required=event.required,
                    settings=_settings(event), reminders_sent=0))
        elif isinstance(event, ApprovalReminded):
            conn.execute(sa.update(APPROVALS)
                         .where(APPROVALS.c.id == event.approval_id, APPROVALS.c.reminders_sent < event.reminder)
                         .values(reminders_sent=event.reminder))
        elif isinstance(event, ApprovalEscalated):
            conn.execute(sa.update(APPROVALS)
                         .where(APPROVALS.c.id == event.approval_id, APPROVALS.c.escalated_at.is_(None))
                         .values(escalated_at=utc_from_epoch(event.ts)))
        elif isinstance(event, ApprovalDecided):
            timed_out = event.decided_by == TIMEOUT_ACTOR
            conn.execute(sa.update(APPROVALS)
                         .where(APPROVALS.c.id == event.approval_id, APPROVALS.c.status == "pending")
                         .values(status="expired" if timed_out else event.decision,
                                 decision="approve" if event.decision == "approved" else "reject",
                                 decided_by=event.decided_by, comment=event.comment or None,
                                 decided_at=utc_from_epoch(event.ts)))


def _settings(event: ApprovalRequested) -> dict[str, Any] | None:
    """The v2 settings the request carried (None for a v1 approval)."""
    found = {name: getattr(event, name) for name in V2_SETTINGS if getattr(event, name) not in (None, False, "")}
    return found or None
