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


def _set_given(call: StepCall) -> dict[str, Any]:
    return {"values": {key: _value(call, source, f"values.{key}") for key, source in call.config["values"].items()}}


@register_body("set", prepare=_set_given)
def set_body(call: StepCall) -> StepResult:
    return StepResult(ports=("out",), writes=dict(call.given["values"]))


def _router_given(call: StepCall) -> dict[str, Any]:
    """Every branch's condition result, in order. Until one matches, a condition that cannot be evaluated
    fails the step; after the match it is only recorded (the route is already decided)."""
    names = call.names()
    branches: list[dict[str, Any]] = []
    matched = False
    for index, branch in enumerate(call.config["branches"]):
        try:
            result = truthy(branch["when"], names)
        except TemplateProblem as exc:
            if not matched:
                raise StepError(f'node "{call.node.id}" (router): branches[{index}].when: {exc}',
                                "template_error") from None
            branches.append({"port": branch["port"], "result": None, "error": str(exc)})
            continue
        branches.append({"port": branch["port"], "result": result})
        matched = matched or result
    return {"branches": branches}


@register_body("router", prepare=_router_given)
def router_body(call: StepCall) -> StepResult:
    chosen = next((branch["port"] for branch in call.given["branches"] if branch["result"]), "default")
    return StepResult(ports=(chosen,))


def _join_given(call: StepCall) -> dict[str, Any]:
    return {"reduce": dict(call.config.get("reduce", {})), "branches": len(call.branch_writes)}


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


@register_body("join", prepare=_join_given)
def join_body(call: StepCall) -> StepResult:
    writes: dict[str, Any] = {}
    for key, reducer in call.config.get("reduce", {}).items():
        values = [branch[key] for branch in call.branch_writes if key in branch]
        if values:
            writes[key] = _reduce(reducer, values)
    return StepResult(ports=("out",), writes=writes)


def _foreach_given(call: StepCall) -> dict[str, Any]:
    items = _value(call, call.config["items"], "items")
    if isinstance(items, dict):
        items = list(items.items())
    if not isinstance(items, list):
        raise StepError(
            f'node "{call.node.id}" (foreach): items gave {type(items).__name__}, not a list; '
            "make the template evaluate to a list", "template_error")
    call.items = items
    return {"items_count": len(items), "concurrency": int(call.config.get("concurrency", 4))}


@register_body("foreach", prepare=_foreach_given)
def foreach_body(call: StepCall) -> StepResult:
    return StepResult(items=call.items or [])


def _terminal_given(call: StepCall) -> dict[str, Any]:
    source = call.config.get("output")
    return {"output": _value(call, source, "output") if source else None}


@register_body("terminal", prepare=_terminal_given)
def terminal_body(call: StepCall) -> StepResult:
    return StepResult(ports=(), result=call.given["output"])


def _queue_given(call: StepCall) -> dict[str, Any]:
    return {"delay": call.config["delay"], "delay_seconds": parse_duration(call.config["delay"])}


@register_body("queue", prepare=_queue_given)
def queue_body(call: StepCall) -> StepResult | Park:
    if call.resumed:
        return StepResult(ports=("default",))
    return Park("queue_delay", due_at=call.clock.now() + call.given["delay_seconds"])
