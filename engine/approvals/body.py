"""The `approval` node: parks the run until a decision or its timeout; continues through `approved`/`rejected`.

Parking emits `approval_requested` (the projector creates the pending row). On resume the body
reads the claimed decision (`claims`), or claims rejection by timeout when none came, and writes
`state[<node id>] = {decision, decided_by, comment, decided_at}` (and `votes`, `required` for a quorum).

Approvals v2 timers (`remind_every`, `escalate_after`): the run parks until the earliest of the next
reminder, the escalation and the timeout (`timers.next_wake`); waking before the timeout undecided, it
announces what came due (`approval_reminded`, `approval_escalated`) and parks again. A v1 approval has no
timers: its only wakes are the decision and the timeout, exactly as before.
"""

from __future__ import annotations

import hashlib
from typing import Any

from engine.approvals.claims import TIMEOUT_ACTOR, Claim, read_claim, read_votes, settle_on_resume
from engine.approvals.timers import ApprovalTimers, due_announcements, load_timers, record_announced, store_timers
from engine.durations import parse_duration
from engine.runtime.bodies import Park, StepCall, StepError, StepResult, register_body
from engine.templates import TemplateProblem, render


def approval_id_for(run_id: str, node_id: str) -> str:
    """Stable per run and node, so a re-run of the parking step after a crash requests the same approval."""
    return "ap_" + hashlib.sha256(f"{run_id}/{node_id}".encode()).hexdigest()[:24]


def _rendered(call: StepCall, key: str) -> str:
    source = call.config.get(key) or ""
    try:
        return str(render(source, call.names())) if source else ""
    except TemplateProblem as exc:
        raise StepError(f'node "{call.node.id}" (approval): {key}: {exc}', "template_error") from None


def _approval_given(call: StepCall) -> dict[str, Any]:
    given = {"message": _rendered(call, "message"), "timeout": call.config["timeout"],
             "approvers": call.config.get("approvers", "any")}
    for key in ("required", "forbid_self", "remind_every", "escalate_after", "escalate_to"):
        if call.config.get(key) is not None:
            given[key] = call.config[key]
    if call.config.get("notify_url"):
        given["notify_url"] = _rendered(call, "notify_url")
    return given


def _request(call: StepCall, approval_id: str) -> Park:
    now = call.clock.now()
    given = call.given
    timers = ApprovalTimers(
        requested_at=now, timeout_at=now + parse_duration(given["timeout"]),
        remind_every=parse_duration(given["remind_every"]) if given.get("remind_every") is not None else None,
        escalate_at=now + parse_duration(given["escalate_after"]) if given.get("escalate_after") is not None
        else None)
    if call.services is not None and timers.has_timers:
        timers = store_timers(call.services.client, call.services.keys, approval_id, timers)
    v2: dict[str, Any] = {}
    if int(given.get("required", 1)) != 1:
        v2["required"] = int(given["required"])
    if given.get("forbid_self"):
        v2["forbid_self"] = True
    if timers.remind_every is not None:
        v2["remind_every"] = timers.remind_every
    if timers.escalate_at is not None:
        v2["escalate_at"] = timers.escalate_at
        v2["escalate_to"] = given.get("escalate_to") or "any"
    if given.get("notify_url"):
        v2["notify_url"] = call.ctx.redact(given["notify_url"])
    message = call.ctx.redact(given["message"])
    call.emit(lambda stamper: stamper.approval_requested(call.node.id, approval_id, timers.timeout_at,
                                                         given["approvers"], message, **v2))
    return _park(call, approval_id, timers)


def _park(call: StepCall, approval_id: str, timers: ApprovalTimers) -> Park:
    """Parked until the next timer, or at once once decided: a decision claimed while the run seals this park
    (after the body read no claim, before its checkpoint is written) finds the old checkpoint and resumes a park
    that is gone, so the sealing write itself resumes the run when the decision exists by then."""
    wake = call.services.keys.approval_decision(approval_id) if call.services is not None else None
    return Park("approval", due_at=timers.next_wake(), detail={"approval_id": approval_id}, wake_on_key=wake)


def _announce(call: StepCall, approval_id: str) -> Park | None:
    """An undecided approval woken by its timers before its timeout: announce what came due and park again.
    None when it has no timers or its timeout has come (the caller settles it)."""
    if call.services is None:
        return None
    client, keys = call.services.client, call.services.keys
    timers = load_timers(client, keys, approval_id)
    now = call.clock.now()
    if timers is None or not timers.has_timers or now >= timers.timeout_at:
        return None
    reminder, escalate = due_announcements(timers, now)
    if reminder:
        call.emit(lambda stamper: stamper.approval_reminded(call.node.id, approval_id, reminder))
    if escalate:
        escalate_to: Any = call.config.get("escalate_to") or "any"
        call.emit(lambda stamper: stamper.approval_escalated(call.node.id, approval_id, escalate_to))
    timers = record_announced(client, keys, approval_id, timers, reminder, escalate)
    return _park(call, approval_id, timers)


@register_body("approval", prepare=_approval_given)
def approval_body(call: StepCall) -> StepResult | Park:
    approval_id = approval_id_for(call.ctx.run_id, call.node.id)
    if not call.resumed:
        return _request(call, approval_id)
    now = call.clock.now()
    if call.services is None:
        claim, by_timeout = Claim("rejected", TIMEOUT_ACTOR, "no decision store", now), True
    else:
        found = read_claim(call.services.client, call.services.keys, approval_id)
        if found is None:
            again = _announce(call, approval_id)
            if again is not None:
                return again
        claim, by_timeout = settle_on_resume(call.services.client, call.services.keys, approval_id, now)
    if by_timeout:
        call.emit(lambda stamper: stamper.approval_decided(call.node.id, approval_id, claim.decision,
                                                           claim.decided_by, claim.comment))
    record: dict[str, Any] = {"decision": claim.decision, "decided_by": claim.decided_by, "comment": claim.comment,
                              "decided_at": claim.decided_at}
    required = int(call.config.get("required", 1))
    if required != 1 and call.services is not None:
        record["required"] = required
        record["votes"] = [{"decision": vote.decision, "by": vote.decided_by, "comment": vote.comment,
                            "at": vote.decided_at}
                           for vote in read_votes(call.services.client, call.services.keys, approval_id)]
    return StepResult(ports=(claim.port,), writes={call.node.id: record})
