"""The `budget.reserve` and `ai.model` bodies: holds through the ledger, calls through `ModelCaller`.

Every ledger change becomes one hold event of the run (`hold_placed`, `hold_charged` — the rest of a
charged hold goes back to the budget with it — or `hold_released`), emitted before the step's own
event, so the projector sees a hold before the run's end.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from functools import partial
from typing import Any

from engine.catalog import BudgetReserveConfig, ModelConfig
from engine.durations import parse_duration
from engine.events import EventBase, EventStamper
from engine.money.amounts import micros_to_usd
from engine.money.ledger import BudgetError, Refused, Reserved, Settled, UnknownBudget, UnknownHold
from engine.money.overspend_approvals import (
    OVERSPEND_TIMEOUT_SECONDS,
    overspend_approval_id,
    overspend_decision,
    request_overspend_approval,
)
from engine.money.run_state import HoldPlan, ModelProgress
from engine.money.wiring import MoneyServices, current
from engine.providers.base import ChatRequest
from engine.providers.model_call import Answered, Failed, HoldRef, LedgerChange, Parked
from engine.runtime.bodies import Park, StepCall, StepError, StepResult, TokenUsage, register_body
from engine.templates import TemplateProblem, render

DEFAULT_HOLD_TTL = "30m"


RESERVE_TYPE = "budget.reserve"
MODEL_TYPE = "ai.model"
HOLDING_NODE_TYPES = frozenset({RESERVE_TYPE, MODEL_TYPE})
"""The node types whose bodies place holds and keep a run's money state; a run of a flow without them has none."""


def _services(call: StepCall) -> MoneyServices:
    services = current(call.services.keys.prefix if call.services is not None else None)
    if services is None:
        raise StepError(f'node "{call.node.id}" ({call.node.type}): the engine has no money services; '
                        "run it through EngineServices (lockgate worker / the app)", "engine_error")
    return services


def _usd(micros: int) -> float:
    return float(micros_to_usd(micros))


def hold_event(stamper: EventStamper, node: str, change: LedgerChange) -> EventBase | None:
    """The hold event of one ledger change (None for a replayed reservation, which is no change)."""
    if isinstance(change, Reserved):
        if change.replayed:
            return None
        return stamper.hold_placed(change.node_id or node, change.hold_id, change.budget, _usd(change.amount_micros),
                                   change.expires_at)
    if isinstance(change, Settled):
        if change.state == "charged":
            return stamper.hold_charged(node, change.hold_id, _usd(change.charged_micros), change.budget)
        return stamper.hold_released(node, change.hold_id, _usd(change.released_micros), change.reason, change.budget)
    return stamper.hold_charged(node, change.hold_id, _usd(change.cost_micros), change.budget, late=True)


def emit_ledger_changes(call: StepCall, changes: Sequence[LedgerChange]) -> None:
    """One hold event per ledger change, in order."""
    for change in changes:
        if not (isinstance(change, Reserved) and change.replayed):
            call.emit(partial(_required_event, node=call.node.id, change=change))


def _required_event(stamper: EventStamper, *, node: str, change: LedgerChange) -> EventBase:
    event = hold_event(stamper, node, change)
    assert event is not None
    return event


def _place(call: StepCall, services: MoneyServices, model_node: str, budget: str, amount_usd: str,
           ttl_seconds: float, reserve_node: str) -> HoldPlan:
    """Place a new hold of the run for `model_node`; a refusal fails the step with the ledger's reason."""
    run_id = call.ctx.run_id
    hold_id = services.state.next_hold_id(run_id)
    try:
        outcome = services.ledger.reserve(budget, hold_id, amount_usd, services.clock.now() + ttl_seconds,
                                          run_id=run_id, node_id=call.node.id)
    except UnknownBudget as exc:
        raise StepError(f'node "{call.node.id}" ({call.node.type}): {exc}', "unknown_budget") from None
    except BudgetError as exc:
        raise StepError(f'node "{call.node.id}" ({call.node.type}): {exc}', "budget_error") from None
    if isinstance(outcome, Refused):
        raise StepError(f'node "{call.node.id}" ({call.node.type}): {outcome.message}', outcome.reason)
    plan = HoldPlan(hold_id, budget, amount_usd, ttl_seconds, reserve_node)
    services.state.save_hold_plan(run_id, model_node, plan)
    emit_ledger_changes(call, [outcome])
    return plan


def release_hold(services: MoneyServices, hold_id: str, reason: str) -> list[LedgerChange]:
    """Return a still-placed hold to its budget: the change to emit, or nothing when it was settled."""
    try:
        settled = services.ledger.release(hold_id, reason=reason)
    except UnknownHold:
        return []
    return [settled] if settled.applied else []


def _target_ttl(services: MoneyServices, call: StepCall, model_node: str) -> float:
    flow = services.flow(call.ctx.flow_id, call.ctx.version)
    target = flow.node(model_node)
    ttl = target.config.get("hold_ttl", DEFAULT_HOLD_TTL) if target is not None else DEFAULT_HOLD_TTL
    return parse_duration(ttl)


@register_body(RESERVE_TYPE, blocking=True)
def reserve_body(call: StepCall) -> StepResult:
    config = BudgetReserveConfig.model_validate(call.config)
    services = _services(call)
    existing = services.state.hold_plan(call.ctx.run_id, config.for_)
    if existing is not None and existing.reserve_node == call.node.id:
        try:
            if services.ledger.hold(existing.hold_id).state == "placed":
                return StepResult(ports=("out",))  # a re-run of this step (reclaimed job): the hold stands
        except UnknownHold:
            pass
    _place(call, services, config.for_, config.budget, str(Decimal(str(config.amount))),
           _target_ttl(services, call, config.for_), call.node.id)
    return StepResult(ports=("out",))


