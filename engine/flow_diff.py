"""What changed between two flow documents, node by node and field by field.

A node is matched by its id. Its fields are compared as the saved file holds them (`flow_to_data`), so
the diff names exactly what a reviewer sees change in the file: `config.values.greeting`, `retry.max_attempts`.
A node whose only change is its position is `moved`, so layout can be told apart from behaviour.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from engine.flow import Edge, Flow, Node, edge_data, flow_to_data, node_data

ChangeKind = Literal["added", "removed", "changed"]
NodeStatus = Literal["added", "removed", "changed", "moved"]

_MISSING = object()


class FieldChange(BaseModel):
    """One value of the file that differs: `before`/`after` are absent when the key is added or removed."""

    model_config = ConfigDict(frozen=True)

    path: str
    kind: ChangeKind
    before: JsonValue = None
    after: JsonValue = None


class NodeChange(BaseModel):
    model_config = ConfigDict(frozen=True)

    node_id: str
    status: NodeStatus
    type: str
    title: str
    fields: list[FieldChange] = Field(default_factory=list)


class EdgeChange(BaseModel):
    model_config = ConfigDict(frozen=True, populate_by_name=True)

    from_: str = Field(alias="from")
    to: str
    port: str | None = None
    status: Literal["added", "removed"]


class FlowDiff(BaseModel):
    """Flow-level fields (name, inputs, settings…), then nodes in the order of the newer file, then edges."""

    model_config = ConfigDict(frozen=True)

    flow_fields: list[FieldChange] = Field(default_factory=list)
    nodes: list[NodeChange] = Field(default_factory=list)
    edges: list[EdgeChange] = Field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.flow_fields or self.nodes or self.edges)

    def node(self, node_id: str) -> NodeChange | None:
        for change in self.nodes:
            if change.node_id == node_id:
                return change
        return None


def _field_changes(before: object, after: object, path: str) -> list[FieldChange]:
    if isinstance(before, dict) and isinstance(after, dict):
        changes: list[FieldChange] = []
        for key in [*before, *(key for key in after if key not in before)]:
            inner = f"{path}.{key}" if path else key
            changes += _field_changes(before.get(key, _MISSING), after.get(key, _MISSING), inner)
        return changes
    if before is _MISSING:
        return [FieldChange(path=path, kind="added", after=after)]
    if after is _MISSING:
        return [FieldChange(path=path, kind="removed", before=before)]
    if before == after and type(before) is type(after):
        return []
    return [FieldChange(path=path, kind="changed", before=before, after=after)]


def _node_change(old: Node | None, new: Node | None) -> NodeChange | None:
    shown = new or old
    assert shown is not None
    if old is None:
        return NodeChange(node_id=shown.id, status="added", type=shown.type, title=shown.title)
    if new is None:
        return NodeChange(node_id=shown.id, status="removed", type=shown.type, title=shown.title)
    fields = _field_changes(node_data(old), node_data(new), "")
    if not fields:
        return None
    status: NodeStatus = "moved" if all(change.path == "position" for change in fields) else "changed"
    return NodeChange(node_id=new.id, status=status, type=new.type, title=new.title, fields=fields)


def _edge_key(edge: Edge) -> tuple[str, str, str | None]:
    return (edge.from_, edge.to, edge.port)


def diff_flows(before: Flow, after: Flow) -> FlowDiff:
    """The changes that turn `before` into `after`."""
    head_before = {key: value for key, value in flow_to_data(before).items() if key not in ("nodes", "edges")}
    head_after = {key: value for key, value in flow_to_data(after).items() if key not in ("nodes", "edges")}
    flow_fields = _field_changes(head_before, head_after, "")

    old_nodes = {node.id: node for node in before.nodes}
    new_nodes = {node.id: node for node in after.nodes}
    order = [node.id for node in after.nodes] + [node.id for node in before.nodes if node.id not in new_nodes]
    nodes = [change for node_id in order
             if (change := _node_change(old_nodes.get(node_id), new_nodes.get(node_id))) is not None]

    old_edges = {_edge_key(edge): edge for edge in before.edges}
    new_edges = {_edge_key(edge): edge for edge in after.edges}
    edges = [EdgeChange.model_validate({**edge_data(edge), "status": "added"})
             for key, edge in new_edges.items() if key not in old_edges]
    edges += [EdgeChange.model_validate({**edge_data(edge), "status": "removed"})
              for key, edge in old_edges.items() if key not in new_edges]
    return FlowDiff(flow_fields=flow_fields, nodes=nodes, edges=edges)
