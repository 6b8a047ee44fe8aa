"""The `flow.call` body: start one child run of a published flow, park on it, take its result when it ends.

Each attempt of the step owns one child, found again by an idempotency key derived from the parent run,
the node and the attempt: a redelivered job (its worker killed after the child was created) or a resume
finds the same child and never starts a second. The step never asks whether it is resuming: it looks
its child up, starts it when there is none, parks while it runs and finishes from its end.
"""

from __future__ import annotations

from typing import Any

from engine.calls.wiring import CallServices, ChildRun, current
from engine.publish import UnknownFlowVersion
from engine.runtime.bodies import Park, StepCall, StepError, StepResult, register_body
from engine.runtime.create import FlowDisabled, RunRefused
from engine.runtime.inputs import InputError
from engine.runtime.transitions import TERMINAL
from engine.templates import TemplateProblem, evaluate

CHILD_RUN = "child_run"
"""The park reason of a `flow.call` step waiting for its child run."""
CALL_TARGET_UNKNOWN = "call_target_unknown"
CALL_TARGET_DISABLED = "call_target_disabled"
CALL_DEPTH_EXCEEDED = "call_depth_exceeded"
CALL_INPUTS_REFUSED = "call_inputs_refused"
CALL_REFUSED = "call_refused"
CHILD_RUN_FAILED = "child_run_failed"
CHILD_RUN_CANCELLED = "child_run_cancelled"
CHILD_RUN_INTERRUPTED = "child_run_interrupted"
FLOW_CALL_ERROR_TYPES = (CALL_TARGET_UNKNOWN, CALL_TARGET_DISABLED, CALL_DEPTH_EXCEEDED, CALL_INPUTS_REFUSED,
                         CALL_REFUSED, CHILD_RUN_FAILED, CHILD_RUN_CANCELLED, CHILD_RUN_INTERRUPTED)
_ENDED_ERROR_TYPES = {"failed": CHILD_RUN_FAILED, "cancelled": CHILD_RUN_CANCELLED,
                      "interrupted": CHILD_RUN_INTERRUPTED}


def child_idempotency_key(parent_run_id: str, node_id: str, attempt: int) -> str:
    """The idempotency key of the child run one attempt of a `flow.call` step starts."""
    return f"flow.call/{parent_run_id}/{node_id}/{attempt}"


def _where(call: StepCall) -> str:
    return f'node "{call.node.id}" (flow.call)'


def _flow_call_given(call: StepCall) -> dict[str, Any]:
    names = call.names()
    inputs: dict[str, Any] = {}
    for key, source in call.config.get("inputs", {}).items():
        try:
            inputs[key] = call.ctx.plain(evaluate(source, names))
        except TemplateProblem as exc:
            raise StepError(f"{_where(call)}: inputs.{key}: {exc}", "template_error") from None
    return {"flow": call.config["flow"], "version": call.config.get("version"), "inputs": inputs}


def _services(call: StepCall) -> CallServices:
    services = current(call.services.keys.prefix) if call.services is not None else None
    if services is None:
        raise StepError(f"{_where(call)}: the engine has no run services for child runs; run it through "
                        "EngineServices (lockgate worker / the app)", "engine_error")
    return services


def _park(services: CallServices, child_id: str) -> Park:
    return Park(CHILD_RUN, wake_on_key=services.handles.keys.run_ended(child_id), child_run_id=child_id,
                detail={"child_run_id": child_id})


def _start(call: StepCall, services: CallServices, key: str) -> str:
    given = call.given
    flow_id, version = given["flow"], given["version"]
    depth = services.depth_of(call.ctx.run_id) + 1
    if depth > services.max_depth:
        raise StepError(f'{_where(call)}: calling flow "{flow_id}" would nest child runs {depth} deep, past the '
                        f"limit of {services.max_depth} (setting LOCKGATE_MAX_CALL_DEPTH); no child run was "
                        "started. Flatten the chain of calls or raise the limit", CALL_DEPTH_EXCEEDED)
    try:
        created = services.start_child(flow_id, given["inputs"], version, key, call.ctx.run_id, depth)
    except UnknownFlowVersion as exc:
        raise StepError(f"{_where(call)}: {exc}; no child run was started", CALL_TARGET_UNKNOWN) from None
    except FlowDisabled as exc:
        raise StepError(f"{_where(call)}: {exc}; no child run was started", CALL_TARGET_DISABLED) from None
    except InputError as exc:
        raise StepError(f'{_where(call)}: flow "{flow_id}" refused the inputs given: {exc}', CALL_INPUTS_REFUSED) \
            from None
    except RunRefused as exc:
        raise StepError(f'{_where(call)}: the child run of flow "{flow_id}" was refused: {exc}',
                        CALL_REFUSED if exc.reason == RunRefused.reason else exc.reason) from None
    return created.run_id


def _finish(call: StepCall, child: ChildRun) -> StepResult:
    if child.status == "succeeded":
        key = call.config.get("output_key") or call.node.id
        return StepResult(ports=("out",), writes={key: child.result})
    why = f" ({child.error_type}): {child.error}" if child.error else f" ({child.error_type})"
    raise StepError(f'{_where(call)}: child run "{child.id}" of flow "{child.flow_id}" {child.status}{why}',
                    _ENDED_ERROR_TYPES.get(child.status, CHILD_RUN_FAILED))


@register_body("flow.call", blocking=True, prepare=_flow_call_given)
def flow_call_body(call: StepCall) -> StepResult | Park:
    if "index" in call.extra_names:
        raise StepError(f"{_where(call)}: a flow.call cannot wait for its child run inside a foreach yet; move it "
                        "out of the loop (no child run was started)", "park_in_foreach")
    services = _services(call)
    key = child_idempotency_key(call.ctx.run_id, call.node.id, call.attempt)
    child = services.child_by_key(key)
    if child is None:
        return _park(services, _start(call, services, key))
    if child.status not in TERMINAL:
        return _park(services, child.id)
    return _finish(call, child)
