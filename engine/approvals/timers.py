"""An approval's timers (approvals v2): reminders every `remind_every`, escalation at `escalate_after`.

Kept in a Redis hash per approval (`Keyspace.approval_timers`) so every wake of the parked run reads the
same request time and counts what it already announced. Reminder n is due at `requested_at + n *
remind_every`; only those before the timeout are sent. Times come from the injected clock.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from engine.approvals.claims import CLAIM_TTL_SECONDS
from engine.transport.keys import Keyspace


@dataclass(frozen=True)
class ApprovalTimers:
    requested_at: float
    timeout_at: float
    remind_every: float | None = None
    escalate_at: float | None = None
    reminders: int = 0
    """Reminders announced so far."""
    escalated: bool = False

    @property
    def has_timers(self) -> bool:
        return self.remind_every is not None or self.escalate_at is not None

    def next_reminder_at(self) -> float | None:
        if self.remind_every is None:
            return None
        at = self.requested_at + (self.reminders + 1) * self.remind_every
        return at if at < self.timeout_at else None

    def next_wake(self) -> float:
        """The earliest of the next reminder, the escalation (until announced) and the timeout."""
        candidates = [self.timeout_at]
        reminder = self.next_reminder_at()
        if reminder is not None:
            candidates.append(reminder)
        if self.escalate_at is not None and not self.escalated and self.escalate_at < self.timeout_at:
            candidates.append(self.escalate_at)
        return min(candidates)


def due_announcements(timers: ApprovalTimers, now: float) -> tuple[int, bool]:
    """(the reminder number to announce now, 0 for none; True when the escalation is to be announced)."""
    reminder = 0
    if timers.remind_every is not None:
        passed = math.floor((min(now, timers.timeout_at) - timers.requested_at) / timers.remind_every + 1e-9)
        last_before_timeout = math.ceil((timers.timeout_at - timers.requested_at) / timers.remind_every) - 1
        passed = min(passed, last_before_timeout)
        if passed > timers.reminders:
            reminder = passed
    escalate = timers.escalate_at is not None and not timers.escalated and now >= timers.escalate_at
    return reminder, escalate


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def store_timers(client: Any, keys: Keyspace, approval_id: str, timers: ApprovalTimers) -> ApprovalTimers:
    """Record a new approval's timers; a re-run of its parking step (after a crash) keeps the first ones."""
    key = keys.approval_timers(approval_id)
    fields = {"requested_at": timers.requested_at, "timeout_at": timers.timeout_at, "reminders": 0, "escalated": 0}
    if timers.remind_every is not None:
        fields["remind_every"] = timers.remind_every
    if timers.escalate_at is not None:
        fields["escalate_at"] = timers.escalate_at
    pipe = client.pipeline(transaction=True)
    for name, value in fields.items():
        pipe.hsetnx(key, name, value)
    pipe.expire(key, CLAIM_TTL_SECONDS)
    pipe.execute()
    stored = load_timers(client, keys, approval_id)
    return stored if stored is not None else timers


def load_timers(client: Any, keys: Keyspace, approval_id: str) -> ApprovalTimers | None:
    raw = {_text(k): _text(v) for k, v in client.hgetall(keys.approval_timers(approval_id)).items()}
    if "timeout_at" not in raw:
        return None

    def number(name: str) -> float | None:
        return float(raw[name]) if name in raw else None

    return ApprovalTimers(
        float(raw["requested_at"]),
        float(raw["timeout_at"]),
        number("remind_every"),
        number("escalate_at"),
        int(float(raw.get("reminders", 0))),
        raw.get("escalated") == "1",
    )


def record_announced(
    client: Any, keys: Keyspace, approval_id: str, timers: ApprovalTimers, reminder: int, escalated: bool
) -> ApprovalTimers:
    changes: dict[str, Any] = {}
    if reminder:
        changes["reminders"] = reminder
    if escalated:
        changes["escalated"] = 1
    if changes:
        client.hset(keys.approval_timers(approval_id), mapping=changes)
    return replace(timers, reminders=reminder or timers.reminders, escalated=timers.escalated or escalated)
