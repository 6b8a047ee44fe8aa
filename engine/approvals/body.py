"""The `approval` node: parks the run until a decision or its timeout; continues through `approved`/`rejected`.

Parking emits `approval_requested` (the projector creates the pending row). On resume the body
reads the claimed decision (`claims`), or claims rejection by timeout when none came, and writes
`state[<node id>] = {decision, decided_by, comment, decided_at}`.
"""

from __future__ import annotations

import hashlib
from typing import Any

from engine.approvals.claims import TIMEOUT_ACTOR, Claim, settle_on_resume
from engine.durations import parse_duration
from engine.runtime.bodies import Park, StepCall, StepError, StepResult, register_body
from engine.templates import TemplateProblem, render


def approval_id_for(run_id: str, node_id: str) -> str:
    """Stable per run and node, so a re-run of the parking step after a crash requests the same approval."""
    return "ap_" + hashlib.sha256(f"{run_id}/{node_id}".encode()).hexdigest()[:24]


def _message(call: StepCall) -> str:
    source = call.config.get("message") or ""
    try:
        return str(render(source, call.names())) if source else ""
    except TemplateProblem as exc:
        raise StepError(f'node "{call.node.id}" (approval): message: {exc}', "template_error") from None


def _approval_given(call: StepCall) -> dict[str, Any]:
    return {"message": _message(call), "timeout": call.config["timeout"],
            "approvers": call.config.get("approvers", "any")}


@register_body("approval", prepare=_approval_given)
def approval_body(call: StepCall) -> StepResult | Park:
    approval_id = approval_id_for(call.ctx.run_id, call.node.id)
    if not call.resumed:
        timeout_at = call.clock.now() + parse_duration(call.given["timeout"])
        approvers: Any = call.given["approvers"]
        message = call.ctx.redact(call.given["message"])
        call.emit(lambda stamper: stamper.approval_requested(call.node.id, approval_id, timeout_at, approvers,
                                                             message))
        return Park("approval", due_at=timeout_at, detail={"approval_id": approval_id})
    now = call.clock.now()
    if call.services is None:
        claim, by_timeout = Claim("rejected", TIMEOUT_ACTOR, "no decision store", now), True
    else:
        claim, by_timeout = settle_on_resume(call.services.client, call.services.keys, approval_id, now)
    if by_timeout:
        call.emit(lambda stamper: stamper.approval_decided(call.node.id, approval_id, claim.decision,
                                                           claim.decided_by, claim.comment))
    record = {"decision": claim.decision, "decided_by": claim.decided_by, "comment": claim.comment,
              "decided_at": claim.decided_at}
    return StepResult(ports=(claim.port,), writes={call.node.id: record})
