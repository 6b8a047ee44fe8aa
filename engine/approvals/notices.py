"""Approvals v2 `notify_url`: a signed JSON notice on request, reminder, escalation and decision.

The projector's process writes the approval changes of each applied batch to the `Keyspace.approval_notices`
stream with the batch's acknowledgement (`engine.runtime.change_outbox`), and each process running a projector
sends their notices from there: a notice is not lost to a process dying, and after such a crash a receiver can
get it twice, with the same `X-Delivery-Id` (`<run>:<seq>`). Each notice is written once
(`Keyspace.approval_notice_written`): a request that a crashed worker's next attempt makes again is not noticed
again.

A notice is signed like the outgoing `execution.finished` callback: `X-Hub-Signature-256:
sha256=HMAC-SHA256(raw body, secret)`, the secret being the engine's approval-notice secret (`notice_secret`:
made on first use, shown by `lockgate approvals notify-secret`). A refused delivery is retried
(`RETRY_DELAYS_SECONDS`), then logged and counted (`approval_notice_failed` in `Keyspace.trigger_counters`).
"""

from __future__ import annotations

import logging
import secrets
import threading
from dataclasses import dataclass
from typing import Any, cast

import httpx
import orjson
import redis
import sqlalchemy as sa

from engine.approvals.projection import occurrence
from engine.parts import PartContext
from engine.runtime import crashpoints
from engine.runtime.change_outbox import CLAIM_SECONDS, ChangeOutbox
from engine.runtime.handles import EngineHandles
from engine.runtime.live_change import LiveChange
from engine.runtime.projection import BatchResult
from engine.store.db import reading
from engine.store.models import Approval, ApprovalAttempt
from engine.triggers.settings import count
from engine.triggers.webhooks import signature_of

log = logging.getLogger("lockgate.approval_notices")
APPROVALS = cast(sa.Table, Approval.__table__)
ATTEMPTS = cast(sa.Table, ApprovalAttempt.__table__)
RETRY_DELAYS_SECONDS = (0.5, 2.0, 5.0)
TIMEOUT_SECONDS = 10.0
NOTICE_EVENTS = {
    "approval_requested": "approval.requested",
    "approval_reminded": "approval.reminded",
    "approval_escalated": "approval.escalated",
    "approval_decided": "approval.decided",
}


def notice_secret(handles: EngineHandles) -> str:
    """The secret approval notices are signed with; made once per engine (its Redis keyspace)."""
    key = handles.keys.approval_notify_secret
    handles.client.set(key, "lgan_" + secrets.token_urlsafe(24), nx=True)
    raw = handles.client.get(key)
    return raw.decode() if isinstance(raw, bytes) else str(raw)


@dataclass(frozen=True)
class Notice:
    url: str
    body: bytes
    event: str
    delivery_id: str


def notice_for(handles: EngineHandles, change: LiveChange) -> Notice | None:
    """The notice `change` (an applied approval event) stands for, if its approval has a `notify_url`."""
    event = NOTICE_EVENTS.get(change.event)
    if event is None:
        return None
    with reading(handles.sql) as conn:
        row = (
            conn.execute(
                sa.select(APPROVALS)
                .where(APPROVALS.c.run_id == change.run_id, APPROVALS.c.node_id == change.node)
                .order_by(APPROVALS.c.requested_at.desc())
                .limit(1)
            )
            .mappings()
            .first()
        )
        if row is None or not (row["settings"] or {}).get("notify_url"):
            return None
        votes = conn.execute(
            sa.select(ATTEMPTS.c.actor, ATTEMPTS.c.decision, ATTEMPTS.c.comment, ATTEMPTS.c.attempted_at)
            .where(ATTEMPTS.c.approval_id == row["id"], ATTEMPTS.c.outcome == "accepted")
            .order_by(ATTEMPTS.c.id)
        ).all()
    payload: dict[str, Any] = {
        "event": event,
        "approval_id": row["id"],
        "run_id": change.run_id,
        "flow_id": change.flow_id,
        "node": change.node,
        "message": row["message"],
        "status": row["status"],
        "required": row["required"],
        "approved_count": sum(1 for vote in votes if vote.decision == "approve"),
        "reminders_sent": row["reminders_sent"],
        "escalated": row["escalated_at"] is not None,
        "expires_at": row["expires_at"].isoformat(),
        "decided_by": row["decided_by"],
        "decisions": [
            {
                "by": vote.actor,
                "decision": vote.decision,
                "comment": vote.comment or "",
                "at": vote.attempted_at.isoformat(),
            }
            for vote in votes
        ],
    }
    return Notice(str(row["settings"]["notify_url"]), orjson.dumps(payload), event, f"{change.run_id}:{change.seq}")


class NoticeSender:
    """The ack filler and the outbox its thread reads."""

    def __init__(self, handles: EngineHandles, retry_delays: tuple[float, ...] = RETRY_DELAYS_SECONDS, *,
                 claim_seconds: float = CLAIM_SECONDS) -> None:
        self.handles = handles
        self.retry_delays = retry_delays
        keys = handles.keys
        self.outbox = ChangeOutbox(handles.client, keys.approval_notices, keys.approval_notices_group, self._notice,
                                   "approval notice", log, claim_seconds=claim_seconds)
        """Approval changes to notice."""
        self.delivered: list[str] = []
        """Delivery ids of the notices delivered (for tests and the log)."""

    @classmethod
    def start(cls, parts: PartContext, claim_seconds: float = CLAIM_SECONDS) -> NoticeSender:
        sender = cls(parts.handles, claim_seconds=claim_seconds)
        if parts.add_ack_filler is not None:
            parts.add_ack_filler(sender.fill_ack)
            parts.spawn("lockgate-approval-notices", sender.outbox.run)
        return sender

    def fill_ack(self, result: BatchResult, pipe: redis.client.Pipeline) -> None:
        for change in (*result.replayed, *result.changes):
            once = occurrence(change) if change.event in NOTICE_EVENTS else None
            if once is not None:
                self.outbox.write(pipe, change, once=self.handles.keys.approval_notice_written(change.run_id, once))

    def _notice(self, change: LiveChange, stop: threading.Event) -> bool:
        notice = notice_for(self.handles, change)
        if notice is None:
            return True
        crashpoints.reached("notice.claimed")
        return self.deliver(notice, stop) or not stop.is_set()

    def deliver(self, notice: Notice, stop: threading.Event | None = None) -> bool:
        headers = {
            "content-type": "application/json",
            "x-lockgate-event": notice.event,
            "x-delivery-id": notice.delivery_id,
            "x-hub-signature-256": signature_of(notice.body, notice_secret(self.handles)),
        }
        waits = (0.0, *self.retry_delays)
        for attempt, delay in enumerate(waits, start=1):
            if delay and (stop.wait(delay) if stop is not None else threading.Event().wait(delay)):
                return False
            try:
                answer = httpx.post(notice.url, content=notice.body, headers=headers, timeout=TIMEOUT_SECONDS)
                if answer.status_code < 300:
                    self.delivered.append(notice.delivery_id)
                    return True
                problem = f"answered {answer.status_code}"
            except httpx.HTTPError as exc:
                problem = f"{type(exc).__name__}: {exc}"
            log.warning(
                "%s notice %s to %s, attempt %d/%d: %s",
                notice.event,
                notice.delivery_id,
                notice.url,
                attempt,
                len(waits),
                problem,
            )
        count(self.handles.client, self.handles.keys, "approval_notice_failed")
        return False
