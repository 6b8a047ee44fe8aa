"""Overspend approvals: an `ai.model` with `overspend: approve` asks, and a person or API key decides.

The ask is an ordinary approval (`engine.approvals`): an `approval_requested` event (the projector
keeps the `approvals` row), the decision claimed once in Redis, the run resumed by the decision.
No decision by the timeout counts as a rejection, as for the `approval` node.
"""

from __future__ import annotations

import hashlib

from engine.approvals.claims import Claim, read_claim, settle_on_resume
from engine.money.wiring import MoneyServices
from engine.runtime.bodies import StepCall

OVERSPEND_TIMEOUT_SECONDS = 24 * 3600.0
"""How long an overspend waits for its decision (the default suspended_step_timeout)."""


def overspend_approval_id(run_id: str, node_id: str, number: int) -> str:
    """Stable per run, node and ask, so a re-run of the parking step requests the same approval."""
    return "os_" + hashlib.sha256(f"{run_id}/{node_id}/{number}".encode()).hexdigest()[:24]


def request_overspend_approval(call: StepCall, approval_id: str, message: str, timeout_at: float) -> None:
    """Emit the run's `approval_requested` for an overspend."""
    text = call.ctx.redact(message)
    call.emit(lambda s: s.approval_requested(call.node.id, approval_id, timeout_at, "any", text))


def overspend_decision(call: StepCall, services: MoneyServices, approval_id: str,
                       timeout_at: float) -> Claim | None:
    """The decision, a rejection by timeout once `timeout_at` passed (emitted as `approval_decided`), or None
    while the approval is still open."""
    now = services.clock.now()
    found = read_claim(services.client, services.keys, approval_id)
    if found is not None:
        return found
    if now < timeout_at:
        return None
    claim, by_timeout = settle_on_resume(services.client, services.keys, approval_id, now)
    if by_timeout:
        call.emit(lambda s: s.approval_decided(call.node.id, approval_id, claim.decision, claim.decided_by,
                                               claim.comment))
    return claim
