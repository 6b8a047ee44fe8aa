"""What the engine knows of one flow's triggers: its latest published version's trigger nodes, their on/off
settings, the trigger counters and the runs each trigger started (the app's Triggers view shows it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engine.runtime.handles import EngineHandles
    from engine.triggers.settings import TriggerSetting

# Light at import: the app loads this with its window, before the engine starts; the reads import their parts.


@dataclass(frozen=True)
class TriggerNode:
    node_id: str
    type: str
    title: str
    config: dict[str, Any]


@dataclass(frozen=True)
class TriggerStatus:
    """One read of the engine for a flow's latest published version (`version` None: never published)."""

    flow_id: str
    version: int | None
    flow_enabled: bool = True
    nodes: list[TriggerNode] = field(default_factory=list)
    settings: dict[str, TriggerSetting] = field(default_factory=dict)
    counters: dict[str, int] = field(default_factory=dict)
    fired: dict[str, int] = field(default_factory=dict)
    """Runs each trigger node started, by node id."""
    now: float = 0.0


def read_trigger_status(handles: EngineHandles, flow_id: str) -> TriggerStatus:
    """The triggers of `flow_id`'s latest published version, with their settings, counters and runs."""
    from engine.publish import UnknownFlowVersion, get_version
    from engine.store.reads import runs_by_trigger
    from engine.triggers.settings import SWITCHED_TYPES, counters, setting_of

    now = handles.clock.now()
    try:
        published, flow = get_version(handles.sql, flow_id)
    except UnknownFlowVersion:
        return TriggerStatus(flow_id, None, now=now)
    client, keys = handles.client, handles.keys
    nodes = [
        TriggerNode(n.id, n.type, n.title or n.id, dict(n.config)) for n in flow.nodes if n.type.startswith("trigger.")
    ]
    settings = {
        n.node_id: setting_of(client, keys, flow_id, n.node_id, n.type) for n in nodes if n.type in SWITCHED_TYPES
    }
    fired = runs_by_trigger(handles.sql, flow_id)
    return TriggerStatus(
        flow_id, int(published.version), bool(flow.enabled), nodes, settings, counters(client, keys), fired, now
    )
