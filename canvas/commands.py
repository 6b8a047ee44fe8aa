"""Undoable edits: each command's redo() calls one document primitive and undo() its inverse.

Commands never touch items; the scene redraws from the document's signals, so
undo is complete by construction. Compound edits hold their steps in order and
undo them in reverse, which restores list positions exactly.
"""

from __future__ import annotations

import copy
import weakref
from typing import TYPE_CHECKING

from PySide6.QtGui import QUndoCommand

from engine.flow import Edge, Node

if TYPE_CHECKING:
    from canvas.document import FlowDocument
    from canvas.flow_header import FlowHeader

Position = tuple[float, float]


class DocumentCommand(QUndoCommand):
    """A command on one document, which it holds weakly.

    The document's undo stack owns its commands through Qt; a strong reference back makes a cycle that Python's
    cyclic GC sees only in part, and collecting it (at the latest at interpreter exit) segfaults. The stack
    never outlives its document, so a command never finds the reference dead while it is undone or redone."""

    _document_ref: weakref.ref[FlowDocument]

    @property
    def document(self) -> FlowDocument:
        document = self._document_ref()
        if document is None:
            raise RuntimeError(f"{type(self).__name__}: its document was deleted; commands live in its undo stack")
        return document

    @document.setter
    def document(self, document: FlowDocument) -> None:
        self._document_ref = weakref.ref(document)


class AddNodeCommand(DocumentCommand):
    """Insert one node at a list index (the end by default)."""

    def __init__(self, document: FlowDocument, node: Node, index: int | None = None, text: str = "") -> None:
        super().__init__(text or f"Add {node.title or node.id}")
        self.document = document
        self.node = node
        self.index = len(document.flow_ref().nodes) if index is None else index

    def redo(self) -> None:
        self.document.insert_node_at(self.index, self.node)

    def undo(self) -> None:
        self.document.remove_node_at(self.index)


class RemoveNodeCommand(DocumentCommand):
    """Remove the node at a list index; undo puts the same node back at that index."""

    def __init__(self, document: FlowDocument, node_id: str) -> None:
        super().__init__(f"Remove {node_id}")
        self.document = document
        self.index = document.node_index(node_id)
        self.node = document.flow_ref().nodes[self.index]

    def redo(self) -> None:
        self.document.remove_node_at(self.index)

    def undo(self) -> None:
        self.document.insert_node_at(self.index, self.node)


class AddEdgeCommand(DocumentCommand):
    """Append (or insert) one edge."""

    def __init__(self, document: FlowDocument, edge: Edge, index: int | None = None, text: str = "") -> None:
        super().__init__(text or f"Connect {edge.from_} → {edge.to}")
        self.document = document
        self.edge = edge
        self.index = len(document.flow_ref().edges) if index is None else index

    def redo(self) -> None:
        self.document.insert_edge_at(self.index, self.edge)

    def undo(self) -> None:
        self.document.remove_edge_at(self.index)


class RemoveEdgeCommand(DocumentCommand):
    """Remove the edge at a list index; undo restores it there."""

    def __init__(self, document: FlowDocument, index: int, text: str = "") -> None:
        edge = document.flow_ref().edges[index]
        super().__init__(text or f"Disconnect {edge.from_} → {edge.to}")
        self.document = document
        self.index = index
        self.edge = edge

    def redo(self) -> None:
        self.document.remove_edge_at(self.index)

    def undo(self) -> None:
        self.document.insert_edge_at(self.index, self.edge)


class MoveNodesCommand(DocumentCommand):
    """Set positions of many nodes as one step (a drag, or auto-layout)."""

    def __init__(
        self,
        document: FlowDocument,
        new_positions: dict[str, Position],
        text: str = "",
        old: dict[str, Position] | None = None,
    ) -> None:
        super().__init__(text or (f"Move {len(new_positions)} nodes" if len(new_positions) != 1 else "Move node"))
        self.document = document
        self.new_positions = dict(new_positions)
        self.old_positions = old if old is not None else document.positions(list(new_positions))

    def redo(self) -> None:
        self.document.set_positions(self.new_positions)

    def undo(self) -> None:
        self.document.set_positions(self.old_positions)


class ReplaceNodeCommand(DocumentCommand):
    """Swap a node for an edited copy (title, config, retry, flags); undo swaps the original back."""

    def __init__(self, document: FlowDocument, new_node: Node, text: str) -> None:
        super().__init__(text)
        self.document = document
        self.old_node = document.flow_ref().nodes[document.node_index(new_node.id)]
        self.new_node = new_node

    def redo(self) -> None:
        self.document.replace_node(self.new_node)

    def undo(self) -> None:
        self.document.replace_node(self.old_node)


class RenameNodeCommand(ReplaceNodeCommand):
    def __init__(self, document: FlowDocument, node_id: str, title: str) -> None:
        node = document.node(node_id)
        assert node is not None
        super().__init__(document, node.model_copy(update={"title": title}), f"Rename {node_id}")


