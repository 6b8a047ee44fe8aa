"""Hostile flow shapes for the write-conflict rule: each once made validation quadratic or worse.

Every builder takes a node count and returns a flow document where most nodes write the same key.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .builders import edge, flow_doc, node, setter


def wide_routers(count: int, ports: int = 50) -> dict[str, Any]:
    """Routers of `ports` branches in a row, each writing `reply`, merged by a join: over 1,200 exclusive pairs each."""
    nodes, edges, current, index = [node("start", "trigger.manual")], [], "start", 0
    names = [f"p{i}" for i in range(ports)]
    while len(nodes) < count:
        router, join = f"route{index}", f"join{index}"
        nodes.append(node(router, "router", {"branches": [{"port": p, "when": "{{ inputs.x }}"} for p in names]}))
        edges.append(edge(current, router))
        for port in [*names, "default"]:
            writer = f"w{index}_{port}"
            nodes.append(setter(writer, reply=port))
            edges += [edge(router, writer, port), edge(writer, join)]
        nodes.append(node(join, "join", {"mode": "any"}))
        current, index = join, index + 1
    return flow_doc(nodes, edges)


def approval_spine(count: int) -> dict[str, Any]:
    """Approvals in a row: rejected writes `reply` and ends, approved writes it and goes on.

    Topological order visits the spine first, so each rejected writer comes after writers far above it.
    """
    nodes, edges, current, index = [node("start", "trigger.manual")], [], "start", 0
    while len(nodes) < count:
        ask, no, yes, end = f"ask{index}", f"no{index}", f"yes{index}", f"end{index}"
        nodes += [node(ask, "approval", {"timeout": "1h"}), setter(no, reply="no"), node(end, "terminal")]
        nodes.append(setter(yes, reply="yes"))
        edges += [edge(current, ask), edge(ask, no, "rejected"), edge(no, end), edge(ask, yes, "approved")]
        current, index = yes, index + 1
    return flow_doc(nodes, edges)


def approval_diamond_spine(count: int, approved_first: bool) -> dict[str, Any]:
    """Approvals in a row, each rejected branch writing `reply`, each approved one a parallel diamond.

    The diamonds put many forks above every writer; the edge order decides whether topological order visits a
    rejected writer before or after the spine below it.
    """
    nodes, edges, current, index = [node("start", "trigger.manual")], [], "start", 0
    while len(nodes) < count:
        ask, no, yes, left, right, join = (f"{part}{index}" for part in ("ask", "no", "yes", "left", "right", "join"))
        nodes += [node(ask, "approval", {"timeout": "1h"}), setter(no, reply="no"), node(f"end{index}", "terminal")]
        nodes += [setter(yes, reply="yes"), setter(left, left="1"), setter(right, right="1"), node(join, "join")]
        rejected, approved = edge(ask, no, "rejected"), edge(ask, yes, "approved")
        edges += [edge(current, ask), *((approved, rejected) if approved_first else (rejected, approved))]
        edges += [edge(no, f"end{index}"), edge(yes, left), edge(yes, right), edge(left, join), edge(right, join)]
        current, index = join, index + 1
    return flow_doc(nodes, edges)


def fan_under_approval(count: int, reduced: bool) -> dict[str, Any]:
    """One approval, then a fork into `count` parallel writers of `reply` and a join (reducing it or not)."""
    join_config = {"mode": "all", "reduce": {"reply": "append"}} if reduced else {"mode": "all"}
    nodes = [node("start", "trigger.manual"), node("ask", "approval", {"timeout": "1h"}), setter("go", go="1")]
    nodes.append(node("join", "join", join_config))
    edges = [edge("start", "ask"), edge("ask", "go", "approved"), edge("ask", "join", "rejected")]
    for index in range(count):
        nodes.append(setter(f"w{index}", reply=str(index)))
        edges += [edge("go", f"w{index}"), edge(f"w{index}", "join")]
    return flow_doc(nodes, edges)


def lattice(count: int, width: int = 10, routers: bool = False) -> dict[str, Any]:
    """Rows of `width` writers of `reply`, each fed by two of the row above: diamonds everywhere.

    With `routers`, the first node of each row is a router sending its two edges down different ports.
    """
    nodes, edges = [node("start", "trigger.manual")], []
    for row in range(count // width):
        for column in range(width):
            node_id = f"n{row}_{column}"
            if routers and column == 0:
                nodes.append(node(node_id, "router", {"branches": [{"port": "a", "when": "{{ inputs.x }}"}]}))
            else:
                nodes.append(setter(node_id, reply="x"))
            if row == 0:
                edges.append(edge("start", node_id))
                continue
            for source_column in (column, (column + 1) % width):
                source = f"n{row - 1}_{source_column}"
                port = None
                if routers and source_column == 0:
                    port = "a" if column == 0 else "default"
                edges.append(edge(source, node_id, port))
    return flow_doc(nodes, edges)


HOSTILE_SHAPES: dict[str, Callable[[int], dict[str, Any]]] = {
    "wide_routers": wide_routers,
    "approval_spine": approval_spine,
    "approval_diamonds": lambda count: approval_diamond_spine(count, approved_first=False),
    "approval_diamonds_approved_first": lambda count: approval_diamond_spine(count, approved_first=True),
    "fan_reduced": lambda count: fan_under_approval(count, reduced=True),
    "fan": lambda count: fan_under_approval(count, reduced=False),
    "lattice": lattice,
    "lattice_routers": lambda count: lattice(count, routers=True),
}
