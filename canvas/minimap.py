"""A corner overview of the whole flow with the visible area; click or drag to move there."""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import QPointF, QRectF, Qt, QTimer
from PySide6.QtGui import QColor, QMouseEvent, QPainter, QPaintEvent, QPen, QPixmap
from PySide6.QtWidgets import QWidget

from canvas.geometry import NODE_WIDTH, node_height, output_ports
from canvas.icons import type_color
from canvas.theme import current_theme

if TYPE_CHECKING:
    from canvas.view import FlowView

MINIMAP_SIZE = (200, 130)
MARGIN = 8


class Minimap(QWidget):
    """Draws node boxes into a cached pixmap (rebuilt after edits settle) plus the viewport frame."""

    def __init__(self, view: FlowView) -> None:
        super().__init__(view)
        self.view = view
        self.setFixedSize(*MINIMAP_SIZE)
        self.setCursor(Qt.CursorShape.PointingHandCursor)
        self.setToolTip("Overview: click or drag to move the view")
        self._pixmap: QPixmap | None = None
        self._world = QRectF()
        self._rebuild_timer = QTimer(self)
        self._rebuild_timer.setSingleShot(True)
        self._rebuild_timer.setInterval(120)
        self._rebuild_timer.timeout.connect(self.rebuild)
        view.document.flow_changed.connect(self._rebuild_timer.start)
        self.rebuild()

    def _scale(self) -> tuple[float, float, float]:
        world = self._world
        scale = min(
            (self.width() - 2 * MARGIN) / max(world.width(), 1), (self.height() - 2 * MARGIN) / max(world.height(), 1)
        )
        offset_x = MARGIN + ((self.width() - 2 * MARGIN) - world.width() * scale) / 2 - world.left() * scale
        offset_y = MARGIN + ((self.height() - 2 * MARGIN) - world.height() * scale) / 2 - world.top() * scale
        return scale, offset_x, offset_y

    def rebuild(self) -> None:
        """Redraw the node boxes (after edits)."""
        nodes = self.view.document.flow_ref().nodes
        world = QRectF()
        for node in nodes:
            world = world.united(
                QRectF(node.position[0], node.position[1], NODE_WIDTH, node_height(len(output_ports(node))))
            )
        self._world = world.adjusted(-200, -200, 200, 200) if not world.isNull() else QRectF(-500, -300, 1000, 600)
        pixmap = QPixmap(self.size())
        pixmap.fill(Qt.GlobalColor.transparent)
        painter = QPainter(pixmap)
        theme = current_theme()
        painter.setPen(QPen(theme.node_border, 1))
        painter.setBrush(theme.minimap_background)
        painter.drawRoundedRect(QRectF(0.5, 0.5, self.width() - 1, self.height() - 1), 6, 6)
        scale, ox, oy = self._scale()
        painter.setPen(Qt.PenStyle.NoPen)
        for node in nodes:
            height = node_height(len(output_ports(node)))
            box = QRectF(
                node.position[0] * scale + ox,
                node.position[1] * scale + oy,
                max(NODE_WIDTH * scale, 2),
                max(height * scale, 2),
            )
            painter.fillRect(box, type_color(node.type))
        painter.end()
        self._pixmap = pixmap
        self.update()

    def paintEvent(self, event: QPaintEvent) -> None:
        painter = QPainter(self)
        if self._pixmap is not None:
            painter.drawPixmap(0, 0, self._pixmap)
        scale, ox, oy = self._scale()
        visible = self.view.mapToScene(self.view.viewport().rect()).boundingRect()
        frame = QRectF(
            visible.left() * scale + ox, visible.top() * scale + oy, visible.width() * scale, visible.height() * scale
        )
        frame = frame.intersected(QRectF(1, 1, self.width() - 2, self.height() - 2))
        colour = QColor(current_theme().node_selected)
        painter.setPen(QPen(colour, 1.5))
        colour.setAlpha(30)
        painter.setBrush(colour)
        painter.drawRect(frame)

    def scene_point(self, widget_point: QPointF) -> QPointF:
        scale, ox, oy = self._scale()
        return QPointF((widget_point.x() - ox) / scale, (widget_point.y() - oy) / scale)

    def mousePressEvent(self, event: QMouseEvent) -> None:
        self.view.centerOn(self.scene_point(event.position()))
        event.accept()

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        if event.buttons() & Qt.MouseButton.LeftButton:
            self.view.centerOn(self.scene_point(event.position()))
        event.accept()
