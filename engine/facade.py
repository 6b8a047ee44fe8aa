"""`EngineApi`: the engine's one typed front door over started `EngineServices`.

The HTTP layer (`engine.api.app`), the CLI and the app's bridge call these methods, and they answer the read
models of `engine.read_models`. Every call blocks (SQL, Redis); async callers run them off their event loop.
"""

from __future__ import annotations

import base64
import binascii
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import orjson

from engine.api.run_watch import RunWatch, Wakeable
from engine.api.runs import StartWait, begin_start, start_run, started_json
from engine.approvals.decide import DecisionResult, decide, decide_with_key
from engine.approvals.keys import ALL_SCOPES, KeyCheck, KeyInfo, check_key, create_key, list_keys, revoke_key
from engine.approvals.pending import list_pending
from engine.flow import Flow, FlowLoadError, flow_from_data, parse_document
from engine.flowtest.model import FlowTest
from engine.flowtest.record import record_test
from engine.money.ledger import BudgetLedger, BudgetState
from engine.parking.callback_resume import CallbackOutcome, resume_callback
from engine.publish import PublishRefused, get_version, list_versions
from engine.read_models import (
    Approval,
    ApprovalList,
    CancelledRun,
    Decision,
    Diagnostic,
    ErrorDetail,
    FlowList,
    FlowSummary,
    FlowVersion,
    FlowVersions,
    Hold,
    PublishedFlow,
    PublishRefusal,
    RerunRequest,
    RerunStarted,
    Run,
    RunList,
    RunStatus,
    RunSummary,
    StartedRun,
    StartRun,
)
from engine.runtime import queries
from engine.runtime.transitions import TERMINAL
from engine.store import reads
from engine.triggers.settings import TriggerSetting, set_enabled
from engine.triggers.status import TriggerStatus, read_trigger_status
from engine.triggers.webhooks import WebhookAnswer, handle_webhook

if TYPE_CHECKING:
    import sqlalchemy as sa

    from engine.parts import RunningEngine
    from engine.runtime.create import CreatedRun
    from engine.runtime.handles import EngineHandles
    from engine.runtime.rerun import RerunPlan

DEFAULT_LIST_LIMIT = 50


class BadCursor(ValueError):
    """A `cursor` this engine did not hand out."""


def encode_cursor(run: RunSummary) -> str:
    return base64.urlsafe_b64encode(orjson.dumps([run.created_at, run.id])).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    try:
        created, run_id = orjson.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        if not isinstance(created, str) or not isinstance(run_id, str):
            raise ValueError(cursor)
        return datetime.fromisoformat(created), run_id
    except (ValueError, TypeError, binascii.Error, orjson.JSONDecodeError):
        raise BadCursor(f'"{cursor[:40]}" is not a cursor of this run list; pass the next_cursor an answer '
                        "gave") from None


def decision_of(result: DecisionResult) -> Decision:
    return Decision(accepted=result.accepted, approval_id=result.approval_id, actor=result.actor,
                    decision=result.decision, message=result.message, reason=result.reason, run_id=result.run_id,
                    port=result.port, approved_count=result.approved_count, required=result.required)


def rerun_answer_of(plan: RerunPlan, created: CreatedRun | None = None) -> RerunStarted:
    """A rerun's plan (and the run it started, unless a dry run) as its read model."""
    return RerunStarted.model_validate({
        "run_id": created.run_id if created else None, "status": created.status if created else None,
        "rerun_of": plan.run_id, "from_node": plan.from_node, "flow_id": plan.flow_id, "version": plan.version,
        "original_version": plan.original_version, "reused_steps": [step.node for step in plan.reused],
        "repeated_effects": list(plan.repeated_effects)})


@dataclass(frozen=True)
class StartAnswer:
    """The answer to a start as the API sends it."""

    status: int
    """201 ended, 200 ended and started before under the same idempotency key, 202 parked or still going."""
    json: bytes
    """A `StartedRun`, as JSON."""
    retry_after_seconds: int | None
    """A 202's advice on when to ask again."""


def _start_answer(status: int, answer: dict[str, Any]) -> StartAnswer:
    retry_after = answer.get("retry_after_seconds") if status == 202 else None
    return StartAnswer(status, started_json(answer), retry_after)


