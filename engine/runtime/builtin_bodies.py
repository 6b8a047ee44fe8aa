"""Bodies of the built-in node types that need no money, provider or approval machinery."""

from __future__ import annotations

from typing import Any

from engine.durations import parse_duration
from engine.runtime.bodies import Park, StepCall, StepError, StepResult, register_body
from engine.templates import TemplateProblem, evaluate, truthy


def _value(call: StepCall, source: str, where: str) -> Any:
    try:
        return call.ctx.plain(evaluate(source, call.names()))
    except TemplateProblem as exc:
        raise StepError(f'node "{call.node.id}" ({call.node.type}): {where}: {exc}', "template_error") from None


@register_body("trigger.manual")
@register_body("trigger.schedule")
@register_body("trigger.webhook")
@register_body("trigger.event")
def trigger_body(call: StepCall) -> StepResult:
    return StepResult(ports=("out",))


@register_body("set")
def set_body(call: StepCall) -> StepResult:
    writes = {key: _value(call, source, f"values.{key}") for key, source in call.config["values"].items()}
    return StepResult(ports=("out",), writes=writes)


@register_body("router")
def router_body(call: StepCall) -> StepResult:
    names = call.names()
    for index, branch in enumerate(call.config["branches"]):
        try:
            if truthy(branch["when"], names):
                return StepResult(ports=(branch["port"],))
        except TemplateProblem as exc:
            raise StepError(f'node "{call.node.id}" (router): branches[{index}].when: {exc}',
                            "template_error") from None
    return StepResult(ports=("default",))


def _reduce(reducer: str, values: list[Any]) -> Any:
    if reducer == "append":
        merged: list[Any] = []
        for value in values:
            merged.extend(value if isinstance(value, list) else [value])
        return merged
    if reducer == "merge":
        combined: dict[str, Any] = {}
        for value in values:
            if isinstance(value, dict):
                combined.update(value)
        return combined
    if reducer == "sum":
        return sum(v for v in values if isinstance(v, int | float) and not isinstance(v, bool))
    return values[-1]


@register_body("join")
def join_body(call: StepCall) -> StepResult:
    writes: dict[str, Any] = {}
    for key, reducer in call.config.get("reduce", {}).items():
        values = [branch[key] for branch in call.branch_writes if key in branch]
        if values:
            writes[key] = _reduce(reducer, values)
    return StepResult(ports=("out",), writes=writes)


@register_body("foreach")
def foreach_body(call: StepCall) -> StepResult:
    items = _value(call, call.config["items"], "items")
    if isinstance(items, dict):
        items = list(items.items())
    if not isinstance(items, list):
        raise StepError(
            f'node "{call.node.id}" (foreach): items gave {type(items).__name__}, not a list; '
            "make the template evaluate to a list", "template_error")
    return StepResult(items=items)


@register_body("terminal")
def terminal_body(call: StepCall) -> StepResult:
    source = call.config.get("output")
    result = _value(call, source, "output") if source else None
    return StepResult(ports=(), result=result)


@register_body("queue")
def queue_body(call: StepCall) -> StepResult | Park:
    if call.resumed:
        return StepResult(ports=("default",))
    return Park("queue_delay", due_at=call.clock.now() + parse_duration(call.config["delay"]))


import engine.approvals.body  # noqa: E402  (registers approval)
import engine.money.bodies  # noqa: E402  (registers budget.reserve and ai.model)
import engine.runtime.http_body  # noqa: E402,F401  (registers http.request)
