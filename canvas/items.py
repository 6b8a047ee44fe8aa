"""Graphics items: nodes, their ports, edges and the wire being dragged.

Items mirror the document; they never edit it. Nodes paint through
DeviceCoordinateCache and drop text and ports below a zoom threshold, so a
1,000-node flow repaints from cached pixmaps.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QFont, QFontMetricsF, QPainter, QPainterPath, QPainterPathStroker, QPen
from PySide6.QtWidgets import (
    QGraphicsEllipseItem,
    QGraphicsItem,
    QGraphicsPathItem,
    QGraphicsRectItem,
    QGraphicsSimpleTextItem,
    QStyleOptionGraphicsItem,
    QWidget,
)

from canvas.geometry import (
    GRID_SIZE,
    HEADER_HEIGHT,
    NODE_WIDTH,
    PORT_HIT_RADIUS,
    PORT_RADIUS,
    PORT_ROW_HEIGHT,
    has_input,
    input_port_offset,
    node_height,
    output_port_offset,
    output_ports,
)
from canvas.icons import paint_type_icon, type_color
from canvas.summary import config_summary
from canvas.theme import current_theme, readable_on
from engine.catalog import node_type
from engine.flow import Edge, Node
from engine.validation import Diagnostic

# Below this scale a node is a coloured box: text would be unreadable and costs most of the paint.
DETAIL_ZOOM = 0.45
NODE_Z = 1.0
EDGE_Z = 0.0
WIRE_Z = 10.0
OVERLAY_ABOVE = 22.0
OVERLAY_BELOW = 20.0
# Short edges sit right next to the node's port label; only longer ones repeat it.
EDGE_LABEL_MIN_LENGTH = 420.0


def _font(pixels: float, bold: bool = False) -> QFont:
    font = QFont()
    font.setPixelSize(round(pixels))
    font.setBold(bold)
    return font


TITLE_FONT = _font(12.5, bold=True)
SUMMARY_FONT = _font(11)
PORT_FONT = _font(10.5)
BADGE_FONT = _font(10, bold=True)
MIN_TEXT_PX = 9.5
"""Smallest on-screen size of a node's text: zoomed out, its summary and port labels grow in scene units (and
elide sooner) instead of shrinking below this."""
SUMMARY_MAX_PX = 16.0
TITLE_MAX_PX = 20.0
MIN_TITLE_PX = 9.0
"""Titles are bold and say the most: a little smaller on screen before they grow, so fewer are cut short."""
MIN_TITLE_FIT_PX = 7.5
"""Zoomed out, a title too long for its node at MIN_TITLE_PX shrinks down to this on-screen size before it is cut
short: a whole title a little smaller reads better than a bigger one cut to "Ticket web…"."""
TITLE_LEFT = 31.0
"""Where the title starts in the header, after the type icon (scene units)."""
TITLE_ROOM = NODE_WIDTH - TITLE_LEFT - 9
"""The title's width in the header; it ends before the error badge's centre."""


def readable_font(font: QFont, zoom: float, largest: float, smallest_px: float = MIN_TEXT_PX) -> QFont:
    """`font` at least `smallest_px` on screen at `zoom` (capped at `largest` scene pixels so it fits its row)."""
    wanted = min(max(float(font.pixelSize()), smallest_px / max(zoom, 0.01)), largest)
    if round(wanted) == font.pixelSize():
        return font
    grown = QFont(font)
    grown.setPixelSize(round(wanted))
    return grown


def fitted_title(title: str, zoom: float) -> tuple[QFont, str]:
    """The font and text a node's `title` is drawn with at `zoom`: grown to at least MIN_TITLE_PX on screen when
    it fits TITLE_ROOM, else as large as fits (down to MIN_TITLE_FIT_PX on screen, never below TITLE_FONT), else
    cut short with "…" at that smallest size."""
    wanted = readable_font(TITLE_FONT, zoom, TITLE_MAX_PX, MIN_TITLE_PX)
    if QFontMetricsF(wanted).horizontalAdvance(title) <= TITLE_ROOM:
        return wanted, title
    smallest = max(TITLE_FONT.pixelSize(), min(wanted.pixelSize(), round(MIN_TITLE_FIT_PX / max(zoom, 0.01))))
    font = wanted
    for pixels in range(wanted.pixelSize() - 1, smallest - 1, -1):
        font = QFont(wanted)
        font.setPixelSize(pixels)
        if QFontMetricsF(font).horizontalAdvance(title) <= TITLE_ROOM:
            return font, title
    return font, QFontMetricsF(font).elidedText(title, Qt.TextElideMode.ElideRight, TITLE_ROOM)


class LiveState:
    """What live mode says about one node; plain data the node paints."""

    __slots__ = ("current", "mark", "mark_text", "on_path", "running", "waiting", "waiting_text")

    def __init__(self) -> None:
        self.running = 0
        self.waiting = 0
        self.waiting_text = ""
        self.on_path = False
        self.current = False
        self.mark = ""
        """On the selected run's path: "failed" (drawn red), "timed_out", or "" for neither."""
        self.mark_text = ""
        """The failure's error, or the label of a timeout."""

    def is_empty(self) -> bool:
        return not (self.running or self.waiting or self.on_path or self.current or self.mark)

    def label_below(self) -> str:
        """The line drawn under the node: a failure or timeout, else what the followed run waits on."""
        if self.mark == "failed":
            return f"failed: {self.mark_text}" if self.mark_text else "failed"
        if self.mark == "timed_out":
            return self.mark_text or "timed out"
        return self.waiting_text if self.current else ""


