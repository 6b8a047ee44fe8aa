"""Which resume job may run a parked run, and how a run past its wait limits ends.

A run can get several resume jobs for one park: the due waker's, the start-up rebuild's, a
decision's. Each park has a token (`limits.park_token`); a job naming another park is stale, a
job without a token runs only once the park's wake time has come, and exactly one job per park
wins the Redis claim (SET NX), so no step runs twice. A redelivery of the winning job (same
message id, after its worker died) still passes.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Literal

import redis

from engine.durations import format_duration
from engine.events import EventStamper
from engine.flow import FlowSettings
from engine.parking.limits import (
    WaitLimits,
    expiry_message,
    park_record,
    park_token,
    queued_expired,
    queued_expiry_message,
)
from engine.runtime.bodies import Park
from engine.runtime.executor import Emitter
from engine.runtime.jobs import Job
from engine.transport.due import DueSet
from engine.transport.keys import Keyspace

log = logging.getLogger("lockgate.parking")

RESUME_CLAIM_TTL_SECONDS = 8 * 24 * 3600
"""Longer than any park may last (max_wait), so a claim outlives every late duplicate."""
EARLY_TOLERANCE_SECONDS = 0.001


@dataclass(frozen=True)
class Admission:
    action: Literal["resume", "drop", "expire"]
    reason: str = ""


def admit_resume(client: redis.Redis, keys: Keyspace, job: Job, message_id: bytes, checkpoint: dict[str, Any],
                 now: float) -> Admission:
    """Decide what a resume job does with the run's current checkpoint."""
    token = park_token(checkpoint)
    if job.park and job.park != token:
        return Admission("drop", f"stale resume: it names park {job.park}, the run is parked at {token}")
    wake_at = checkpoint.get("wake_at")
    if not job.park and wake_at is not None and now < float(wake_at) - EARLY_TOLERANCE_SECONDS:
        # A duplicate from an older park (or an early rebuild): keep the current park's wake in the set.
        DueSet(client, keys).schedule(job.run_id, float(wake_at))
        return Admission("drop", f"not due until {wake_at}; rescheduled")
    claim = keys.run_resume_claim(job.run_id, token)
    if not client.set(claim, message_id, nx=True, ex=RESUME_CLAIM_TTL_SECONDS) and client.get(claim) != message_id:
        return Admission("drop", f"park {token} was already resumed by another job")
    kind = checkpoint.get("wake_kind", "due")
    if not job.park and kind != "due":
        return Admission("expire", str(kind))
    return Admission("resume")


def seal_park(client: redis.Redis, keys: Keyspace, previous: dict[str, Any] | None, park: Park, now: float,
              settings: FlowSettings, accepted_at: float | None = None, node: str | None = None) -> dict[str, Any]:
    """The park fields for the new checkpoint; an approval decided before its park was sealed wakes at once.

    `accepted_at` is set for a run created in async mode: its `max_wait` counts from then. `node` is the
    node parking; a step parking again on it keeps its `suspended_step_timeout` clock.
    """
    record = park_record(previous, park.reason, park.due_at, now, WaitLimits.of(settings), accepted_at, node)
    if park.wake_on_key:
        record["wake_on_key"] = park.wake_on_key
    approval_id = park.detail.get("approval_id")
    if approval_id and client.exists(keys.approval_decision(str(approval_id))):
        record.update(wake_at=now, wake_kind="due")
    return record


def expire_parked(stamper: EventStamper, emitter: Emitter, checkpoint: dict[str, Any], settings: FlowSettings,
                  worker: str = "") -> None:
    """Fail a run whose wait ran out: the suspended step fails, then the run, with the limit as error type."""
    node = str(checkpoint.get("parked_node"))
    kind = str(checkpoint.get("wake_kind"))
    limits = WaitLimits.of(settings)
    limit = limits.suspended_step_timeout if kind == "suspended_step_timeout" else limits.max_wait
    message = expiry_message(checkpoint, format_duration(limit))
    emitter.emit(stamper.run_resumed(node, worker))
    emitter.emit(stamper.step_failed(node, node, message, error_type=kind))
    emitter.emit(stamper.run_failed(message, kind, node))
    log.info("run %s: %s", stamper.run_id, message)


def expire_queued(stamper: EventStamper, emitter: Emitter, accepted_at: float | None, now: float,
                  settings: FlowSettings, trigger: str) -> bool:
    """Fail an async run that stayed queued past `max_wait` from its acceptance; True when it did."""
    if accepted_at is None:  # a sync run: its max_wait counts from its first park
        return False
    limits = WaitLimits.of(settings)
    if not queued_expired(accepted_at, now, limits):
        return False
    message = queued_expiry_message(format_duration(limits.max_wait), trigger)
    emitter.emit(stamper.run_failed(message, "parked_expired"))
    log.info("run %s: %s", stamper.run_id, message)
    return True
