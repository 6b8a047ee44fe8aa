"""Whether a step may run again after its worker was lost mid-step."""

from __future__ import annotations

from engine.catalog import node_type
from engine.runtime.plan import FlowPlan


def step_is_idempotent(plan: FlowPlan, node_id: str) -> bool:
    """The node's `idempotent` setting, else its type's default (`http.request`: GET/HEAD only); a foreach
    is idempotent only when every step of its body is, since its iterations run again whole."""
    if plan.kinds[node_id] == "forEach":
        return all(_own(plan, member) for member in plan.foreach_body(node_id) | {node_id})
    return _own(plan, node_id)


def _own(plan: FlowPlan, node_id: str) -> bool:
    node = plan.nodes[node_id]
    if node.idempotent is not None:
        return node.idempotent
    spec = node_type(node.type)
    return spec.default_idempotent(dict(node.config)) if spec is not None else False
