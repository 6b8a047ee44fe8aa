"""The engine events a `trigger.event` can hear: those `engine.triggers.events` derives and fires.

Pure data, so validation (a pure function of the file) can refuse a listed type the engine never publishes.
"""

from __future__ import annotations

PUBLISHED_EVENT_TYPES: frozenset[str] = frozenset({
    "run.succeeded",
    "run.failed",
    "run.cancelled",
    "run.interrupted",
    "run.parked",
    "approval.requested",
    "approval.decided",
    "approval.reminded",
    "approval.escalated",
    "approval.expired",
    "budget.exhausted",
    "hold.expired",
    "flow.published",
})
