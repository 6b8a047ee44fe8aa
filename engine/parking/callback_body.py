"""The `wait.callback` node: parks until its resume URL is POSTed to, or its timeout passes.

A POST that came before the node ran (the URL is known earlier) is taken at once, without parking. On
resume the claim decides (`callback_claims`): a received body goes under `output_key` (default the node
id) and the run leaves through `received`; no POST by the timeout claims the timeout, `timed_out`.
"""

from __future__ import annotations

from typing import Any

from engine.durations import parse_duration
from engine.parking.callback_claims import CallbackClaim, read_callback_claim, settle_on_resume
from engine.runtime.bodies import Park, StepCall, StepError, StepResult, register_body

PARK_REASON = "callback"


def _callback_given(call: StepCall) -> dict[str, Any]:
    return {"timeout": call.config["timeout"], "timeout_seconds": parse_duration(call.config["timeout"])}


def _result(call: StepCall, claim: CallbackClaim) -> StepResult:
    if claim.outcome == "timed_out":
        return StepResult(ports=("timed_out",))
    key = call.config.get("output_key") or call.node.id
    return StepResult(ports=("received",), writes={key: claim.body})


@register_body("wait.callback", prepare=_callback_given)
def wait_callback_body(call: StepCall) -> StepResult | Park:
    if call.services is None:
        raise StepError(f'node "{call.node.id}" (wait.callback): no callback store (Redis) in this executor',
                        "no_callback_store")
    client, keys, run_id = call.services.client, call.services.keys, call.ctx.run_id
    if call.resumed:
        return _result(call, settle_on_resume(client, keys, run_id, call.node.id, call.clock.now()))
    early = read_callback_claim(client, keys, run_id, call.node.id)
    if early is not None and early.outcome == "received":
        return _result(call, early)
    return Park(PARK_REASON, due_at=call.clock.now() + call.given["timeout_seconds"],
                detail={"callback_claim": keys.callback_claim(run_id, call.node.id)})