class PortItem(QGraphicsEllipseItem):
    """An invisible hit area over a node's port circle (the node paints the circle).

    Geometry comes from QGraphicsEllipseItem in C++, so full-scene repaints never call into Python for it.
    """

    def __init__(self, parent: NodeItem, port: str | None, is_output: bool, offset: tuple[float, float]) -> None:
        super().__init__(QRectF(-PORT_HIT_RADIUS, -PORT_HIT_RADIUS, 2 * PORT_HIT_RADIUS, 2 * PORT_HIT_RADIUS), parent)
        self.node_item = parent
        self.port = port
        self.is_output = is_output
        self.setPen(Qt.PenStyle.NoPen)
        self.setBrush(Qt.BrushStyle.NoBrush)
        self.setFlag(QGraphicsItem.GraphicsItemFlag.ItemHasNoContents, True)
        self.setPos(QPointF(*offset))
        # No per-item cursor: any item cursor makes Qt hit-test every item on every mouse move.
        if is_output:
            self.setToolTip(f'Output "{port}": drag to a node to connect')
        else:
            self.setToolTip("Input: drag from another node's output to here")

    @property
    def node_id(self) -> str:
        return self.node_item.node_id


class NodeItem(QGraphicsRectItem):
    """One node: header with icon and title, summary, port rows, badges and live overlay.

    The item's rect is its paint area (node plus overlay margins) so Qt answers boundingRect in C++;
    painting is Python but cached per zoom level (DeviceCoordinateCache).
    """

    def __init__(self, node: Node) -> None:
        super().__init__()
        self.setPen(Qt.PenStyle.NoPen)
        self.node_id = node.id
        self.node: Node = node
        self.ports: tuple[str, ...] = ()
        self.height = node_height(0)
        self.diagnostics: list[Diagnostic] = []
        self.live = LiveState()
        self.notice: tuple[str, str] = ("", "")
        """(short label drawn as a pill above the node, tooltip line), e.g. a disabled trigger; ("", "") for none."""
        self.quorum: tuple[str, str] = ("", "")
        """An approval's quorum progress: (badge text such as "2 of 3 approved", tooltip line); ("", "") for none."""
        self.port_items: list[PortItem] = []
        self.input_item: PortItem | None = None
        self._title_full = ""
        self._titles: dict[int, tuple[QFont, str]] = {}
        """The title's font and text per on-screen size (zoom in hundredths), as painted."""
        self._summary = ""
        self.setFlags(
            QGraphicsItem.GraphicsItemFlag.ItemIsSelectable
            | QGraphicsItem.GraphicsItemFlag.ItemIsMovable
            | QGraphicsItem.GraphicsItemFlag.ItemIsFocusable
            | QGraphicsItem.GraphicsItemFlag.ItemSendsScenePositionChanges
        )
        self.setCacheMode(QGraphicsItem.CacheMode.DeviceCoordinateCache)
        self.setZValue(NODE_Z)
        self.set_node(node)

    # ----- model → item ------------------------------------------------------------

    def set_node(self, node: Node) -> None:
        """Show `node` (title, config, ports may all have changed)."""
        ports = output_ports(node)
        self.node = node
        takes_input = has_input(node)
        if ports != self.ports or self.rect().isEmpty() or takes_input != (self.input_item is not None):
            self.ports = ports
            self.height = node_height(len(ports))
            self.setRect(self._paint_area())
            self._rebuild_ports()
        spec = node_type(node.type)
        title = node.title or (spec.title if spec is not None else node.id)
        if title != self._title_full:
            self._title_full = title
            self._titles.clear()
        self._summary = config_summary(node)
        self._refresh_tooltip()
        self.update()

    def title_at(self, zoom: float) -> tuple[QFont, str]:
        """The font and text the title is painted with at `zoom` (see `fitted_title`)."""
        key = round(zoom * 100)
        found = self._titles.get(key)
        if found is None:
            if len(self._titles) > 32:
                self._titles.clear()
            found = self._titles[key] = fitted_title(self._title_full, max(key, 1) / 100)
        return found

    def _rebuild_ports(self) -> None:
        scene = self.scene()
        for item in [*self.port_items, *([self.input_item] if self.input_item else [])]:
            if scene is not None:
                scene.removeItem(item)
            else:
                item.setParentItem(None)  # detach while not in a scene
        self.port_items = [PortItem(self, port, True, output_port_offset(i)) for i, port in enumerate(self.ports)]
        self.input_item = PortItem(self, None, False, input_port_offset(self.height)) if has_input(self.node) else None

    def set_diagnostics(self, diagnostics: list[Diagnostic]) -> None:
        if [(d.code, d.message) for d in diagnostics] != [(d.code, d.message) for d in self.diagnostics]:
            self.diagnostics = list(diagnostics)
            self._refresh_tooltip()
            self.update()

    def badge_severity(self) -> str | None:
        """ "error", "warning" or None: which badge the node shows."""
        if any(d.severity == "error" for d in self.diagnostics):
            return "error"
        return "warning" if self.diagnostics else None

    def _refresh_tooltip(self) -> None:
        spec = node_type(self.node.type)
        lines = [
            f"<b>{_escape(self.node.title or self.node.id)}</b> — {_escape(spec.title if spec else self.node.type)}",
            f"id: {_escape(self.node.id)}",
        ]
        if self._summary:
            lines.append(_escape(self._summary))
        for diagnostic in self.diagnostics:
            colour = current_theme().error if diagnostic.severity == "error" else current_theme().warning
            lines.append(f"<span style='color:{colour.name()}'>● {_escape(diagnostic.message)}</span>")
        if self.live.mark == "failed":
            error_colour = current_theme().error.name()
            lines.append(f"<span style='color:{error_colour}'>✕ failed in the selected run: "
                         f"{_escape(self.live.mark_text or 'no error recorded')}</span>")
        elif self.live.mark == "timed_out":
            lines.append(_escape(f"{self.live.mark_text or 'timed out'} in the selected run"))
        if self.live.waiting_text:
            lines.append(_escape(self.live.waiting_text))
        if self.notice[1]:
            lines.append(f"<span style='color:{current_theme().warning.name()}'>⏸ {_escape(self.notice[1])}</span>")
        if self.quorum[1]:
            lines.append(_escape(self.quorum[1]))
        self.setToolTip("<br>".join(lines))

    def set_notice(self, label: str, tooltip: str) -> None:
        """Show (or with empty texts, remove) the node's notice pill and tooltip line."""
        if (label, tooltip) != self.notice:
            self.notice = (label, tooltip)
            self._refresh_tooltip()
            self.update()

    def set_quorum(self, label: str, tooltip: str) -> None:
        """Show (or with empty texts, remove) the approval's quorum badge, e.g. "2 of 3 approved"."""
        if (label, tooltip) != self.quorum:
            self.quorum = (label, tooltip)
            self._refresh_tooltip()
            self.update()

    def refresh_live(self) -> None:
        self._refresh_tooltip()
        self.update()

    # ----- geometry ----------------------------------------------------------------

    def node_rect(self) -> QRectF:
        """The node box in item coordinates (without ports and overlays)."""
        return QRectF(0, 0, NODE_WIDTH, self.height)

    def _paint_area(self) -> QRectF:
        return QRectF(
            -PORT_RADIUS - 2,
            -OVERLAY_ABOVE,
            NODE_WIDTH + 2 * PORT_RADIUS + 4,
            self.height + OVERLAY_ABOVE + OVERLAY_BELOW,
        )

    def shape(self) -> QPainterPath:
        path = QPainterPath()
        path.addRoundedRect(self.node_rect(), 6, 6)
        return path

    def output_anchor(self, port: str | None) -> QPointF:
        """Scene point where an edge from `port` starts."""
        index = self.ports.index(port) if port in self.ports else 0
        x, y = output_port_offset(index)
        return self.pos() + QPointF(x, y)

    def input_anchor(self) -> QPointF:
        x, y = input_port_offset(self.height)
        return self.pos() + QPointF(x, y)

    def itemChange(self, change: QGraphicsItem.GraphicsItemChange, value: Any) -> Any:
        scene = self.scene()
        if change == QGraphicsItem.GraphicsItemChange.ItemPositionChange and scene is not None:
            if getattr(scene, "snap_to_grid", False) and not getattr(scene, "applying_model", False):
                point = QPointF(value)
                return QPointF(round(point.x() / GRID_SIZE) * GRID_SIZE, round(point.y() / GRID_SIZE) * GRID_SIZE)
        elif change == QGraphicsItem.GraphicsItemChange.ItemScenePositionHasChanged and scene is not None:
            scene_edges = getattr(scene, "node_moved", None)
            if scene_edges is not None:
                scene_edges(self.node_id)
        return super().itemChange(change, value)

    # ----- painting ----------------------------------------------------------------

    def paint(self, painter: QPainter, option: QStyleOptionGraphicsItem, widget: QWidget | None = None) -> None:
        theme = current_theme()
        accent = type_color(self.node.type)
        selected = self.isSelected()
        lod = option.levelOfDetailFromTransform(painter.worldTransform())
        rect = self.node_rect()
        if lod < DETAIL_ZOOM:
            painter.setPen(QPen(theme.node_selected if selected else accent, 3 if selected else 2))
            painter.setBrush(theme.node_body)
            painter.drawRect(rect)
            painter.fillRect(QRectF(0, 0, NODE_WIDTH, HEADER_HEIGHT), accent)
            severity = self.badge_severity()
            if severity:
                colour = theme.error if severity == "error" else theme.warning
                painter.fillRect(QRectF(NODE_WIDTH - 30, -12, 42, 42), colour)
            return
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        self._paint_body(painter, theme, accent, selected, rect, lod)
        self._paint_ports(painter, theme, lod)
        self._paint_badge(painter, theme)
        if not self.live.is_empty():
            self._paint_live(painter, theme, lod)
        if self.notice[0]:
            # Right-aligned above the node, so it never covers the live counts drawn from the left.
            self._paint_pill(painter, self.notice[0], theme.warning, -OVERLAY_ABOVE + 2)
        if self.quorum[0]:
            # Above the node at its right end, clear of the live counts drawn from the left; below it when
            # the counts (or a notice) leave no room there.
            width = self._pill_width(self.quorum[0])
            above = not self.notice[0] and self._live_pills_end() + 4 <= NODE_WIDTH - width
            self._paint_pill(painter, self.quorum[0], theme.run_path, -OVERLAY_ABOVE + 2 if above else self.height + 2,
                             NODE_WIDTH if above else NODE_WIDTH - 14)

    @staticmethod
    def _pill_width(text: str) -> float:
        return QFontMetricsF(BADGE_FONT).horizontalAdvance(text) + 12

    def _live_pills_end(self) -> float:
        """Where the live counts drawn above the node end (0 when there are none)."""
        end = 0.0
        for count, label in ((self.live.running, "running"), (self.live.waiting, "waiting")):
            if count:
                end = (end + 4 if end else 4.0) + QFontMetricsF(BADGE_FONT).horizontalAdvance(f"{count} {label}") + 12
        return end

    def _paint_pill(self, painter: QPainter, text: str, colour: QColor, top: float,
                    right: float = NODE_WIDTH - 14) -> None:
        painter.setFont(BADGE_FONT)
        width = self._pill_width(text)
        pill = QRectF(right - width, top, width, 16)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(colour)
        painter.drawRoundedRect(pill, 8, 8)
        painter.setPen(readable_on(colour))
        painter.drawText(pill, Qt.AlignmentFlag.AlignCenter, text)

    def _paint_body(self, painter: QPainter, theme: Any, accent: QColor, selected: bool, rect: QRectF,
                    lod: float = 1.0) -> None:
        if self.live.current or self.live.on_path or self.live.mark:
            ring = theme.error if self.live.mark == "failed" else theme.run_path
            painter.setPen(QPen(ring, 4 if self.live.current or self.live.mark == "failed" else 2.5))
            painter.setBrush(Qt.BrushStyle.NoBrush)
            painter.drawRoundedRect(rect.adjusted(-3, -3, 3, 3), 8, 8)
        painter.setPen(QPen(theme.node_selected, 2) if selected else QPen(theme.node_border, 1))
        painter.setBrush(theme.node_body)
        painter.drawRoundedRect(rect.adjusted(0.5, 0.5, -0.5, -0.5), 6, 6)
        header = QPainterPath()
        header.addRoundedRect(QRectF(1, 1, NODE_WIDTH - 2, HEADER_HEIGHT), 5, 5)
        header.addRect(QRectF(1, HEADER_HEIGHT / 2, NODE_WIDTH - 2, HEADER_HEIGHT / 2))
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(theme.header_fill(accent))
        header.setFillRule(Qt.FillRule.WindingFill)
        painter.drawPath(header.simplified())
        painter.fillRect(QRectF(1, HEADER_HEIGHT, NODE_WIDTH - 2, 1), theme.node_border)
        painter.fillRect(QRectF(0.5, 6, 3, HEADER_HEIGHT - 6), accent)
        paint_type_icon(painter, QRectF(9, (HEADER_HEIGHT - 16) / 2, 16, 16), self.node.type, accent)
        painter.setPen(theme.text)
        title_font, title = self.title_at(lod)
        painter.setFont(title_font)
        painter.drawText(QRectF(TITLE_LEFT, 0, TITLE_ROOM + 4, HEADER_HEIGHT), Qt.AlignmentFlag.AlignVCenter, title)
        if self._summary:
            port_font = readable_font(PORT_FONT, lod, SUMMARY_MAX_PX)
            summary_font = readable_font(SUMMARY_FONT, lod, SUMMARY_MAX_PX)
            label_width = max((QFontMetricsF(port_font).horizontalAdvance(p) for p in self.ports[:1]), default=0.0)
            room = NODE_WIDTH - 22 - (label_width + 14 if len(self.ports) > 1 else 0)
            summary = QFontMetricsF(summary_font).elidedText(self._summary, Qt.TextElideMode.ElideRight, room)
            painter.setPen(theme.text_muted)
            painter.setFont(summary_font)
            row = QRectF(12, HEADER_HEIGHT + 4, room, PORT_ROW_HEIGHT)
            painter.drawText(row, Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft, summary)

    def _paint_ports(self, painter: QPainter, theme: Any, lod: float = 1.0) -> None:
        painter.setPen(QPen(theme.port_border, 1.4))
        painter.setBrush(theme.port_fill)
        if self.input_item is not None:
            painter.drawEllipse(self.input_item.pos(), PORT_RADIUS, PORT_RADIUS)
        painter.setFont(readable_font(PORT_FONT, lod, SUMMARY_MAX_PX))
        for item in self.port_items:
            painter.setPen(QPen(theme.port_border, 1.4))
            painter.setBrush(theme.port_fill)
            painter.drawEllipse(item.pos(), PORT_RADIUS, PORT_RADIUS)
            if len(self.ports) > 1:
                painter.setPen(theme.text_muted)
                label = QRectF(NODE_WIDTH - 110, item.pos().y() - PORT_ROW_HEIGHT / 2, 98, PORT_ROW_HEIGHT)
                painter.drawText(label, Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignRight, item.port or "")

    def _paint_badge(self, painter: QPainter, theme: Any) -> None:
        severity = self.badge_severity()
        if severity is None:
            return
        colour = theme.error if severity == "error" else theme.warning
        centre = QPointF(NODE_WIDTH - 2, 0)
        painter.setPen(QPen(theme.node_body, 2))
        painter.setBrush(colour)
        painter.drawEllipse(centre, 8.5, 8.5)
        painter.setPen(readable_on(colour))
        painter.setFont(BADGE_FONT)
        count = sum(1 for d in self.diagnostics if d.severity == severity)
        painter.drawText(
            QRectF(centre.x() - 8, centre.y() - 8, 16, 16),
            Qt.AlignmentFlag.AlignCenter,
            "!" if count == 1 else str(min(count, 9)),
        )

    def _paint_live(self, painter: QPainter, theme: Any, lod: float = 1.0) -> None:
        painter.setFont(BADGE_FONT)
        x = 4.0
        for count, colour, label in (
            (self.live.running, theme.live_running, "running"),
            (self.live.waiting, theme.live_waiting, "waiting"),
        ):
            if not count:
                continue
            text = f"{count} {label}"
            width = QFontMetricsF(BADGE_FONT).horizontalAdvance(text) + 12
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(colour)
            painter.drawRoundedRect(QRectF(x, -OVERLAY_ABOVE + 2, width, 16), 8, 8)
            painter.setPen(readable_on(colour))
            painter.drawText(QRectF(x, -OVERLAY_ABOVE + 2, width, 16), Qt.AlignmentFlag.AlignCenter, text)
            x += width + 4
        below = self.live.label_below()
        if below:
            painter.setPen(theme.error if self.live.mark == "failed" else theme.run_path)
            font = readable_font(SUMMARY_FONT, lod, SUMMARY_MAX_PX)
            painter.setFont(font)
            text = QFontMetricsF(font).elidedText(below, Qt.TextElideMode.ElideRight, NODE_WIDTH)
            painter.drawText(
                QRectF(0, self.height + 2, NODE_WIDTH, OVERLAY_BELOW - 2), Qt.AlignmentFlag.AlignLeft, text
            )


