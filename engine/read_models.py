"""The engine's read models and request bodies: what the HTTP API answers, the CLI's `--json` prints and
the app reads. One pydantic model per named schema of the OpenAPI document (`engine/api/openapi.json`).

Stored JSON values (inputs, results, state, step data) are `StoredJson`: any JSON value, passed through as
the store holds it (`engine.runtime.queries.shown` has already replaced what no answer could carry).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

StoredJson = Annotated[object, Field(description="any JSON value, as stored")]
RunStatus = Literal["queued", "running", "waiting", "succeeded", "failed", "interrupted", "cancelled"]
MAX_VERSION = (1 << 31) - 1
"""Versions are SQL integers; a larger number names no version."""
MAX_LIST_LIMIT = 500


class ReadModel(BaseModel):
    model_config = ConfigDict(frozen=True)


class InputIssue(ReadModel):
    """One input a `refused_inputs` error names."""

    name: str = Field(description="the input")
    problem: Literal["missing", "wrong_type", "undeclared"] = Field(
        description="required and not sent; sent as another JSON type; not declared by the flow")
    type: str | None = Field(default=None, description="the JSON type the flow declares for it")


def _absent(value: object) -> bool:
    """A field that only some errors carry is left out of the others' answers rather than written as null."""
    return value is None


class ErrorDetail(ReadModel):
    code: str = Field(description="what went wrong, as data (see docs/api.md, Errors)")
    message: str = Field(description="what went wrong and what to do, for a person")
    nodes: list[str] | None = Field(default=None, exclude_if=_absent, description="`upstream_changed`: the "
                                    "differing nodes")
    original_version: int | None = Field(default=None, exclude_if=_absent, description="`upstream_changed`: the "
                                         "version a rerun may use instead")
    inputs: list[InputIssue] | None = Field(default=None, exclude_if=_absent, description="`refused_inputs`: each "
                                           "input refused, as data (absent when the inputs as a whole are too large "
                                           "or too deep)")


class Error(ReadModel):
    """Every 4xx answer (and a 5xx, which is a bug)."""

    error: ErrorDetail


class Step(ReadModel):
    """One step of a run: what it was given and what it produced."""

    step: str
    node: str
    type: str | None = None
    status: str
    attempts: int | None = None
    duration_ms: float | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    ports: StoredJson = None
    given: StoredJson = None
    output: StoredJson = None
    error: StoredJson = None
    error_type: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    reused_from: str | None = Field(default=None, description="a rerun's step taken from this run's record, "
                                    "never executed in the rerun (`rerun_of`); its ports, output and error are "
                                    "the recorded ones")


class RunSummary(ReadModel):
    """A run as lists show it."""

    id: str
    flow_id: str
    version: int
    status: RunStatus
    trigger: str | None = None
    inputs: StoredJson = None
    result: StoredJson = None
    error: StoredJson = None
    error_type: str | None = None
    errors: StoredJson = Field(default=None, description="failures continue_on_fail went past: step -> "
                               "{message, type, attempts}")
    waiting_on: StoredJson = None
    current_node: str | None = None
    cost_micros: int | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    created_at: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    parent_run_id: str | None = None
    child_run_ids: list[str] = Field(default_factory=list)
    rerun_of: str | None = Field(default=None, description="the run this one reruns from `from_node`")
    from_node: str | None = None


class Run(RunSummary):
    """One run with its state container (secrets redacted) and its steps."""

    state: StoredJson = None
    steps: list[Step] = Field(default_factory=list)
    step_counts: dict[str, int] = Field(default_factory=dict)
    cancel_requested: bool = Field(default=False, description="a cancel was asked while a worker held the run: it "
                                   "stops at its next step boundary (a running script within about a second)")


class RunList(ReadModel):
    runs: list[RunSummary]
    next_cursor: str | None = Field(default=None, description="pass as `cursor` for the next page; null on the last")


class WaitingOn(ReadModel):
    node: str | None = None
    reason: str | None = None


class CallbackSecret(ReadModel):
    url: str
    secret: str = Field(description="signs the execution.finished webhook; shown this once")