def _model_given(call: StepCall) -> dict[str, Any]:
    config = ModelConfig.model_validate(call.config)
    names = call.names()
    try:
        prompt = render(config.prompt, names)
        system = render(config.system, names) if config.system else None
    except TemplateProblem as exc:
        raise StepError(f'node "{call.node.id}" (ai.model): prompt: {exc}', "template_error") from None
    return {"model": config.model, "system": system, "prompt": prompt, "max_tokens": config.max_tokens}


def _request(call: StepCall, config: ModelConfig) -> ChatRequest:
    return ChatRequest.from_prompt(config.model, call.given["prompt"], call.given["system"], config.max_tokens)


def _max_wait_seconds(services: MoneyServices, call: StepCall) -> float:
    from engine.validation import DEFAULT_LIMITS  # here: validation pulls in networkx, a worker's start needs none

    flow = services.flow(call.ctx.flow_id, call.ctx.version)
    settings: Any = getattr(flow, "settings", None)
    configured = getattr(settings, "max_wait", None) if settings is not None else None
    return parse_duration(configured if configured is not None else DEFAULT_LIMITS["max_wait"])


def _hold_ref(services: MoneyServices, call: StepCall, plan: HoldPlan | None,
              fresh: bool) -> HoldRef | None:
    """The hold the call charges; `fresh` places a new one when the old one went back to the budget."""
    if plan is None:
        return None
    if fresh:
        try:
            placed = services.ledger.hold(plan.hold_id).state == "placed"
        except UnknownHold:
            placed = False
        if not placed:
            plan = _place(call, services, call.node.id, plan.budget, plan.amount_usd, plan.ttl_seconds,
                          plan.reserve_node)
    return HoldRef(plan.budget, plan.amount_usd, plan.hold_id, plan.ttl_seconds)


@register_body(MODEL_TYPE, blocking=True, prepare=_model_given)
def model_body(call: StepCall) -> StepResult | Park:
    config = ModelConfig.model_validate(call.config)
    services = _services(call)
    run_id, node_id = call.ctx.run_id, call.node.id
    progress = services.state.progress(run_id, node_id) if call.resumed else ModelProgress()
    plan = services.state.hold_plan(run_id, node_id)
    now = services.clock.now()
    if progress.first_park_at is not None and now - progress.first_park_at >= _max_wait_seconds(services, call):
        if plan is not None:
            emit_ledger_changes(call, release_hold(services, plan.hold_id, "parked_expired"))
        services.state.clear_progress(run_id, node_id)
        raise StepError(f'node "{node_id}" (ai.model): waited past the flow\'s max_wait; the run ends here',
                        "parked_expired")

    background = progress.background_call()
    if background is not None:
        outcome = services.caller.poll(node_id, config, background, hold=_hold_ref(services, call, plan, False))
    else:
        if progress.approval_id is not None and not progress.approved:
            timeout_at = float(progress.extra.get("approval_timeout_at") or now)
            claim = overspend_decision(call, services, progress.approval_id, timeout_at)
            if claim is None:
                return Park("overspend_approval", due_at=timeout_at, detail={"approval_id": progress.approval_id})
            if claim.decision != "approved":
                services.state.clear_progress(run_id, node_id)
                raise StepError(f'node "{node_id}" (ai.model): the overspend was not approved '
                                f"({claim.decided_by}: {claim.comment or claim.decision}); reserve more, lower "
                                "max_tokens or set overspend to allow", "overspend_rejected")
            progress.approved = True
        outcome = services.caller.call(node_id, config, _request(call, config),
                                       hold=_hold_ref(services, call, plan, fresh=True),
                                       pool_waits=progress.pool_waits, overspend_approved=progress.approved)
    emit_ledger_changes(call, outcome.ledger)

    if isinstance(outcome, Answered):
        services.state.clear_progress(run_id, node_id)
        answer = outcome.result
        return StepResult(ports=("out",), writes={config.output_key: answer.text},
                          tokens=TokenUsage(answer.prompt_tokens, answer.completion_tokens),
                          cost_micros=answer.cost_micros if plan is None else None)
    if isinstance(outcome, Failed):
        services.state.clear_progress(run_id, node_id)
        raise StepError(outcome.message, outcome.error_type)
    assert isinstance(outcome, Parked)
    if progress.first_park_at is None:
        progress.first_park_at = now
    due_at = now + outcome.retry_after_seconds
    if outcome.reason == "pool_capacity":
        progress.pool_waits += 1
    elif outcome.reason == "provider_response":
        if outcome.background is not None:
            progress.set_background(outcome.background)
    else:
        timeout_at = now + OVERSPEND_TIMEOUT_SECONDS
        asks = int(progress.extra.get("approvals_asked", 0)) + 1
        progress.approval_id = overspend_approval_id(run_id, node_id, asks)
        progress.extra.update(approvals_asked=asks, approval_timeout_at=timeout_at)
        request_overspend_approval(call, progress.approval_id, outcome.detail, timeout_at)
        services.state.save_progress(run_id, node_id, progress)
        return Park(outcome.reason, due_at=timeout_at, detail={"approval_id": progress.approval_id})
    services.state.save_progress(run_id, node_id, progress)
    return Park(outcome.reason, due_at=due_at, detail={"message": outcome.detail})
