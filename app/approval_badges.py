"""Approvals v2 in the app: the engine's pending approvals as panel rows, and the canvas's quorum badges."""

from __future__ import annotations

from datetime import UTC, datetime

from app.panels.rows import ApprovalRow, ApprovalVoteRow
from app.readable import short_run_id
from engine.read_models import Approval


def approval_row(approval: Approval) -> ApprovalRow:
    """A panel row from the engine's `Approval` read model."""
    votes = tuple(
        ApprovalVoteRow(vote.by, vote.decision, vote.comment, datetime.fromtimestamp(vote.at, UTC))
        for vote in approval.decisions
    )
    return ApprovalRow(
        approval.id,
        approval.flow_id,
        approval.run_id,
        approval.node_id,
        approval.message,
        datetime.fromtimestamp(approval.requested_at, UTC),
        datetime.fromtimestamp(approval.expires_at, UTC),
        approval.required,
        approval.approved_count,
        votes,
        approval.escalated,
        approval.reminders_sent,
        approval.node_title,
    )


def quorum_badges(rows: list[ApprovalRow], flow_id: str, selected_run: str | None) -> dict[str, tuple[str, str]]:
    """Per approval node of `flow_id` with a pending quorum: ("2 of 3 approved", tooltip). The selected run's
    approval when it waits there, else the one requested last; the tooltip says how many runs wait."""
    by_node: dict[str, list[ApprovalRow]] = {}
    for row in rows:
        if row.flow_id == flow_id and row.is_quorum:
            by_node.setdefault(row.node, []).append(row)
    badges: dict[str, tuple[str, str]] = {}
    for node, waiting in by_node.items():
        chosen = next((row for row in waiting if row.run_id == selected_run), None) or max(
            waiting, key=lambda row: row.requested_at
        )
        label = f"{chosen.approved_count} of {chosen.required} approved"
        others = len(waiting) - 1
        tip = f"run {short_run_id(chosen.run_id)}: {chosen.progress()}"
        if others:
            tip += f" ({others} more run{'s' if others != 1 else ''} waiting here: see Approvals)"
        badges[node] = (label, tip)
    return badges
