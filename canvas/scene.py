"""The scene: draws a FlowDocument from its signals and turns mouse gestures into document edits."""

from __future__ import annotations

from PySide6.QtCore import QObject, QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QPixmapCache, QTransform
from PySide6.QtWidgets import QGraphicsItem, QGraphicsScene, QGraphicsSceneMouseEvent

from canvas.document import FlowDocument
from canvas.geometry import PORT_HIT_RADIUS
from canvas.items import EdgeItem, NodeItem, PortItem, WireItem
from canvas.theme import CanvasTheme, theme_notifier
from engine.flow import Edge
from engine.validation import Diagnostic

SCENE_EXTENT = 100_000.0
# Qt's 10 MB default makes DeviceCoordinateCache thrash on big flows: 1,000 cached nodes need far more.
PIXMAP_CACHE_KB = 256 * 1024


class FlowScene(QGraphicsScene):
    """Items for one document. Signals: `wire_hint(str)` while wiring, `wire_dropped(node, port, QPointF)`."""

    wire_hint = Signal(str)
    selection_settled = Signal()
    wire_dropped = Signal(str, object, QPointF)

    def __init__(self, document: FlowDocument, parent: QObject | None = None) -> None:
        super().__init__(parent)
        if QPixmapCache.cacheLimit() < PIXMAP_CACHE_KB:
            QPixmapCache.setCacheLimit(PIXMAP_CACHE_KB)
        # Nodes move a lot (drags, layout, undo); a BSP index would be rebuilt on every move.
        self.setItemIndexMethod(QGraphicsScene.ItemIndexMethod.NoIndex)
        self.setSceneRect(QRectF(-SCENE_EXTENT, -SCENE_EXTENT, 2 * SCENE_EXTENT, 2 * SCENE_EXTENT))
        self.document = document
        self.snap_to_grid = False
        self.applying_model = False
        self.node_items: dict[str, NodeItem] = {}
        self.edge_items: dict[int, EdgeItem] = {}
        self._edges_at_node: dict[str, set[EdgeItem]] = {}
        self._wire: WireItem | None = None
        self._drag_start: dict[str, tuple[float, float]] = {}
        self._moving_batch: set[str] | None = None
        self.insert_hint: EdgeItem | None = None
        self._rerouting: EdgeItem | None = None
        self._orphan_edges: dict[int, Edge] = {}
        self.bulk_selecting = False
        self._build()
        document.node_added.connect(self._on_node_added)
        document.node_removed.connect(self._on_node_removed)
        document.node_changed.connect(self._on_node_changed)
        document.nodes_moved.connect(self._on_nodes_moved)
        document.edge_added.connect(self._on_edge_added)
        document.edge_removed.connect(self._on_edge_removed)
        document.diagnostics_changed.connect(self._on_diagnostics)
        theme_notifier().changed.connect(self._on_theme)

    # ----- building from the document --------------------------------------------------

    def _build(self) -> None:
        for node in self.document.flow_ref().nodes:
            if node.id not in self.node_items:
                self._add_node_item(node.id)
        for edge in self.document.flow_ref().edges:
            self._on_edge_added(edge)
        self._on_diagnostics(self.document.last_diagnostics())

    def _add_node_item(self, node_id: str) -> NodeItem | None:
        node = self.document.node(node_id)
        if node is None:
            return None
        item = NodeItem(node)
        item.setPos(QPointF(*node.position))
        self.addItem(item)
        self.node_items[node_id] = item
        return item

    def _on_node_added(self, node_id: str) -> None:
        if node_id not in self.node_items:
            self.applying_model = True
            try:
                self._add_node_item(node_id)
            finally:
                self.applying_model = False
            # Edges a broken file drew to this id before the node existed show up now.
            for edge in [e for e in self._orphan_edges.values() if node_id in (e.from_, e.to)]:
                self._on_edge_added(edge)

    def _on_node_removed(self, node_id: str) -> None:
        if self.document.node(node_id) is not None:
            return  # a duplicate id was removed; the survivor keeps the item
        item = self.node_items.pop(node_id, None)
        if item is not None:
            for edge_item in list(self._edges_at_node.get(node_id, ())):
                # Still in the flow (its edge_removed would have come first), so it waits for the node again.
                self._orphan_edges[id(edge_item.edge)] = edge_item.edge
                self._remove_edge_item(edge_item)
            self._edges_at_node.pop(node_id, None)
            self.removeItem(item)

    def _on_node_changed(self, node_id: str) -> None:
        item = self.node_items.get(node_id)
        node = self.document.node(node_id)
        if item is not None and node is not None:
            item.set_node(node)
            self.node_moved(node_id)

    def _on_nodes_moved(self, node_ids: list[str]) -> None:
        self.applying_model = True
        self._moving_batch = set()
        try:
            for node_id in node_ids:
                item = self.node_items.get(node_id)
                node = self.document.node(node_id)
                if item is None or node is None:
                    continue
                item.node = node
                target = QPointF(*node.position)
                if item.pos() != target:
                    item.setPos(target)
                self._moving_batch.add(node_id)
        finally:
            moved, self._moving_batch = self._moving_batch, None
            self.applying_model = False
        self._flush_moved(moved)

    def _on_edge_added(self, edge: Edge) -> None:
        source = self.node_items.get(edge.from_)
        target = self.node_items.get(edge.to)
        if id(edge) in self.edge_items:
            return
        if source is None or target is None:
            self._orphan_edges[id(edge)] = edge  # drawn once both its nodes exist
            return
        self._orphan_edges.pop(id(edge), None)
        item = EdgeItem(edge, source, target)
        self.addItem(item)
        self.edge_items[id(edge)] = item
        self._edges_at_node.setdefault(edge.from_, set()).add(item)
        self._edges_at_node.setdefault(edge.to, set()).add(item)

    def _on_edge_removed(self, edge: Edge) -> None:
        self._orphan_edges.pop(id(edge), None)
        item = self.edge_items.get(id(edge))
        if item is not None:
            self._remove_edge_item(item)

    def _remove_edge_item(self, item: EdgeItem) -> None:
        self.edge_items.pop(id(item.edge), None)
        for end in (item.edge.from_, item.edge.to):
            self._edges_at_node.get(end, set()).discard(item)
        if item.scene() is self:
            self.removeItem(item)

    def _on_diagnostics(self, diagnostics: list[Diagnostic]) -> None:
        by_node: dict[str, list[Diagnostic]] = {}
        for diagnostic in diagnostics:
            if diagnostic.node is not None:
                by_node.setdefault(diagnostic.node, []).append(diagnostic)
        for node_id, item in self.node_items.items():
            item.set_diagnostics(by_node.get(node_id, []))

    def _on_theme(self, _theme: CanvasTheme) -> None:
        for item in self.node_items.values():
            item.set_node(item.node)
        for edge_item in self.edge_items.values():
            edge_item.restyle()
        self.update()

    def node_moved(self, node_id: str) -> None:
        """Re-anchor the edges at `node_id` (called by the node item as it moves)."""
        if self._moving_batch is not None:
            self._moving_batch.add(node_id)
            return
        for item in self._edges_at_node.get(node_id, ()):
            item.update_path()

    def _flush_moved(self, node_ids: set[str]) -> None:
        # An edge between two dragged nodes is recomputed once per frame, not once per end.
        edges: set[EdgeItem] = set()
        for node_id in node_ids:
            edges.update(self._edges_at_node.get(node_id, ()))
        for item in edges:
            item.update_path()

    # ----- queries -------------------------------------------------------------------

    def edge_item(self, edge: Edge) -> EdgeItem | None:
        return self.edge_items.get(id(edge))

    def selected_node_ids(self) -> list[str]:
        """Selected nodes in document order."""
        selected = {item.node_id for item in self.selectedItems() if isinstance(item, NodeItem)}
        return [n.id for n in self.document.flow_ref().nodes if n.id in selected]

    def selected_edges(self) -> list[Edge]:
        return [item.edge for item in self.selectedItems() if isinstance(item, EdgeItem)]

    def node_at(self, point: QPointF) -> NodeItem | None:
        for item in self.items(
            point, Qt.ItemSelectionMode.IntersectsItemShape, Qt.SortOrder.DescendingOrder, QTransform()
        ):
            if isinstance(item, NodeItem):
                return item
            if isinstance(item, PortItem):
                return item.node_item
        return None

    def output_port_at(self, point: QPointF) -> PortItem | None:
        """The output port under `point`, if any."""
        node = self.node_at(point)
        candidates = node.port_items if node is not None else []
        if node is None:
            # Port circles stick out of the node's right edge.
            nearby = self.node_at(point - QPointF(PORT_HIT_RADIUS, 0))
            candidates = nearby.port_items if nearby is not None else []
        for port in candidates:
            if port.contains(port.mapFromScene(point)):
                return port
        return None

    def edge_at(self, point: QPointF, exclude_node: str | None = None) -> EdgeItem | None:
        area = QRectF(point.x() - 6, point.y() - 6, 12, 12)
        for item in self.items(
            area, Qt.ItemSelectionMode.IntersectsItemShape, Qt.SortOrder.DescendingOrder, QTransform()
        ):
            if isinstance(item, EdgeItem) and exclude_node not in (item.edge.from_, item.edge.to):
                return item
        return None

    def nodes_bounding_rect(self, node_ids: list[str] | None = None) -> QRectF:
        rect = QRectF()
        for node_id, item in self.node_items.items():
            if node_ids is None or node_id in node_ids:
                rect = rect.united(item.sceneBoundingRect())
        return rect

    # ----- wiring and dragging -----------------------------------------------------------

    def mousePressEvent(self, event: QGraphicsSceneMouseEvent) -> None:
        if event.button() == Qt.MouseButton.LeftButton:
            for item in self.items(
                event.scenePos(), Qt.ItemSelectionMode.IntersectsItemShape, Qt.SortOrder.DescendingOrder, QTransform()
            ):
                if isinstance(item, PortItem) and item.is_output:
                    self.start_wire(item.node_item, item.port)
                    event.accept()
                    return
                if isinstance(item, PortItem) and self.pick_up_edge(item.node_id) is not None:
                    event.accept()
                    return
                if isinstance(item, NodeItem):
                    break
        super().mousePressEvent(event)
        if event.button() == Qt.MouseButton.LeftButton:
            self._drag_start = {
                item.node_id: (item.pos().x(), item.pos().y())
                for item in self.selectedItems()
                if isinstance(item, NodeItem)
            }

    def mouseMoveEvent(self, event: QGraphicsSceneMouseEvent) -> None:
        if self._wire is not None:
            self.move_wire(event.scenePos())
            event.accept()
            return
        self._moving_batch = set()
        try:
            super().mouseMoveEvent(event)
        finally:
            moved, self._moving_batch = self._moving_batch, None
        if moved:
            self._flush_moved(moved)
            self._show_insert_hint(moved)

    def _loose_dragged_node(self, moved: set[str]) -> NodeItem | None:
        """The one node being dragged when it has no edges yet (so dropping it on an edge inserts it)."""
        if len(self._drag_start) != 1 or len(moved) != 1:
            return None
        (node_id,) = moved
        if node_id not in self._drag_start or self.document.edges_of(node_id):
            return None
        return self.node_items.get(node_id)

    def _show_insert_hint(self, moved: set[str]) -> None:
        item = self._loose_dragged_node(moved)
        target = None
        if item is not None:
            target = self.edge_at(item.mapToScene(item.node_rect().center()), exclude_node=item.node_id)
        if target is not self.insert_hint:
            if self.insert_hint is not None:
                self.insert_hint.set_insert_hint(False)
            self.insert_hint = target
            if target is not None:
                target.set_insert_hint(True)
                self.wire_hint.emit(f'release to insert "{item.node.title if item else ""}" into this edge')

    def mouseReleaseEvent(self, event: QGraphicsSceneMouseEvent) -> None:
        if self._wire is not None and event.button() == Qt.MouseButton.LeftButton:
            self.finish_wire(event.scenePos())
            event.accept()
            return
        super().mouseReleaseEvent(event)
        if event.button() == Qt.MouseButton.LeftButton and self._drag_start:
            self._commit_drag()

    def _commit_drag(self) -> None:
        if self.insert_hint is not None:
            self.insert_hint.set_insert_hint(False)
            self.insert_hint = None
        start, self._drag_start = self._drag_start, {}
        moved = {
            node_id: (item.pos().x(), item.pos().y())
            for node_id in start
            if (item := self.node_items.get(node_id)) is not None and (item.pos().x(), item.pos().y()) != start[node_id]
        }
        if not moved:
            return
        old = {node_id: self.document.positions([node_id])[node_id] for node_id in moved}
        edge_under = None
        if len(moved) == 1:
            (node_id,) = moved
            if not self.document.edges_of(node_id):
                item = self.node_items[node_id]
                edge_under = self.edge_at(item.sceneBoundingRect().center(), exclude_node=node_id)
                edge_under = edge_under or self.edge_at(
                    item.mapToScene(item.node_rect().center()), exclude_node=node_id
                )
        if edge_under is None:
            self.document.move_nodes(moved, old=old)
            return
        stack = self.document.undo_stack
        stack.beginMacro("Move and insert on edge")
        self.document.move_nodes(moved, old=old)
        self.document.insert_on_edge(next(iter(moved)), edge_under.edge)
        stack.endMacro()

    def start_wire(self, source: NodeItem, port: str | None) -> WireItem:
        """Begin dragging a new connection from `source`'s output `port`."""
        self.cancel_wire()
        self._wire = WireItem(source, port)
        self.addItem(self._wire)
        return self._wire

    def pick_up_edge(self, node_id: str) -> WireItem | None:
        """Detach the newest edge into `node_id` onto the mouse, to drop it on another node or on nothing."""
        incoming = [e for e in self.document.flow_ref().edges if e.to == node_id and id(e) in self.edge_items]
        if not incoming:
            return None
        edge_item = self.edge_items[id(incoming[-1])]
        wire = self.start_wire(edge_item.source, edge_item.port_name())
        self._rerouting = edge_item
        edge_item.setVisible(False)
        return wire

    def move_wire(self, point: QPointF) -> str | None:
        """Follow the mouse; returns the refusal reason for the node under it, if any."""
        wire = self._wire
        if wire is None:
            return None
        target = self.node_at(point)
        refusal = None
        moving = self._rerouting
        if target is not None and not (moving is not None and target is moving.target):
            refusal = self.document.connection_refusal(wire.source.node_id, wire.port, target.node_id)
            if target is wire.source:
                refusal = refusal or "a node cannot connect to itself"
        wire.move_to(point, target, refusal)
        if moving is not None and target is None:
            hint = "release here to remove this edge"
        elif target is not None:
            hint = refusal or f'connect to "{target.node.title or target.node_id}"'
        else:
            hint = "release on a node to connect, or on empty canvas to add one"
        self.wire_hint.emit(hint)
        return refusal

    def finish_wire(self, point: QPointF) -> str | None:
        """Drop the wire: connect if allowed, offer quick-add on empty canvas; returns the refusal reason."""
        wire = self._wire
        if wire is None:
            return None
        refusal = self.move_wire(point)
        source, port, target = wire.source, wire.port, wire.target
        moving = self._rerouting
        self.cancel_wire()
        if moving is not None:
            return self._drop_rerouted(moving, target, refusal)
        if target is None:
            self.wire_dropped.emit(source.node_id, port, point)
            return None
        if refusal is None:
            refusal = self.document.connect(source.node_id, port, target.node_id)
        self.wire_hint.emit(refusal or "")
        return refusal

    def _drop_rerouted(self, moving: EdgeItem, target: NodeItem | None, refusal: str | None) -> str | None:
        edge = moving.edge
        if target is moving.target or refusal is not None:
            self.wire_hint.emit(refusal or "")
            return refusal
        stack = self.document.undo_stack
        if target is None:
            self.document.disconnect(edge)
            return None
        stack.beginMacro(f"Reconnect {edge.from_} → {target.node_id}")
        self.document.disconnect(edge)
        refusal = self.document.connect(edge.from_, moving.port_name(), target.node_id)
        stack.endMacro()
        if refusal is not None:
            self.document.retract_last()  # the old edge comes back rather than vanishing
        self.wire_hint.emit(refusal or "")
        return refusal

    def cancel_wire(self) -> None:
        if self._wire is not None:
            self.removeItem(self._wire)
            self._wire = None
        if self._rerouting is not None:
            if self._rerouting.scene() is self:
                self._rerouting.setVisible(True)
            self._rerouting = None

    def wiring(self) -> bool:
        return self._wire is not None

    def select_nodes(self, node_ids: list[str]) -> None:
        """Select exactly these nodes; listeners hear one selectionChanged, not one per node."""
        self.bulk_selecting = True
        try:
            self.clearSelection()
            for node_id in node_ids:
                item = self.node_items.get(node_id)
                if item is not None:
                    item.setSelected(True)
        finally:
            self.bulk_selecting = False
        self.selection_settled.emit()

    def items_of_type(self, kind: type[QGraphicsItem]) -> list[QGraphicsItem]:
        return [item for item in self.items() if isinstance(item, kind)]
