"""Typed run events: what workers (and the decision services) report, and all the projector reads.

Every event carries `schema_version`, `event_id`, `run_id`, a per-run `seq`, `ts` (epoch seconds)
and `attempt` (the job delivery that produced it, so a reclaimed job's zombie can be fenced).
Build events only through `engine.events.factory`; never assemble the dicts by hand.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

SCHEMA_VERSION: Literal[1] = 1

StepStatus = Literal["running", "completed", "failed", "skipped", "parked", "cancelled"]


class EventBase(BaseModel):
    """Fields every event has."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: Literal[1] = SCHEMA_VERSION
    event_id: str = Field(min_length=1)
    run_id: str = Field(min_length=1)
    seq: int = Field(ge=0, description="the producer's own count of the run's events (a worker's continues from "
                     "the run's checkpoint; events from outside a worker count on from the last applied one); the "
                     "stored, gap-free per-run sequence is numbered by the projector in apply order")
    ts: float
    attempt: int = Field(default=1, ge=0, description="job delivery that produced the event (fencing)")


class RerunSeed(BaseModel):
    """What a rerun starts from: the run it reruns, the node it starts at, and the state container and the
    continued failures folded from the steps it reuses (each reported by its own `step_reused`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    rerun_of: str
    from_node: str
    state: dict[str, Any] = Field(default_factory=dict, description="the reused steps' writes folded in order, "
                                  "redacted")
    errors: dict[str, Any] = Field(default_factory=dict, description="the reused failures continue_on_fail went "
                                   "past: step -> {message, type, attempts}")


class RunStarted(EventBase):
    type: Literal["run_started"] = "run_started"
    flow_id: str
    version: int
    trigger: str
    inputs: dict[str, Any] = Field(description="frozen inputs, secrets redacted as ***")
    worker: str = ""
    rerun: RerunSeed | None = Field(default=None, description="set for a rerun: the run state starts with it")


class StepStarted(EventBase):
    type: Literal["step_started"] = "step_started"
    node: str
    step: str = Field(description="step key: node id, or node id[index] inside a foreach")
    node_type: str
    step_attempt: int = 1
    given: dict[str, Any] = Field(default_factory=dict, description=(
        "what the step was given: its config rendered against the run state at that moment, secrets "
        "redacted, strings over 4096 characters cut with a `… [truncated N of M chars]` marker"))


class StepCompleted(EventBase):
    type: Literal["step_completed"] = "step_completed"
    node: str
    step: str
    ports: list[str] = Field(default_factory=list, description="output ports the step delivered")
    writes: dict[str, Any] = Field(default_factory=dict, description="state keys the step wrote, redacted")
    duration_ms: float = 0.0
    step_attempt: int = 1
    tokens_in: int | None = Field(default=None, ge=0, description="ai.model: the answered call's prompt tokens")
    tokens_out: int | None = Field(default=None, ge=0, description="ai.model: the answered call's completion "
                                   "tokens")
    cost_micros: int | None = Field(default=None, ge=0, description="ai.model without a budget hold: the answered "
                                    "call's cost in micro-dollars (a held call's cost comes with its hold_charged)")


class StepFailed(EventBase):
    type: Literal["step_failed"] = "step_failed"
    node: str
    step: str
    error: str
    error_type: str = "error"
    step_attempt: int = 1
    will_retry: bool = False
    retry_in: float | None = None
    continued: bool = Field(default=False, description="continue_on_fail: the run goes on")
    duration_ms: float = 0.0


class StepReused(EventBase):
    type: Literal["step_reused"] = "step_reused"
    node: str
    step: str
    node_type: str
    reused_from: str = Field(description="the run whose recorded step a rerun takes instead of executing it")
    step_status: Literal["succeeded", "failed"] = Field(description="failed: it failed past continue_on_fail")
    ports: list[str] | None = Field(default=None, description="output ports it delivered (None: failed)")
    writes: dict[str, Any] = Field(default_factory=dict, description="state keys it wrote, redacted")
    error: str | None = None
    error_type: str | None = None


class StepSkipped(EventBase):
    type: Literal["step_skipped"] = "step_skipped"
    node: str
    step: str
    reason: str = "dead_path"


class WaitingOn(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    node: str
    reason: str
    due_at: float | None = None
    attempt: int | None = None
    """`retry_backoff` only: the attempt that runs at `due_at`."""
    child_run_id: str | None = None
    """`child_run` only: the run the `flow.call` step waits for."""

    def record(self) -> dict[str, Any]:
        """What the run row keeps: node, reason and due time, and the attempt and child run when there are."""
        unset = {name for name in ("attempt", "child_run_id") if getattr(self, name) is None}
        return self.model_dump(exclude=unset or None)


class RunParked(EventBase):
    type: Literal["run_parked"] = "run_parked"
    waiting_on: WaitingOn


class RunResumed(EventBase):
    type: Literal["run_resumed"] = "run_resumed"
    node: str
    worker: str = ""


class RunSucceeded(EventBase):
    type: Literal["run_succeeded"] = "run_succeeded"
    result: Any = None


class RunFailed(EventBase):
    type: Literal["run_failed"] = "run_failed"
    error: str
    error_type: str = "step_failed"
    node: str | None = None


class RunCancelled(EventBase):
    type: Literal["run_cancelled"] = "run_cancelled"
    reason: str = "cancelled by request"
    node: str | None = Field(default=None, description="the step boundary where a running run stopped")


class RunInterrupted(EventBase):
    type: Literal["run_interrupted"] = "run_interrupted"
    reason: str


class ApprovalRequested(EventBase):
    type: Literal["approval_requested"] = "approval_requested"
    node: str
    approval_id: str
    approvers: list[str] | Literal["any"] = "any"
    message: str = ""
    timeout_at: float
    required: int = Field(default=1, ge=1, description="approvals v2: distinct approvers who must approve")
    forbid_self: bool = Field(default=False, description="the run's starter may not decide")
    remind_every: float | None = Field(default=None, gt=0, description="seconds between reminders while undecided")
    escalate_at: float | None = Field(default=None, description="when `escalate_to` may decide as well")
    escalate_to: list[str] | Literal["any"] | None = None
    notify_url: str = Field(default="", description="rendered URL the signed notices go to (empty: none)")


class ApprovalReminded(EventBase):
    type: Literal["approval_reminded"] = "approval_reminded"
    node: str
    approval_id: str
    reminder: int = Field(ge=1, description="1 for the first reminder, 2 for the next, ...")


class ApprovalEscalated(EventBase):
    type: Literal["approval_escalated"] = "approval_escalated"
    node: str
    approval_id: str
    escalate_to: list[str] | Literal["any"]


class ApprovalDecided(EventBase):
    type: Literal["approval_decided"] = "approval_decided"
    node: str
    approval_id: str
    decision: Literal["approved", "rejected"]
    decided_by: str
    comment: str = ""


class HoldPlaced(EventBase):
    type: Literal["hold_placed"] = "hold_placed"
    node: str
    hold_id: str
    budget: str
    amount: float = Field(ge=0)
    expires_at: float


class HoldCharged(EventBase):
    type: Literal["hold_charged"] = "hold_charged"
    node: str
    hold_id: str
    amount: float = Field(ge=0, description="the real cost charged against the hold")
    budget: str = Field(default="", description="the hold's budget")
    late: bool = Field(default=False, description="charged after the hold was released (background call past "
                       "hold_ttl): spent grows, the hold stays released")


class HoldReleased(EventBase):
    type: Literal["hold_released"] = "hold_released"
    node: str
    hold_id: str
    amount: float = Field(ge=0, description="the amount returned to the budget")
    reason: str = ""
    budget: str = Field(default="", description="the hold's budget")


EVENT_MODELS: tuple[type[EventBase], ...] = (
    RunStarted,
    StepStarted,
    StepCompleted,
    StepFailed,
    StepReused,
    StepSkipped,
    RunParked,
    RunResumed,
    RunSucceeded,
    RunFailed,
    RunCancelled,
    RunInterrupted,
    ApprovalRequested,
    ApprovalDecided,
    ApprovalReminded,
    ApprovalEscalated,
    HoldPlaced,
    HoldCharged,
    HoldReleased,
)

Event = Annotated[
    RunStarted
    | StepStarted
    | StepCompleted
    | StepFailed
    | StepReused
    | StepSkipped
    | RunParked
    | RunResumed
    | RunSucceeded
    | RunFailed
    | RunCancelled
    | RunInterrupted
    | ApprovalRequested
    | ApprovalDecided
    | ApprovalReminded
    | ApprovalEscalated
    | HoldPlaced
    | HoldCharged
    | HoldReleased,
    Field(discriminator="type"),
]

EVENT_ADAPTER: TypeAdapter[Event] = TypeAdapter(Event)

EVENT_TYPE_NAMES: tuple[str, ...] = tuple(model.model_fields["type"].default for model in EVENT_MODELS)
