"""Publish-time checks of `flow.call` nodes against the store: `call_target_unknown` and `call_cycle`.

The file check (`engine.validation`) cannot see which flows are published; publishing can. The checks are a
pure function of the flow and a resolver of published versions, so `publish` runs them against its session
and `lockgate validate` against a store when it has one (as warnings there).
"""

from __future__ import annotations

from collections.abc import Callable

from engine.flow import Flow
from engine.validation import Diagnostic, Severity

FLOW_CALL = "flow.call"
Resolve = Callable[[str, int | None], Flow | None]
"""(flow id, version or None for the newest) -> that published flow, or None when it is not published."""


def _calls(flow: Flow) -> list[tuple[str, str, int | None]]:
    """(node id, called flow id, pinned version) of each `flow.call` node."""
    found = []
    for node in flow.nodes:
        if node.type == FLOW_CALL and isinstance(node.config.get("flow"), str):
            version = node.config.get("version")
            found.append((node.id, node.config["flow"], version if isinstance(version, int) else None))
    return found


def _path_back(start: str, target: str, version: int | None, root: str, resolve: Resolve) -> list[str] | None:
    """The chain of flow ids from `target` that calls back to `root`, or None."""
    stack: list[tuple[str, int | None, list[str]]] = [(target, version, [start, target])]
    seen: set[tuple[str, int | None]] = set()
    while stack:
        flow_id, pinned, path = stack.pop()
        if flow_id == root:
            return path
        if (flow_id, pinned) in seen:
            continue
        seen.add((flow_id, pinned))
        called = resolve(flow_id, pinned)
        if called is None:
            continue
        for _node, next_id, next_version in _calls(called):
            stack.append((next_id, next_version, [*path, next_id]))
    return None


def call_diagnostics(flow: Flow, resolve: Resolve, unknown_severity: Severity = "error") -> list[Diagnostic]:
    """`call_target_unknown` for each call of a flow (or version) that is not published, `call_cycle` for each
    call that would come back to `flow` (itself included)."""
    found: list[Diagnostic] = []
    for node_id, target, version in _calls(flow):
        if target != flow.id and resolve(target, version) is None:
            what = f'version {version} of flow "{target}"' if version is not None else f'flow "{target}"'
            found.append(Diagnostic("call_target_unknown", unknown_severity, node_id,
                                    f"{what} is not published, so this call could start nothing; publish it "
                                    "first or pick a published flow"))
            continue
        path = _path_back(flow.id, target, version, flow.id, resolve) if target != flow.id else [flow.id, flow.id]
        if path is not None:
            found.append(Diagnostic("call_cycle", "error", node_id,
                                    f"flows would call each other in a cycle: {' -> '.join(path)}; a child run "
                                    "would start its own caller again. Remove one of the calls"))
    return found
