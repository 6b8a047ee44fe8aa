"""Factory functions: the only way events are made. They stamp id, sequence, time and attempt."""

from __future__ import annotations

import threading
from typing import Any

from engine.clock import Clock
from engine.events.models import (
    ApprovalDecided,
    ApprovalEscalated,
    ApprovalReminded,
    ApprovalRequested,
    HoldCharged,
    HoldPlaced,
    HoldReleased,
    RerunSeed,
    RunCancelled,
    RunFailed,
    RunInterrupted,
    RunParked,
    RunResumed,
    RunStarted,
    RunSucceeded,
    StepCompleted,
    StepFailed,
    StepReused,
    StepSkipped,
    StepStarted,
    WaitingOn,
)
from engine.ids import time_ordered_id


def new_event_id() -> str:
    """A new event's id: time-ordered (`engine.ids`), so the projector's inserts of applied event ids stay local."""
    return time_ordered_id()


class EventStamper:
    """Stamps one run's events: a thread-safe per-run sequence, the clock and the job attempt."""

    def __init__(self, run_id: str, clock: Clock, *, attempt: int = 1, last_seq: int = 0) -> None:
        self.run_id = run_id
        self.clock = clock
        self.attempt = attempt
        self._seq = last_seq
        self._lock = threading.Lock()

    @property
    def last_seq(self) -> int:
        return self._seq

    def stamp(self) -> dict[str, Any]:
        with self._lock:
            self._seq += 1
            seq = self._seq
        return {"event_id": new_event_id(), "run_id": self.run_id, "seq": seq, "ts": self.clock.now(),
                "attempt": self.attempt}

    # --- run lifecycle ------------------------------------------------------------------

    def run_started(self, flow_id: str, version: int, trigger: str, inputs: dict[str, Any],
                    worker: str = "", rerun: RerunSeed | None = None) -> RunStarted:
        return RunStarted(**self.stamp(), flow_id=flow_id, version=version, trigger=trigger, inputs=inputs,
                          worker=worker, rerun=rerun)

    def run_parked(self, node: str, reason: str, due_at: float | None, attempt: int | None = None,
                   child_run_id: str | None = None) -> RunParked:
        return RunParked(**self.stamp(), waiting_on=WaitingOn(node=node, reason=reason, due_at=due_at,
                                                              attempt=attempt, child_run_id=child_run_id))

    def run_resumed(self, node: str, worker: str = "") -> RunResumed:
        return RunResumed(**self.stamp(), node=node, worker=worker)

    def run_succeeded(self, result: Any) -> RunSucceeded:
        return RunSucceeded(**self.stamp(), result=result)

    def run_failed(self, error: str, error_type: str = "step_failed", node: str | None = None) -> RunFailed:
        return RunFailed(**self.stamp(), error=error, error_type=error_type, node=node)

    def run_cancelled(self, reason: str = "cancelled by request", node: str | None = None) -> RunCancelled:
        return RunCancelled(**self.stamp(), reason=reason, node=node)

    def run_interrupted(self, reason: str) -> RunInterrupted:
        return RunInterrupted(**self.stamp(), reason=reason)

    # --- steps --------------------------------------------------------------------------

    def step_started(self, node: str, step: str, node_type: str, step_attempt: int = 1,
                     given: dict[str, Any] | None = None) -> StepStarted:
        return StepStarted(**self.stamp(), node=node, step=step, node_type=node_type, step_attempt=step_attempt,
                           given=given or {})

    def step_completed(self, node: str, step: str, ports: list[str], writes: dict[str, Any],
                       duration_ms: float, step_attempt: int = 1, *, tokens_in: int | None = None,
                       tokens_out: int | None = None, cost_micros: int | None = None) -> StepCompleted:
        return StepCompleted(**self.stamp(), node=node, step=step, ports=ports, writes=writes,
                             duration_ms=duration_ms, step_attempt=step_attempt, tokens_in=tokens_in,
                             tokens_out=tokens_out, cost_micros=cost_micros)

    def step_failed(self, node: str, step: str, error: str, *, error_type: str = "error", step_attempt: int = 1,
                    will_retry: bool = False, retry_in: float | None = None, continued: bool = False,
                    duration_ms: float = 0.0) -> StepFailed:
        return StepFailed(**self.stamp(), node=node, step=step, error=error, error_type=error_type,
                          step_attempt=step_attempt, will_retry=will_retry, retry_in=retry_in, continued=continued,
                          duration_ms=duration_ms)

    def step_reused(self, node: str, step: str, node_type: str, reused_from: str, ports: list[str] | None,
                    writes: dict[str, Any], *, error: str | None = None,
                    error_type: str | None = None) -> StepReused:
        """A step a rerun takes from `reused_from`'s record; `ports` None for one that failed past
        continue_on_fail."""
        return StepReused(**self.stamp(), node=node, step=step, node_type=node_type, reused_from=reused_from,
                          step_status="succeeded" if ports is not None else "failed", ports=ports, writes=writes,
                          error=error, error_type=error_type)

    def step_skipped(self, node: str, step: str, reason: str = "dead_path") -> StepSkipped:
        return StepSkipped(**self.stamp(), node=node, step=step, reason=reason)

    # --- approvals and money (issues 4 and 5 emit these) ---------------------------------

    def approval_requested(self, node: str, approval_id: str, timeout_at: float,
                           approvers: list[str] | str = "any", message: str = "",
                           **v2: Any) -> ApprovalRequested:
        """`v2`: the approvals v2 fields (required, forbid_self, remind_every, escalate_at, escalate_to,
        notify_url); a v1 approval gives none."""
        return ApprovalRequested(**self.stamp(), node=node, approval_id=approval_id, timeout_at=timeout_at,
                                 approvers=approvers, message=message, **v2)

    def approval_reminded(self, node: str, approval_id: str, reminder: int) -> ApprovalReminded:
        return ApprovalReminded(**self.stamp(), node=node, approval_id=approval_id, reminder=reminder)

    def approval_escalated(self, node: str, approval_id: str,
                           escalate_to: list[str] | str) -> ApprovalEscalated:
        return ApprovalEscalated(**self.stamp(), node=node, approval_id=approval_id, escalate_to=escalate_to)

    def approval_decided(self, node: str, approval_id: str, decision: str, decided_by: str,
                         comment: str = "") -> ApprovalDecided:
        return ApprovalDecided(**self.stamp(), node=node, approval_id=approval_id, decision=decision,
                               decided_by=decided_by, comment=comment)

    def hold_placed(self, node: str, hold_id: str, budget: str, amount: float, expires_at: float) -> HoldPlaced:
        return HoldPlaced(**self.stamp(), node=node, hold_id=hold_id, budget=budget, amount=amount,
                          expires_at=expires_at)

    def hold_charged(self, node: str, hold_id: str, amount: float, budget: str = "",
                     late: bool = False) -> HoldCharged:
        return HoldCharged(**self.stamp(), node=node, hold_id=hold_id, amount=amount, budget=budget, late=late)

    def hold_released(self, node: str, hold_id: str, amount: float, reason: str = "",
                      budget: str = "") -> HoldReleased:
        return HoldReleased(**self.stamp(), node=node, hold_id=hold_id, amount=amount, reason=reason,
                            budget=budget)


class ExternalStamper(EventStamper):
    """Stamps events from outside a worker (cancel API, decisions): attempt 0, and the sequence after
    `last_seq` (the run's last applied sequence), so live views order them after what came before."""

    def __init__(self, run_id: str, clock: Clock, last_seq: int = 0) -> None:
        super().__init__(run_id, clock, attempt=0, last_seq=last_seq)
