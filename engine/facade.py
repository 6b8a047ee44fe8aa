"""`EngineApi`: the engine's one typed front door over started `EngineServices`.

The HTTP layer (`engine.api.app`), the CLI and the app's bridge call these methods, and they answer the read
models of `engine.read_models`. Every call blocks (SQL, Redis); async callers run them off their event loop.
"""

from __future__ import annotations

import base64
import binascii
from datetime import datetime
from typing import TYPE_CHECKING

import orjson

from engine.api.run_watch import RunWatch
from engine.api.runs import start_run
from engine.approvals.decide import DecisionResult, decide, decide_with_key
from engine.approvals.keys import KeyCheck, check_key
from engine.approvals.pending import list_pending
from engine.flow import Flow
from engine.parking.callback_resume import CallbackOutcome, resume_callback
from engine.publish import get_version, list_versions
from engine.read_models import (
    Approval,
    ApprovalList,
    CancelledRun,
    Decision,
    FlowList,
    FlowSummary,
    FlowVersion,
    FlowVersions,
    Hold,
    PublishedFlow,
    Run,
    RunList,
    RunStatus,
    RunSummary,
    StartedRun,
    StartRun,
)
from engine.store import reads
from engine.triggers.webhooks import WebhookAnswer, handle_webhook

if TYPE_CHECKING:
    import sqlalchemy as sa

    from engine.runtime.handles import EngineHandles
    from engine.runtime.services import EngineServices

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


class EngineApi:
    """Typed calls on one process's started engine."""

    def __init__(self, services: EngineServices, watch: RunWatch | None = None) -> None:
        self.services = services
        self.watch = watch or RunWatch()
        """Wakes a waiting `start_run` when this process's projector applies a change to its run."""

    @property
    def _handles(self) -> EngineHandles:
        return self.services._api()

    @property
    def _sql(self) -> sa.Engine:
        return self._handles.sql

    # --- runs -------------------------------------------------------------------------------------

    def start_run(self, body: StartRun, started_by: str | None = None) -> tuple[int, StartedRun]:
        """Start a run and wait up to `body.wait` seconds for it (see `engine.api.runs`): (HTTP status, answer).
        `started_by`: who asks (`key:<name>`), recorded for approvals' `forbid_self`."""
        status, answer = start_run(self.services, body.model_dump(exclude_unset=True), self.watch, started_by)
        return status, StartedRun.model_validate(answer)

    def get_run(self, run_id: str) -> Run | None:
        found = self.services.get_run(run_id)
        return Run.model_validate(found) if found is not None else None

    def list_runs(self, *, status: RunStatus | None = None, flow_id: str | None = None,
                  limit: int = DEFAULT_LIST_LIMIT, cursor: str | None = None) -> RunList:
        """Newest first; `next_cursor` continues past the last run of a full page (BadCursor for a bad one)."""
        after = decode_cursor(cursor) if cursor else None
        rows = self.services.list_runs(status=status, flow_id=flow_id, limit=limit, after=after)
        runs = [RunSummary.model_validate(row) for row in rows]
        return RunList(runs=runs, next_cursor=encode_cursor(runs[-1]) if len(runs) == limit and runs else None)

    def cancel_run(self, run_id: str, reason: str = "cancelled by request") -> CancelledRun:
        """LookupError for an unknown run."""
        return CancelledRun(run_id=run_id, status=self.services.cancel_run(run_id, reason))

    # --- flows ------------------------------------------------------------------------------------

    def publish(self, flow: Flow) -> PublishedFlow:
        """Validate and store the flow's next version (`engine.publish.PublishRefused` on validation errors)."""
        published = self.services.publish_flow(flow)
        return PublishedFlow(flow_id=published.flow_id, version=published.version,
                             content_hash=published.content_hash, published_at=published.published_at.isoformat())

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

    def check_key(self, key: str) -> KeyCheck:
        return check_key(self._sql, key)

    # --- money ------------------------------------------------------------------------------------

    def holds(self, limit: int) -> list[Hold]:
        rows = reads.list_holds(self._sql, limit)
        return [Hold(**{**row, "expires_at": row["expires_at"].isoformat()}) for row in rows]

    # --- webhooks ---------------------------------------------------------------------------------

    def resume_callback(self, token: str, body: bytes) -> CallbackOutcome:
        """`POST /callbacks/{token}`: the first call resumes the run's `wait.callback` node."""
        return resume_callback(self._handles, token, body)

    def webhook(self, token: str, headers: dict[str, str], body: bytes) -> WebhookAnswer:
        return handle_webhook(self._handles, self.services.create_run, token, headers, body,
                              self.services.latest_versions)
