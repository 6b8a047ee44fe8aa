"""A version comparison drawn on the canvas: what the draft changed against an older flow.

Added nodes and edges are outlined green, changed nodes amber, nodes that only moved grey; removed nodes
and edges are ghosts in red at their old place (dashed, not selectable, not part of the document). The
overlay recomputes itself whenever the document changes, so it always shows draft versus `before`.
"""

from __future__ import annotations

from dataclasses import dataclass

import shiboken6
from PySide6.QtCore import QObject, QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QBrush, QColor, QFont, QPainterPath, QPen
from PySide6.QtWidgets import (
    QGraphicsItem,
    QGraphicsPathItem,
    QGraphicsRectItem,
    QGraphicsSimpleTextItem,
)

from canvas.geometry import NODE_WIDTH, node_height, output_ports
from canvas.items import EDGE_Z, NodeItem, curve_between
from canvas.scene import FlowScene
from engine.flow import Flow, Node
from engine.flow_diff import FlowDiff, NodeChange, diff_flows

HALO_MARGIN = 6.0
GHOST_Z = EDGE_Z - 0.5


@dataclass(frozen=True)
class DiffColors:
    added: QColor
    removed: QColor
    changed: QColor
    moved: QColor


DIFF_COLORS = DiffColors(added=QColor("#1f9d55"), removed=QColor("#d0393e"), changed=QColor("#d98e04"),
                         moved=QColor("#7b8494"))


def status_color(status: str) -> QColor:
    return getattr(DIFF_COLORS, status, DIFF_COLORS.changed)


class _Halo(QGraphicsRectItem):
    """An outline behind a live node, following it as it moves (a child item)."""

    def __init__(self, item: NodeItem, status: str) -> None:
        super().__init__(item.node_rect().adjusted(-HALO_MARGIN, -HALO_MARGIN, HALO_MARGIN, HALO_MARGIN), item)
        self.status = status
        color = status_color(status)
        pen = QPen(color, 3.0, Qt.PenStyle.DashLine if status == "moved" else Qt.PenStyle.SolidLine)
        self.setPen(pen)
        fill = QColor(color)
        fill.setAlpha(40)
        self.setBrush(QBrush(fill))
        self.setFlag(QGraphicsItem.GraphicsItemFlag.ItemStacksBehindParent)
        self.setAcceptedMouseButtons(Qt.MouseButton.NoButton)
        self.setToolTip({"added": "Added since the compared version", "changed": "Changed since the compared version",
                         "moved": "Only moved since the compared version"}.get(status, status))


class _Ghost(QGraphicsRectItem):
    """A node of the older version that the draft no longer has."""

    def __init__(self, node: Node) -> None:
        height = node_height(len(output_ports(node)))
        super().__init__(QRectF(0, 0, NODE_WIDTH, height))
        self.node_id = node.id
        self.setPos(QPointF(*node.position))
        pen = QPen(DIFF_COLORS.removed, 2.0, Qt.PenStyle.DashLine)
        self.setPen(pen)
        fill = QColor(DIFF_COLORS.removed)
        fill.setAlpha(28)
        self.setBrush(QBrush(fill))
        self.setZValue(GHOST_Z)
        self.setAcceptedMouseButtons(Qt.MouseButton.NoButton)
        label = QGraphicsSimpleTextItem(f"{node.title or node.id}  (removed)", self)
        font = QFont()
        font.setPixelSize(13)
        font.setStrikeOut(True)
        label.setFont(font)
        label.setBrush(QBrush(DIFF_COLORS.removed))
        label.setPos(10, 5)
        self.setToolTip(f"Removed: {node.id} ({node.type})")


class DiffOverlay(QObject):
    """Draws `diff_flows(before, draft)` on `scene` until `clear()`. `changed` fires after each recompute."""

    changed = Signal()

    def __init__(self, scene: FlowScene, before: Flow, label: str) -> None:
        super().__init__(scene)
        self.scene = scene
        self.before = before
        self.label = label
        """What the draft is compared with, e.g. "v3"."""
        self.diff = FlowDiff()
        self._items: list[QGraphicsItem] = []
        document = scene.document
        for signal in (document.flow_changed, document.header_changed, document.nodes_moved):
            signal.connect(self.refresh)
        self.refresh()

    def clear(self) -> None:
        document = self.scene.document
        for signal in (document.flow_changed, document.header_changed, document.nodes_moved):
            try:
                signal.disconnect(self.refresh)
            except (RuntimeError, TypeError):
                pass
        self._remove_items()
        self.diff = FlowDiff()
        self.changed.emit()

    def _remove_items(self) -> None:
        for item in self._items:
            if not shiboken6.isValid(item):
                continue  # a halo deleted with its node
            scene = item.scene()
            if scene is not None:
                scene.removeItem(item)
        self._items = []

    def refresh(self, *_args: object) -> None:
        self._remove_items()
        self.diff = diff_flows(self.before, self.scene.document.flow_ref())
        ghosts: dict[str, _Ghost] = {}
        for change in self.diff.nodes:
            if change.status == "removed":
                old = self.before.node(change.node_id)
                if old is not None:
                    ghost = _Ghost(old)
                    self.scene.addItem(ghost)
                    ghosts[change.node_id] = ghost
                    self._items.append(ghost)
                continue
            item = self.scene.node_items.get(change.node_id)
            if item is not None:
                self._items.append(_Halo(item, change.status))
        for edge in self.diff.edges:
            path = self._edge_path(edge.from_, edge.to, ghosts)
            if path is None:
                continue
            line = QGraphicsPathItem(path)
            color = status_color(edge.status)
            line.setPen(QPen(color, 3.0, Qt.PenStyle.DashLine if edge.status == "removed" else Qt.PenStyle.SolidLine))
            line.setZValue(GHOST_Z if edge.status == "removed" else EDGE_Z + 0.1)
            line.setAcceptedMouseButtons(Qt.MouseButton.NoButton)
            self.scene.addItem(line)
            self._items.append(line)
        self.changed.emit()

    def _edge_path(self, source: str, target: str, ghosts: dict[str, _Ghost]) -> QPainterPath | None:
        def box(node_id: str) -> QRectF | None:
            if node_id in ghosts:
                return ghosts[node_id].sceneBoundingRect()
            item = self.scene.node_items.get(node_id)
            return item.mapRectToScene(item.node_rect()) if item is not None else None

        start, end = box(source), box(target)
        if start is None or end is None:
            return None
        return curve_between(QPointF(start.right(), start.center().y()), QPointF(end.left(), end.center().y()))

    def halo_status(self, node_id: str) -> str | None:
        """The status drawn around live node `node_id` (None: unchanged)."""
        item = self.scene.node_items.get(node_id)
        if item is None:
            return None
        halo = next((child for child in item.childItems() if isinstance(child, _Halo) and child in self._items), None)
        return halo.status if halo is not None else None

    def ghost_ids(self) -> list[str]:
        return [item.node_id for item in self._items if isinstance(item, _Ghost)]

    def edge_items(self) -> list[QGraphicsPathItem]:
        return [item for item in self._items if isinstance(item, QGraphicsPathItem)]

    def navigable(self) -> list[NodeChange]:
        """Node changes in reading order (left to right, then top to bottom), for stepping through."""
        def place(change: NodeChange) -> tuple[float, float]:
            node = self.scene.document.node(change.node_id) or self.before.node(change.node_id)
            return (node.position[0], node.position[1]) if node is not None else (0.0, 0.0)

        return sorted(self.diff.nodes, key=place)