class EdgeItem(QGraphicsPathItem):
    """A smooth curve from an output port to an input port, ending in a chevron.

    Painted by QGraphicsPathItem in C++: a full repaint of 1,200 edges never calls into Python.
    A long edge from a many-output node (approval, router) also names its port where it arrives,
    since the node's own port label is then out of sight.
    """

    def __init__(self, edge: Edge, source: NodeItem, target: NodeItem) -> None:
        super().__init__()
        self.edge = edge
        self.source = source
        self.target = target
        self.on_run_path = False
        self.insert_hint = False
        self._shape: QPainterPath | None = None
        self.ends = (QPointF(), QPointF())
        self._built_for: tuple[QPointF, QPointF] | None = None
        self.label: QGraphicsSimpleTextItem | None = None
        self.setFlag(QGraphicsItem.GraphicsItemFlag.ItemIsSelectable, True)
        self.setZValue(EDGE_Z)
        port = edge.port or ""
        self.setToolTip(f"{edge.from_} {port + ' ' if port else ''}→ {edge.to} (select and press Delete to remove)")
        self.restyle()
        self.update_path()

    def port_name(self) -> str | None:
        if self.edge.port is not None:
            return self.edge.port
        return self.source.ports[0] if self.source.ports else None

    def update_path(self) -> None:
        """Recompute the curve after either end moved."""
        start = self.source.output_anchor(self.port_name())
        end = self.target.input_anchor()
        self.ends = (start, end)
        built = self._built_for
        if built is not None and end - start == built[1] - built[0]:
            # Both ends moved together (a group drag, its undo): shift the item, keep the path and its shape.
            self.setPos(start - built[0])
            return
        self._built_for = (start, end)
        self._shape = None
        self.setPos(0, 0)
        path = curve_between(start, end)
        # The chevron is part of the same path, so an edge stays one C++-painted item.
        tip = end - QPointF(PORT_RADIUS + 1, 0)
        path.moveTo(tip + QPointF(-7, -4))
        path.lineTo(tip)
        path.lineTo(tip + QPointF(-7, 4))
        self.setPath(path)
        self._place_label(start, end)

    def _place_label(self, start: QPointF, end: QPointF) -> None:
        wanted = len(self.source.ports) > 1 and (end - start).manhattanLength() >= EDGE_LABEL_MIN_LENGTH
        if not wanted:
            if self.label is not None:
                self.label.setVisible(False)
            return
        if self.label is None:
            self.label = QGraphicsSimpleTextItem(self.port_name() or "", self)
            self.label.setFont(PORT_FONT)
            self.label.setBrush(current_theme().text_muted)
            self.label.setCacheMode(QGraphicsItem.CacheMode.DeviceCoordinateCache)
        self.label.setVisible(True)
        # Just before the arrival, above the line: the gap in front of a node is rarely covered by another.
        box = self.label.boundingRect()
        self.label.setPos(end - QPointF(box.width() + PORT_RADIUS + 12, box.height() + 3))

    def restyle(self) -> None:
        """Pick the pen for the current state (selected, on a run's path, plain) and theme."""
        theme = current_theme()
        if self.insert_hint:
            colour, width = theme.wire_ok, 3.2
        elif self.isSelected():
            colour, width = theme.edge_selected, 2.6
        elif self.on_run_path:
            colour, width = theme.run_path, 3.2
        else:
            colour, width = theme.edge, 1.8
        pen = QPen(colour, width)
        pen.setCapStyle(Qt.PenCapStyle.RoundCap)
        pen.setJoinStyle(Qt.PenJoinStyle.RoundJoin)
        self.setPen(pen)
        if self.label is not None:
            self.label.setBrush(theme.text_muted)

    def set_insert_hint(self, on: bool) -> None:
        """Highlight this edge as where a dragged node would be inserted."""
        if on != self.insert_hint:
            self.insert_hint = on
            self.restyle()

    def set_on_run_path(self, on: bool) -> None:
        if on != self.on_run_path:
            self.on_run_path = on
            self.restyle()

    def shape(self) -> QPainterPath:
        # Wider than the line so edges are easy to click; only hit tests call this.
        if self._shape is None:
            stroker = QPainterPathStroker()
            stroker.setWidth(10)
            self._shape = stroker.createStroke(self.path())
        return self._shape

    def itemChange(self, change: QGraphicsItem.GraphicsItemChange, value: Any) -> Any:
        if change == QGraphicsItem.GraphicsItemChange.ItemSelectedHasChanged:
            self.restyle()
        return super().itemChange(change, value)


