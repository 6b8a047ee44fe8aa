"""Decisions on approvals, from people (`actor="user:<name>"`) and API keys (`actor="key:<name>"`).

`decide()` is the engine's Python API (the HTTP API and the app's panel call it). Exactly one
decision wins: a vote is counted by one Redis script (`claims.cast_vote`); for a v1 approval the first
vote decides, for a quorum (`required: N`) the first rejection or the N-th distinct approval does. Every
attempt, accepted or refused, is recorded in `approval_attempts` with who made it and its comment. A
refused attempt changes nothing else. The deciding vote's run gets its resume job at once (a token names
the park, so the due waker's later timer job for the same park is dropped); a vote short of the quorum
leaves the run parked.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, cast

import orjson
import sqlalchemy as sa

from engine.approvals.claims import Claim, cast_vote, read_claim
from engine.approvals.keys import DECIDE_SCOPE, check_key
from engine.durations import parse_duration
from engine.events import ExternalStamper, encode_event
from engine.parking.limits import park_token
from engine.publish import get_version
from engine.runtime.emitter import EVENT_FIELD
from engine.runtime.handles import EngineHandles
from engine.runtime.jobs import encode_job, resume_job
from engine.runtime.write_lock import sqlite_writer
from engine.store.db import reading
from engine.store.models import Approval, ApprovalAttempt, Run
from engine.store.types import utc_from_epoch

APPROVALS = cast(sa.Table, Approval.__table__)
ATTEMPTS = cast(sa.Table, ApprovalAttempt.__table__)
RUNS = cast(sa.Table, Run.__table__)
CHECKPOINT_WAIT_SECONDS = 2.0
"""How long a decision waits for a run that requested approval to finish sealing its park."""

_APPROVAL_WITH_RUN = (
    sa.select(APPROVALS.c.run_id, APPROVALS.c.flow_id, APPROVALS.c.node_id, APPROVALS.c.status,
              APPROVALS.c.expires_at, APPROVALS.c.decided_by, APPROVALS.c.requested_at, APPROVALS.c.required,
              APPROVALS.c.settings, RUNS.c.status.label("run_status"), RUNS.c.version, RUNS.c.last_seq,
              RUNS.c.started_by)
    .join(RUNS, RUNS.c.id == APPROVALS.c.run_id))

DecisionWord = Literal["approve", "reject"]
RefusalReason = Literal["bad_decision", "unknown_approval", "already_decided", "expired", "not_allowed",
                        "run_not_waiting", "malformed_key", "unknown_key", "revoked_key", "key_without_rights",
                        "already_voted", "self_decision"]


@dataclass(frozen=True)
class DecisionResult:
    """What became of one decision attempt."""

    accepted: bool
    approval_id: str
    actor: str
    decision: str
    message: str
    reason: RefusalReason | None = None
    run_id: str | None = None
    port: str | None = None
    """`approved` or `rejected`: where the run continues (a deciding vote only; None while short of a quorum)."""
    approved_count: int | None = None
    """Approvals counted so far (accepted votes and quorum refusals)."""
    required: int | None = None

    def to_data(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _when(value: datetime) -> str:
    return f"{value:%Y-%m-%d %H:%M:%S} UTC"


def allowed(approvers: Any, actor: str) -> bool:
    """`any`, or a list naming the actor in full (`key:ci`, `user:ada`) or by its bare name (`ci`, `ada`)."""
    if approvers in (None, "any"):
        return True
    bare = actor.split(":", 1)[1] if ":" in actor else actor
    return isinstance(approvers, list) and (actor in approvers or bare in approvers)


def _record(handles: EngineHandles, approval_id: str, actor: str, decision: str, outcome: str,
            reason: str | None, comment: str | None = None, at: float | None = None) -> None:
    when = handles.clock.now() if at is None else at
    with sqlite_writer(handles.sql), handles.sql.begin() as conn:
        conn.execute(sa.insert(ATTEMPTS).values(approval_id=approval_id[:64], actor=actor[:255],
                                                decision=decision[:16], outcome=outcome, reason=reason,
                                                attempted_at=utc_from_epoch(when), comment=comment or None))


def _refuse(handles: EngineHandles, approval_id: str, actor: str, decision: str, reason: RefusalReason,
            message: str, run_id: str | None = None) -> DecisionResult:
    _record(handles, approval_id, actor, decision, "refused", f"{reason}: {message}")
    return DecisionResult(False, approval_id, actor, decision, message, reason, run_id)


def decide(handles: EngineHandles, approval_id: str, decision: str, actor: str,
           comment: str | None = None) -> DecisionResult:
    """Decide approval `approval_id` (`approve` or `reject`) as `actor`; never raises for a refusal."""
    if decision not in ("approve", "reject"):
        return _refuse(handles, approval_id, actor, decision, "bad_decision",
                       f"decision {decision!r} is not one of approve, reject")
    with reading(handles.sql) as conn:
        row = conn.execute(_APPROVAL_WITH_RUN.where(APPROVALS.c.id == approval_id)).first()
    if row is None:
        return _refuse(handles, approval_id, actor, decision, "unknown_approval",
                       f'approval "{approval_id}" does not exist')  # each surface adds how to list pending ones
    claimed = read_claim(handles.client, handles.keys, approval_id)
    if claimed is not None or row.status != "pending":
        by = claimed.decided_by if claimed else row.decided_by
        verdict = claimed.decision if claimed else row.status
        return _refuse(handles, approval_id, actor, decision, "already_decided",
                       f'approval "{approval_id}" was already decided ({verdict} by {by}); nothing changed',
                       row.run_id)
    now = handles.clock.now()
    if now >= row.expires_at.timestamp():
        return _refuse(handles, approval_id, actor, decision, "expired",
                       f'approval "{approval_id}" timed out at {_when(row.expires_at)}, so it counts as rejected; '
                       "a decision after the timeout changes nothing", row.run_id)
    if row.run_status not in ("waiting", "running"):
        return _refuse(handles, approval_id, actor, decision, "run_not_waiting",
                       f'run "{row.run_id}" of approval "{approval_id}" is {row.run_status}, no longer waiting '
                       "for a decision", row.run_id)
    _published, flow = get_version(handles.sql, row.flow_id, row.version)
    node = next((n for n in flow.nodes if n.id == row.node_id), None)
    config: dict[str, Any] = node.config if node is not None else {}
    approvers = config.get("approvers", "any")
    escalated = _escalated(row, config, now)
    if not allowed(approvers, actor) and not (escalated and allowed(config.get("escalate_to") or "any", actor)):
        names = ", ".join(approvers) if isinstance(approvers, list) else str(approvers)
        later = ""
        if config.get("escalate_after") is not None and not escalated:
            later = f"; escalate_to may decide from {_when(utc_from_epoch(_escalate_at(row, config)))}"
        return _refuse(handles, approval_id, actor, decision, "not_allowed",
                       f'{actor} may not decide approval "{approval_id}": node "{row.node_id}" lists its approvers '
                       f"as {names}{later}", row.run_id)
    if config.get("forbid_self") and row.started_by == actor:
        return _refuse(handles, approval_id, actor, decision, "self_decision",
                       f'{actor} started run "{row.run_id}", and node "{row.node_id}" has forbid_self: someone '
                       "else must decide it", row.run_id)
    verdict_word: Literal["approved", "rejected"] = "approved" if decision == "approve" else "rejected"
    required = int(row.required or 1)
    claim = Claim(verdict_word, actor, comment or "", now)
    vote = cast_vote(handles.client, handles.keys, approval_id, claim, required)
    if vote.outcome == "decided":
        winner = vote.claim
        by = f"{winner.decision} by {winner.decided_by}" if winner else "by another attempt"
        return _refuse(handles, approval_id, actor, decision, "already_decided",
                       f'approval "{approval_id}" was decided first ({by}); nothing changed', row.run_id)
    if vote.outcome == "duplicate":
        earlier = vote.claim.decision if vote.claim else "voted"
        result = _refuse(handles, approval_id, actor, decision, "already_voted",
                         f'{actor} already voted on approval "{approval_id}" ({earlier}); each approver counts once '
                         f"towards the quorum ({vote.approved} of {required} approved)", row.run_id)
        return _with_count(result, vote.approved, required)
    _record(handles, approval_id, actor, decision, "accepted", None, comment, now)
    if vote.outcome == "counted":
        return DecisionResult(True, approval_id, actor, decision,
                              f'approval "{approval_id}": {vote.approved} of {required} approved (by {actor} now); '
                              f'run "{row.run_id}" keeps waiting for {required - vote.approved} more', None,
                              row.run_id, None, vote.approved, required)
    _announce_and_resume(handles, row.run_id, row.node_id, approval_id, claim, row.last_seq or 0)
    quorum = f" ({vote.approved} of {required} approved)" if required != 1 else ""
    return DecisionResult(True, approval_id, actor, decision,
                          f'approval "{approval_id}" {verdict_word} by {actor}{quorum}; run "{row.run_id}" continues '
                          f'through "{verdict_word}"', None, row.run_id, verdict_word, vote.approved, required)


def _with_count(result: DecisionResult, approved: int, required: int) -> DecisionResult:
    return DecisionResult(**{**result.__dict__, "approved_count": approved, "required": required})


def _escalate_at(row: Any, config: dict[str, Any]) -> float:
    settings = row.settings or {}
    if settings.get("escalate_at") is not None:
        return float(settings["escalate_at"])
    return float(row.requested_at.timestamp() + parse_duration(config["escalate_after"]))


def _escalated(row: Any, config: dict[str, Any], now: float) -> bool:
    """`escalate_to` may decide once the approval stayed undecided for `escalate_after`."""
    return config.get("escalate_after") is not None and now >= _escalate_at(row, config)


def decide_with_key(handles: EngineHandles, approval_id: str, decision: str, key: str,
                    comment: str | None = None) -> DecisionResult:
    """`decide()` as the holder of API key `key` (actor `key:<name>`); bad keys are refused and recorded."""
    check = check_key(handles.sql, key, DECIDE_SCOPE)
    actor = f"key:{check.name}" if check.name else "key:(unidentified)"
    if check.refusal is not None:
        return _refuse(handles, approval_id, actor, decision, check.refusal, check.message)
    return decide(handles, approval_id, decision, actor, comment)


def _announce_and_resume(handles: EngineHandles, run_id: str, node_id: str, approval_id: str, claim: Claim,
                         last_seq: int) -> None:
    event = ExternalStamper(run_id, handles.clock, last_seq).approval_decided(
        node_id, approval_id, claim.decision, claim.decided_by, claim.comment)
    pipe = handles.client.pipeline(transaction=False)
    pipe.xadd(handles.keys.events, {EVENT_FIELD: encode_event(event)})
    checkpoint = _parked_checkpoint(handles, run_id, node_id)
    if checkpoint is not None:
        # The timeout's due entry is replaced by this resume; its token makes any duplicate a no-op.
        pipe.zrem(handles.keys.due, run_id)
        pipe.xadd(handles.keys.jobs, encode_job(resume_job(run_id, park_token(checkpoint))))
    pipe.execute()


def _parked_checkpoint(handles: EngineHandles, run_id: str, node_id: str) -> dict[str, Any] | None:
    """The run's checkpoint once it is parked on `node_id`; a run still sealing its park gets a moment.

    None when it does not appear: the run then sees the claim when it seals (it wakes at once)."""
    deadline = time.monotonic() + CHECKPOINT_WAIT_SECONDS
    while True:
        raw = handles.client.get(handles.keys.run_checkpoint(run_id))
        if raw is not None:
            checkpoint: dict[str, Any] = orjson.loads(raw)
            if checkpoint.get("parked_node") == node_id:
                return checkpoint
        if time.monotonic() > deadline:
            return None
        time.sleep(0.01)
