"""The app tests' approval flow: a manual trigger, one approval node, a terminal on each of its ports."""

from __future__ import annotations

from typing import Any


def approval_flow(flow_id: str, name: str, config: dict[str, Any], *, node: str = "ask", title: str = "Ask",
                  done: str = "Done", declined: str = "Declined",
                  inputs: dict[str, Any] | None = None) -> dict[str, Any]:
    """start → `node` (an approval with `config`, titled `title`) → `done` when approved, `declined` when rejected."""
    document: dict[str, Any] = {"format": "lockgate.flow/1", "id": flow_id, "name": name}
    if inputs is not None:
        document["inputs"] = inputs
    document["nodes"] = [
        {"id": "start", "type": "trigger.manual", "title": "Start", "position": [0, 0], "config": {}},
        {"id": node, "type": "approval", "title": title, "position": [220, 0], "config": config},
        {"id": "done", "type": "terminal", "title": done, "position": [440, -60], "config": {}},
        {"id": "declined", "type": "terminal", "title": declined, "position": [440, 60], "config": {}},
    ]
    document["edges"] = [
        {"from": "start", "to": node},
        {"from": node, "to": "done", "port": "approved"},
        {"from": node, "to": "declined", "port": "rejected"},
    ]
    return document