class StartRun(BaseModel):
    """The body of `POST /api/v1/runs`."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    flow_id: str = Field(min_length=1, max_length=128, description="the id of a published flow")
    inputs: dict[str, object] = Field(default_factory=dict, description="input name -> value")
    idempotency_key: str | None = Field(default=None, min_length=1, max_length=200)
    version: int | None = Field(default=None, ge=1, le=MAX_VERSION, strict=True, description="a published "
                                "version; the newest when left out")
    wait: float = Field(default=10.0, ge=0, strict=True, description="seconds the request may stay open (at most "
                        "60); 0 starts the run asynchronously")
    callback_url: str | None = Field(default=None, pattern=r"^https?://", max_length=2048,
                                     description="where the engine POSTs the run's execution.finished webhook")


class StartedRun(ReadModel):
    """The answer to `POST /api/v1/runs`: the ended run (201, 200 for a duplicate), or where it stands (202)."""

    run_id: str
    status: RunStatus
    duplicate: bool
    waiting_on: StoredJson = None
    retry_after_seconds: int | None = None
    callback: CallbackSecret | None = None
    id: str | None = None
    flow_id: str | None = None
    version: int | None = None
    trigger: str | None = None
    inputs: StoredJson = None
    result: StoredJson = None
    error: StoredJson = None
    error_type: str | None = None
    errors: StoredJson = None
    current_node: str | None = None
    cost_micros: int | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    created_at: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    parent_run_id: str | None = None
    child_run_ids: list[str] | None = None
    state: StoredJson = None
    steps: list[Step] | None = None
    step_counts: dict[str, int] | None = None


class RerunRequest(BaseModel):
    """The body of `POST /api/v1/runs/{id}/rerun`."""

    model_config = ConfigDict(extra="forbid")

    from_node: str = Field(min_length=1, max_length=128, description="the node to execute again, and what follows")
    version: Annotated[int, Field(ge=1, le=MAX_VERSION)] | Literal["original", "current"] = Field(
        default="original", description="the original run's version, the current published one, or a number")
    dry_run: bool = Field(default=False, strict=True, description="answer what the rerun would reuse and repeat, "
                          "start nothing")
    repeat_effects: bool = Field(default=False, strict=True, description="start it even though non-idempotent nodes "
                                 "that already had their effect in the original run execute again "
                                 "(`repeated_effects`); else such a rerun is refused with `repeats_effects`")


class RerunStarted(ReadModel):
    """The answer to a rerun: the new run (absent for a dry run), what it reuses and what it repeats."""

    run_id: str | None = None
    status: RunStatus | None = None
    rerun_of: str
    from_node: str
    flow_id: str
    version: int
    original_version: int
    reused_steps: list[str] = Field(description="steps taken from the original run, never executed again")
    repeated_effects: list[str] = Field(description="non-idempotent nodes at or after `from_node` that already "
                                        "had their effect in the original run: the rerun executes them again")


class CancelledRun(ReadModel):
    run_id: str
    status: str = Field(description="cancelled (queued/waiting), cancelling (running), or the final status")


class ApprovalVote(ReadModel):
    """One approver's accepted decision: who, when, the comment."""

    by: str
    decision: Literal["approve", "reject"]
    comment: str = ""
    at: float = Field(description="epoch seconds")


class Approval(ReadModel):
    """A pending approval."""

    id: str
    flow_id: str
    run_id: str
    node_id: str
    message: str
    requested_at: float = Field(description="epoch seconds")
    expires_at: float = Field(description="epoch seconds")
    required: int = Field(default=1, description="distinct approvers who must approve (1: a v1 approval)")
    approved_count: int = Field(default=0, description="approvals counted so far")
    decisions: list[ApprovalVote] = Field(default_factory=list, description="each approver's accepted decision")
    escalated: bool = Field(default=False, description="escalate_to may decide as well")
    reminders_sent: int = 0
    node_title: str = Field(default="", description="the node's title in the run's published version ('' when it "
                                                  "has none)")


class ApprovalList(ReadModel):
    approvals: list[Approval]


class DecisionRequest(BaseModel):
    """The body of `POST /api/v1/approvals/{id}/decision`."""

    model_config = ConfigDict(extra="forbid")

    decision: Literal["approve", "reject"]
    comment: str | None = Field(default=None, max_length=4000)


class Decision(ReadModel):
    """An accepted decision."""

    accepted: bool
    approval_id: str
    actor: str
    decision: str
    message: str
    reason: str | None = None
    run_id: str | None = None
    port: str | None = Field(default=None, description="approved or rejected: where the run continues (None for "
                             "a vote short of the approval's quorum)")
    approved_count: int | None = Field(default=None, description="approvals counted so far")
    required: int | None = Field(default=None, description="distinct approvers who must approve")


class FlowVersion(ReadModel):
    version: int
    content_hash: str
    published_at: str


class FlowVersions(ReadModel):
    flow_id: str
    versions: list[FlowVersion]


class FlowSummary(ReadModel):
    """A published flow: its newest version and enabled flag."""

    flow_id: str
    name: str
    version: int
    enabled: bool


class FlowList(ReadModel):
    flows: list[FlowSummary]


class Diagnostic(ReadModel):
    code: str
    severity: str
    node: str | None = None
    message: str


class PublishRefusal(ReadModel):
    """`422` from `POST /api/v1/flows`: the diagnostics `lockgate validate --json` gives."""

    error: ErrorDetail
    diagnostics: list[Diagnostic]


class PublishedFlow(ReadModel):
    flow_id: str
    version: int
    content_hash: str
    published_at: str


class Hold(ReadModel):
    """Money reserved for one model call."""

    id: str
    run_id: str
    node_id: str
    budget_name: str
    amount_micros: int
    charged_micros: int | None = None
    state: str
    expires_at: str


class CallbackResumed(ReadModel):
    """`200` from `POST /callbacks/{token}`: the run's `wait.callback` node continues through `received`."""

    run_id: str
    node: str
    status: Literal["resumed"]
    message: str


class WebhookAccepted(ReadModel):
    """`202` for a new delivery, `200` (`duplicate: true`) for a repeated one."""

    run_id: str
    status: str
    duplicate: bool


class TestRecordingRequest(BaseModel):
    """`POST /api/v1/runs/{run_id}/test-recording`: the name of the flow test to record from the run."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$",
                      description="the test's name; its file is `<flow>.<name>.flowtest.json`")
