"""Builders for small flow documents, so each test shows only the part it is about."""

from __future__ import annotations

import itertools
from typing import Any

from engine.validation import Diagnostic, validate

MODEL_CONFIG = {"provider": "local", "model": "sim-small", "prompt": "Hi", "output_key": "answer"}


def node(node_id: str, node_type: str, config: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    """A node document with an empty config unless given."""
    return {"id": node_id, "type": node_type, "config": dict(config or {}), **extra}


def edge(source: str, target: str, port: str | None = None) -> dict[str, Any]:
    """An edge document; `port` left out when None."""
    found: dict[str, Any] = {"from": source, "to": target}
    if port is not None:
        found["port"] = port
    return found


def chain(*node_ids: str) -> list[dict[str, Any]]:
    """Edges linking the nodes one after another through their single output."""
    return [edge(a, b) for a, b in itertools.pairwise(node_ids)]


def flow_doc(nodes: list[dict[str, Any]], edges: list[dict[str, Any]], **top: Any) -> dict[str, Any]:
    """A `lockgate.flow/1` document around `nodes` and `edges`."""
    return {"format": "lockgate.flow/1", "id": "test-flow", "name": "Test", **top, "nodes": nodes, "edges": edges}


def diagnose(nodes: list[dict[str, Any]], edges: list[dict[str, Any]], **top: Any) -> list[Diagnostic]:
    """Validation of a flow built from the parts."""
    return validate(flow_doc(nodes, edges, **top))


def codes(diagnostics: list[Diagnostic]) -> list[str]:
    return [d.code for d in diagnostics]


def of_code(diagnostics: list[Diagnostic], code: str) -> list[Diagnostic]:
    return [d for d in diagnostics if d.code == code]


def model(node_id: str = "model", **config: Any) -> dict[str, Any]:
    """An ai.model node with a complete config."""
    return node(node_id, "ai.model", {**MODEL_CONFIG, **config})


def reserve(node_id: str, target: str) -> dict[str, Any]:
    return node(node_id, "budget.reserve", {"for": target, "amount": 0.5})


def queue(node_id: str, delay: Any = "1h") -> dict[str, Any]:
    return node(node_id, "queue", {"delay": delay})


def approval(node_id: str, timeout: Any = "24h") -> dict[str, Any]:
    return node(node_id, "approval", {"timeout": timeout})


def start(node_id: str = "start") -> dict[str, Any]:
    return node(node_id, "trigger.manual")


def end(node_id: str = "done") -> dict[str, Any]:
    return node(node_id, "terminal")


def setter(node_id: str, **values: str) -> dict[str, Any]:
    return node(node_id, "set", {"values": values})