def curve_between(start: QPointF, end: QPointF) -> QPainterPath:
    """A horizontal-tangent cubic from `start` to `end`, looping wide when the target is behind."""
    dx = end.x() - start.x()
    reach = max(abs(dx) * 0.5, 40.0) if dx >= 0 else max(80.0, abs(dx) * 0.35 + abs(end.y() - start.y()) * 0.25)
    path = QPainterPath(start)
    path.cubicTo(QPointF(start.x() + reach, start.y()), QPointF(end.x() - reach, end.y()), end)
    return path


class WireItem(QGraphicsItem):
    """The wire following the mouse while connecting, green when it may connect, red with the reason when not."""

    def __init__(self, source: NodeItem, port: str | None) -> None:
        super().__init__()
        self.source = source
        self.port = port
        self.end = source.output_anchor(port)
        self.refusal: str | None = None
        self.target: NodeItem | None = None
        self._path = QPainterPath()
        self._bounds = QRectF()
        self.setZValue(WIRE_Z)
        self.move_to(self.end)

    def move_to(self, end: QPointF, target: NodeItem | None = None, refusal: str | None = None) -> None:
        self.prepareGeometryChange()
        self.end = QPointF(end)
        self.target = target
        self.refusal = refusal
        finish = target.input_anchor() if target is not None and refusal is None else self.end
        self._path = curve_between(self.source.output_anchor(self.port), finish)
        bounds = self._path.boundingRect()
        if refusal:
            width = QFontMetricsF(SUMMARY_FONT).horizontalAdvance(refusal) + 24
            bounds = bounds.united(QRectF(self.end.x() + 8, self.end.y() + 8, width, 26))
        self._bounds = bounds.adjusted(-6, -6, 6, 6)

    def boundingRect(self) -> QRectF:
        return self._bounds

    def paint(self, painter: QPainter, option: QStyleOptionGraphicsItem, widget: QWidget | None = None) -> None:
        theme = current_theme()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        if self.refusal:
            colour = theme.wire_refused
        elif self.target is not None:
            colour = theme.wire_ok
        else:
            colour = theme.edge_selected
        pen = QPen(colour, 2.2, Qt.PenStyle.DashLine if self.target is None else Qt.PenStyle.SolidLine)
        painter.setPen(pen)
        painter.setBrush(Qt.BrushStyle.NoBrush)
        painter.drawPath(self._path)
        if self.refusal:
            metrics = QFontMetricsF(SUMMARY_FONT)
            box = QRectF(self.end.x() + 12, self.end.y() + 10, metrics.horizontalAdvance(self.refusal) + 16, 22)
            painter.setPen(QPen(theme.wire_refused, 1))
            painter.setBrush(theme.node_body)
            painter.drawRoundedRect(box, 5, 5)
            painter.setPen(theme.wire_refused)
            painter.setFont(SUMMARY_FONT)
            painter.drawText(box, Qt.AlignmentFlag.AlignCenter, self.refusal)


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
