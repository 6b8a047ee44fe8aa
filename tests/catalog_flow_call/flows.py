"""Flow documents the flow.call tests share."""

from __future__ import annotations

from typing import Any

from tests.engine.conftest import make_flow


def child_flow(flow_id: str = "child", *, fail: bool = False, wait: str | None = None,
               enabled: bool = True) -> dict[str, Any]:
    """A child that doubles `inputs.n` (or fails with a bad template, or queues `wait` first)."""
    nodes: list[dict[str, Any]] = [{"id": "start", "type": "trigger.manual"}]
    edges: list[tuple[str, str] | tuple[str, str, str]] = []
    last = "start"
    if wait:
        nodes.append({"id": "hold", "type": "queue", "config": {"delay": wait}})
        edges.append((last, "hold"))
        last = "hold"
    nodes.append({"id": "double", "type": "set",
                  "config": {"values": {"doubled": "{{ inputs.n * 2 }}" if not fail else "{{ inputs.n.nope() }}"}}})
    nodes.append({"id": "end", "type": "terminal", "config": {"output": "{{ {'doubled': state.doubled} }}"}})
    edges += [(last, "double"), ("double", "end")]
    document = make_flow(flow_id, nodes, edges, inputs={"n": {"type": "number", "required": True}})
    document["enabled"] = enabled
    return document


def parent_flow(flow_id: str = "parent", target: str = "child", *, continue_on_fail: bool = False,
                retry: dict[str, Any] | None = None, version: int | None = None) -> dict[str, Any]:
    config: dict[str, Any] = {"flow": target, "inputs": {"n": "{{ inputs.n + 1 }}"}, "output_key": "sub"}
    if version is not None:
        config["version"] = version
    call: dict[str, Any] = {"id": "call", "type": "flow.call", "config": config}
    if continue_on_fail:
        call["continue_on_fail"] = True
    if retry is not None:
        call["retry"] = retry
    nodes = [{"id": "start", "type": "trigger.manual"}, call,
             {"id": "end", "type": "terminal", "config": {"output": "{{ state.sub }}"}}]
    return make_flow(flow_id, nodes, [("start", "call"), ("call", "end")],
                     inputs={"n": {"type": "number", "required": True}})