class SetConfigFieldCommand(ReplaceNodeCommand):
    """Set (or with value None remove) one top-level config key."""

    def __init__(self, document: FlowDocument, node_id: str, key: str, value: object) -> None:
        node = document.node(node_id)
        assert node is not None
        config = dict(node.config)
        if value is None:
            config.pop(key, None)
        else:
            # A copy, so a caller that later changes its list or dict cannot edit the flow behind the stack.
            config[key] = copy.deepcopy(value)
        super().__init__(document, node.model_copy(update={"config": config}), f"Change {node_id}.{key}")


class SetNodeFieldCommand(ReplaceNodeCommand):
    """Set retry / continue_on_fail / idempotent on a node."""

    def __init__(self, document: FlowDocument, node_id: str, field: str, value: object) -> None:
        node = document.node(node_id)
        assert node is not None
        # Validating only the one field turns a retry dict into a RetryPolicy and rejects bad values here,
        # while the node's other fields keep exactly what the file said.
        checked = Node.__pydantic_validator__.validate_assignment(node.model_copy(), field, value)
        super().__init__(
            document, node.model_copy(update={field: getattr(checked, field)}), f"Change {node_id}.{field}"
        )


class SetHeaderCommand(DocumentCommand):
    """Swap the flow's own properties (id, name, description, enabled, inputs, settings) for edited ones."""

    def __init__(self, document: FlowDocument, header: FlowHeader, id_follows_name: bool, text: str) -> None:
        super().__init__(text)
        self.document = document
        self.old = (document.header(), document.id_follows_name)
        self.new = (header, id_follows_name)

    def redo(self) -> None:
        self.document.apply_header(*self.new)

    def undo(self) -> None:
        self.document.apply_header(*self.old)


class CompoundCommand(QUndoCommand):
    """Several steps as one undo entry; undo runs them backwards."""

    def __init__(self, text: str, steps: list[QUndoCommand] | None = None) -> None:
        super().__init__(text)
        self.steps: list[QUndoCommand] = list(steps or [])

    def redo(self) -> None:
        for step in self.steps:
            step.redo()

    def undo(self) -> None:
        for step in reversed(self.steps):
            step.undo()


class DeleteNodesCommand(CompoundCommand):
    """Delete nodes with every edge touching them, as one step."""

    def __init__(self, document: FlowDocument, node_ids: list[str]) -> None:
        doomed = set(node_ids)
        flow = document.flow_ref()
        super().__init__(f"Delete {len(doomed)} node" + ("s" if len(doomed) != 1 else ""))
        # Highest index first, so each recorded index is still right when undo reinserts in reverse.
        edge_indexes = [i for i, e in enumerate(flow.edges) if e.from_ in doomed or e.to in doomed]
        node_indexes = [i for i, n in enumerate(flow.nodes) if n.id in doomed]
        for index in reversed(edge_indexes):
            self.steps.append(_RemoveEdgeAt(document, index))
        for index in reversed(node_indexes):
            self.steps.append(_RemoveNodeAt(document, index))


class _RemoveEdgeAt(DocumentCommand):
    def __init__(self, document: FlowDocument, index: int) -> None:
        super().__init__()
        self.document = document
        self.index = index
        self.edge: Edge | None = None

    def redo(self) -> None:
        self.edge = self.document.remove_edge_at(self.index)

    def undo(self) -> None:
        assert self.edge is not None
        self.document.insert_edge_at(self.index, self.edge)


class _RemoveNodeAt(DocumentCommand):
    def __init__(self, document: FlowDocument, index: int) -> None:
        super().__init__()
        self.document = document
        self.index = index
        self.node: Node | None = None

    def redo(self) -> None:
        self.node = self.document.remove_node_at(self.index)

    def undo(self) -> None:
        assert self.node is not None
        self.document.insert_node_at(self.index, self.node)


class PasteCommand(CompoundCommand):
    """Add pasted nodes and their inner edges as one step."""

    def __init__(self, document: FlowDocument, nodes: list[Node], edges: list[Edge], text: str = "Paste") -> None:
        super().__init__(text)
        node_count = len(document.flow_ref().nodes)
        edge_count = len(document.flow_ref().edges)
        for offset, node in enumerate(nodes):
            self.steps.append(AddNodeCommand(document, node, node_count + offset))
        for offset, edge in enumerate(edges):
            self.steps.append(AddEdgeCommand(document, edge, edge_count + offset))


class AutoLayoutCommand(MoveNodesCommand):
    def __init__(self, document: FlowDocument, new_positions: dict[str, Position]) -> None:
        super().__init__(document, new_positions, "Auto-layout")


# The names the issue uses for the edge edits.
ConnectCommand = AddEdgeCommand
DisconnectCommand = RemoveEdgeCommand