class PendingStart:
    """A started run's wait for its answer (`EngineApi.begin_start`), a step at a time: wait up to `timeout()`
    seconds for the `woken` given to `begin_start` (None: not at all), clear it, then `read()`; again until
    `read()` answers. `close()` at the end, however it ends."""

    def __init__(self, wait: StartWait) -> None:
        self._wait = wait

    @property
    def run_id(self) -> str:
        return self._wait.run_id

    def timeout(self) -> float | None:
        return self._wait.timeout()

    def read(self, woken: bool) -> StartAnswer | None:
        """The answer once the run has ended or parked or the wait has run out (None: wait again); `woken`:
        whether the last wait ended on a change. Blocks on the store."""
        read = self._wait.read(woken)
        return None if read is None else _start_answer(*read)

    def close(self) -> None:
        """Stop watching the run (quick: safe on an event loop)."""
        self._wait.close()


CANCELLABLE_HELD = frozenset({"queued", "running"})
"""Statuses in which a cancel can wait for the worker that holds the run (a waiting run is cancelled at once)."""


class EngineApi:
    """Typed calls on one process's started engine."""

    def __init__(self, services: RunningEngine, watch: RunWatch | None = None) -> None:
        self.services = services
        self.watch = watch or RunWatch()
        """Wakes a waiting `start_run` or `follow_run` when a change to its run is applied."""

    @classmethod
    def on_live_channel(cls, services: RunningEngine) -> EngineApi:
        """A facade whose waits wake on the projector's live channel, whichever process projects (`close()` it)."""
        api = cls(services)
        api.watch = RunWatch(api._handles.client, services.keys.live_batches)
        return api

    def close(self) -> None:
        """Stop listening to the live channel."""
        self.watch.close()

    @property
    def _handles(self) -> EngineHandles:
        return self.services.require_handles()

    @property
    def _sql(self) -> sa.Engine:
        return self._handles.sql

    # --- runs -------------------------------------------------------------------------------------

    def start_run(self, body: StartRun, started_by: str | None = None) -> StartAnswer:
        """Start a run and wait up to `body.wait` seconds for it on this thread (see `engine.api.runs`).
        `started_by`: who asks (`key:<name>`), recorded for approvals' `forbid_self`."""
        return _start_answer(*start_run(self.services, body.model_dump(exclude_unset=True), self.watch, started_by))

    def begin_start(self, body: StartRun, woken: Wakeable, started_by: str | None = None) -> PendingStart:
        """Start a run and watch it, `woken` set on its changes, for a caller that waits elsewhere (a request on
        an event loop holds no thread while its run goes). ApiError when the start is refused."""
        return PendingStart(begin_start(self.services, body.model_dump(exclude_unset=True), self.watch, woken,
                                        started_by))

    def get_run(self, run_id: str) -> Run | None:
        found = queries.get_run(self._sql, run_id)
        if found is None:
            return None
        run = Run.model_validate(found)
        if self.cancel_requested(run_id, run.status):
            return run.model_copy(update={"cancel_requested": True})
        return run

    def cancel_requested(self, run_id: str, status: str) -> bool:
        """Whether a cancel of the run, in `status`, waits for the worker holding it (`Run.cancel_requested`)."""
        return status in CANCELLABLE_HELD and bool(self._handles.client.exists(self._handles.keys.run_cancel(run_id)))

    def list_runs(self, *, status: RunStatus | None = None, flow_id: str | None = None,
                  limit: int = DEFAULT_LIST_LIMIT, cursor: str | None = None) -> RunList:
        """Newest first; `next_cursor` continues past the last run of a full page (BadCursor for a bad one)."""
        after = decode_cursor(cursor) if cursor else None
        rows = queries.list_runs(self._sql, status=status, flow_id=flow_id, limit=limit, after=after)
        runs = [RunSummary.model_validate(row) for row in rows]
        return RunList(runs=runs, next_cursor=encode_cursor(runs[-1]) if len(runs) == limit and runs else None)

    def follow_run(self, run_id: str) -> Iterator[Run]:
        """The run now, then again after each applied change to it, until (and including) it ends; LookupError
        for an unknown run. Woken by the live channel (`on_live_channel`), so it reads the store only on a change."""
        return self._changes(run_id, TERMINAL, None)

    def wait_for_run(self, run_id: str, *, statuses: frozenset[str] = TERMINAL, timeout: float | None = None,
                     on_change: Callable[[Run], None] | None = None) -> Run:
        """The run once it reaches one of `statuses`; `on_change` sees each distinct state on the way. LookupError
        for an unknown run, TimeoutError when `timeout` seconds pass first. Wakes on applied changes when the
        facade's watch hears them (`on_live_channel`, or the host's batch listener), else polls."""
        run: Run | None = None
        for run in self._changes(run_id, statuses, timeout, every_change=on_change is not None):
            if on_change is not None:
                on_change(run)
        assert run is not None  # _changes yields at least the run as it is now
        return run

    def _changes(self, run_id: str, statuses: frozenset[str], timeout: float | None, *,
                 every_change: bool = True) -> Iterator[Run]:
        """Each distinct state of the run, woken by the watch, until (and including) one in `statuses`
        (`every_change` False: woken only by a change into one of `statuses`, so the states between are skipped)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        last: Run | None = None
        with self.watch.watching(run_id, None if every_change else statuses) as changed:
            while True:
                changed.clear()
                run = self.get_run(run_id)
                if run is None:
                    raise LookupError(f'run "{run_id}" does not exist')
                if run != last:
                    last = run
                    yield run
                if run.status in statuses:
                    return
                wait = self.watch.poll_seconds
                if deadline is not None:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise TimeoutError(f'run "{run_id}" is still {run.status} after {timeout:g}s')
                    wait = left if wait is None else min(wait, left)
                changed.wait(wait)

    def record_test(self, run_id: str, name: str) -> FlowTest:
        """The flow test of a finished run (`engine.flowtest.record.RecordRefused`: unknown, unfinished, bad name);
        its `wait.callback` resume URLs written as the fixed URLs replay's `callback_url()` gives."""
        return record_test(self._sql, run_id, name, box=self._handles.box)

    def create_run(self, flow_id: str, inputs: dict[str, object], *, started_by: str | None = None) -> StartedRun:
        """Queue a run of the flow's latest published version and return at once (`RunRefused`, `InputError`,
        `UnknownFlowVersion` when it cannot start). `started_by`: who asks, for approvals' `forbid_self`."""
        created = self.services.create_run(flow_id, dict(inputs), started_by=started_by)
        return StartedRun.model_validate({"run_id": created.run_id, "status": created.status,
                                          "duplicate": created.duplicate, "flow_id": created.flow_id,
                                          "version": created.version})

    def cancel_run(self, run_id: str, reason: str = "cancelled by request") -> CancelledRun:
        """LookupError for an unknown run."""
        return CancelledRun(run_id=run_id, status=self.services.cancel_run(run_id, reason))

    def rerun(self, run_id: str, body: RerunRequest) -> RerunStarted:
        """Rerun a finished run from `body.from_node` (`engine.runtime.rerun`); raises its RerunRefused, or the
        refusals of any run start (budget, inputs). `dry_run`: what it would reuse and repeat, started nothing.
        Unless `repeat_effects`, a rerun that would repeat a non-idempotent node's effect is refused
        (`repeats_effects`, naming the nodes)."""
        if body.dry_run:
            return rerun_answer_of(self.services.plan_rerun(run_id, body.from_node, body.version))
        created, plan = self.services.rerun_run(run_id, body.from_node, body.version,
                                                repeat_effects=body.repeat_effects)
        return rerun_answer_of(plan, created)

    # --- flows ------------------------------------------------------------------------------------

    def publish(self, flow: Flow) -> PublishedFlow:
        """Validate and store the flow's next version (`engine.publish.PublishRefused` on validation errors)."""
        return self._publish(flow)[0]

    def _publish(self, flow: Flow) -> tuple[PublishedFlow, bool]:
        """The published version, and whether this call stored it (False: the same content as the latest version,
        which is answered again)."""
        published = self.services.publish_flow(flow)
        answer = PublishedFlow(flow_id=published.flow_id, version=published.version,
                               content_hash=published.content_hash, published_at=published.published_at.isoformat())
        return answer, published.created

    def publish_document(self, document: bytes) -> PublishedFlow | PublishRefusal:
        """`POST /api/v1/flows`: a flow file's bytes published as its next version, or why they were not."""
        return self.publish_answer(document)[1]

    def publish_answer(self, document: bytes) -> tuple[int, PublishedFlow | PublishRefusal]:
        """`publish_document` with its HTTP status: 201 a new version stored, 200 the same content as the latest
        version (nothing stored; that version answered again), 422 refused."""
        try:
            flow = flow_from_data(parse_document(document))
        except FlowLoadError as exc:
            return 422, PublishRefusal(error=ErrorDetail(code="bad_document", message=str(exc)), diagnostics=[
                Diagnostic(code="invalid_document", severity="error", message=f"{path}: {message}")
                for path, message in exc.problems])
        try:
            published, created = self._publish(flow)
        except PublishRefused as exc:
            return 422, PublishRefusal(error=ErrorDetail(code="publish_refused", message=str(exc)), diagnostics=[
                Diagnostic(code=d.code, severity=d.severity, node=d.node, message=d.message)
                for d in exc.diagnostics])
        return (201 if created else 200), published

    def list_flows(self) -> FlowList:
        return FlowList(flows=[FlowSummary(flow_id=row["id"], name=row["name"] or "", version=row["latest_version"],
                                           enabled=bool(row["enabled"])) for row in reads.list_flows(self._sql)])

    def flow_ids(self) -> set[str]:
        return reads.flow_ids(self._sql)

    def flow_versions(self, flow_id: str) -> FlowVersions | None:
        versions = list_versions(self._sql, flow_id)
        if not versions:
            return None
        return FlowVersions(flow_id=flow_id, versions=[
            FlowVersion(version=v.version, content_hash=v.content_hash, published_at=v.published_at.isoformat())
            for v in versions])

    def flow(self, flow_id: str, version: int | None = None) -> tuple[PublishedFlow, Flow]:
        """One published version and its flow (`engine.publish.UnknownFlowVersion` when there is none)."""
        published, flow = get_version(self._sql, flow_id, version)
        return PublishedFlow(flow_id=published.flow_id, version=published.version,
                             content_hash=published.content_hash,
                             published_at=published.published_at.isoformat()), flow

    # --- approvals --------------------------------------------------------------------------------

    def pending_approvals(self) -> ApprovalList:
        return ApprovalList(approvals=[Approval(**item.to_data()) for item in list_pending(self._handles)])

    def decide(self, approval_id: str, decision: str, *, actor: str, comment: str | None = None) -> Decision:
        """Decide as a person or another named actor; a refusal is a `Decision` with `accepted` false."""
        return decision_of(decide(self._handles, approval_id, decision, actor, comment))

    def decide_with_key(self, approval_id: str, decision: str, key: str, comment: str | None = None) -> Decision:
        return decision_of(decide_with_key(self._handles, approval_id, decision, key, comment))

    def check_key(self, key: str, scope: str) -> KeyCheck:
        """Who holds `key`, if it is valid and has the right `scope` (`engine.approvals.keys.RIGHTS`)."""
        return check_key(self._sql, key, scope)

    def approval_keys(self) -> list[KeyInfo]:
        """Every API key by name with its rights, revoked ones included (never the key or its hash)."""
        return list_keys(self._sql)

    def create_approval_key(self, name: str, scopes: tuple[str, ...] = ALL_SCOPES) -> str:
        """A new API key named `name` with `scopes` (every right by default): the only time it exists in full
        (`KeyProblem` when it cannot)."""
        return create_key(self._sql, name, self._handles.clock, scopes)

    def revoke_approval_key(self, name: str) -> None:
        revoke_key(self._sql, name, self._handles.clock)

    # --- money ------------------------------------------------------------------------------------

    def budgets(self) -> list[BudgetState]:
        """Every budget of the ledger as of now."""
        return self._ledger().budgets()

    def set_budget(self, name: str, limit_usd: float, period: str | None = None) -> BudgetState:
        """Create or change a budget's limit and period (what is spent and held is kept); `period` None keeps an
        existing budget's (a new one's is a month)."""
        return self._ledger().set_budget(name, limit_usd, period)

    def _ledger(self) -> BudgetLedger:
        handles = self._handles
        return BudgetLedger(handles.client, handles.keys, handles.clock)

    def holds(self, limit: int) -> list[Hold]:
        rows = reads.list_holds(self._sql, limit)
        return [Hold(**{**row, "expires_at": row["expires_at"].isoformat()}) for row in rows]

    # --- triggers ---------------------------------------------------------------------------------

    def trigger_status(self, flow_id: str) -> TriggerStatus:
        """The triggers of the flow's latest published version: settings, counters, runs started."""
        return read_trigger_status(self._handles, flow_id)

    def set_trigger_enabled(self, flow_id: str, node_id: str, trigger_type: str,
                            enabled: bool) -> list[TriggerSetting]:
        """Enable or disable one webhook/schedule trigger of the latest published version (a webhook gets its
        token on first enable)."""
        handles = self._handles
        _published, flow = get_version(handles.sql, flow_id)
        return set_enabled(handles.client, handles.keys, flow, trigger_type, enabled, handles.clock.now(),
                           node_id=node_id)

    # --- webhooks ---------------------------------------------------------------------------------

    def resume_callback(self, token: str, body: bytes) -> CallbackOutcome:
        """`POST /callbacks/{token}`: the first call resumes the run's `wait.callback` node."""
        return resume_callback(self._handles, token, body)

    def webhook(self, token: str, headers: dict[str, str], body: bytes) -> WebhookAnswer:
        return handle_webhook(self._handles, self.services.create_run, token, headers, body,
                              self.services.latest_versions)
