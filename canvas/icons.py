"""Small vector icons per node type, drawn with QPainterPath so they stay sharp at any zoom."""

from __future__ import annotations

import math
from collections.abc import Callable

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QFont, QIcon, QPainter, QPainterPath, QPen, QPixmap

from canvas.theme import current_theme
from engine.catalog import node_type

# Paths are drawn in a 16×16 box; `filled` paths are painted solid, others stroked.
_PathMaker = Callable[[], tuple[QPainterPath, bool]]


def _play() -> tuple[QPainterPath, bool]:
    path = QPainterPath(QPointF(4.5, 2.5))
    path.lineTo(13.5, 8)
    path.lineTo(4.5, 13.5)
    path.closeSubpath()
    return path, True


def _clock() -> tuple[QPainterPath, bool]:
    path = QPainterPath()
    path.addEllipse(QRectF(2, 2, 12, 12))
    path.moveTo(8, 4.5)
    path.lineTo(8, 8)
    path.lineTo(10.8, 9.6)
    return path, False


def _bolt() -> tuple[QPainterPath, bool]:
    path = QPainterPath(QPointF(9.5, 1.5))
    for x, y in ((3.5, 9), (7.5, 9), (6.5, 14.5), (12.5, 7), (8.5, 7)):
        path.lineTo(x, y)
    path.closeSubpath()
    return path, True


def _broadcast() -> tuple[QPainterPath, bool]:
    path = QPainterPath()
    path.addEllipse(QRectF(6.5, 6.5, 3, 3))
    for radius in (4.5, 7):
        rect = QRectF(8 - radius, 8 - radius, 2 * radius, 2 * radius)
        path.arcMoveTo(rect, -45)
        path.arcTo(rect, -45, 90)
        path.arcMoveTo(rect, 135)
        path.arcTo(rect, 135, 90)
    return path, False


def _hourglass() -> tuple[QPainterPath, bool]:
    path = QPainterPath(QPointF(3.5, 2))
    path.lineTo(12.5, 2)
    path.moveTo(3.5, 14)
    path.lineTo(12.5, 14)
    path.moveTo(4.5, 2)
    path.cubicTo(4.5, 6, 8, 7, 8, 8)
    path.cubicTo(8, 9, 4.5, 10, 4.5, 14)
    path.moveTo(11.5, 2)
    path.cubicTo(11.5, 6, 8, 7, 8, 8)
    path.cubicTo(8, 9, 11.5, 10, 11.5, 14)
    return path, False


def _check() -> tuple[QPainterPath, bool]:
    path = QPainterPath()
    path.addEllipse(QRectF(1.8, 1.8, 12.4, 12.4))
    path.moveTo(5, 8.3)
    path.lineTo(7.2, 10.5)
    path.lineTo(11.2, 5.8)
    return path, False


def _coin() -> tuple[QPainterPath, bool]:
    path = QPainterPath()
    path.addEllipse(QRectF(1.8, 1.8, 12.4, 12.4))
    path.moveTo(10.3, 5.6)
    path.cubicTo(9.5, 4.6, 5.6, 4.5, 5.7, 6.4)
    path.cubicTo(5.8, 8.2, 10.4, 7.6, 10.4, 9.7)
    path.cubicTo(10.4, 11.6, 6.4, 11.5, 5.6, 10.4)
    path.moveTo(8, 3.6)
    path.lineTo(8, 12.4)
    return path, False


def _sparkle() -> tuple[QPainterPath, bool]:
    path = QPainterPath()
    for cx, cy, r in ((7, 8.5, 6), (12.8, 3.4, 2.6)):
        path.moveTo(cx, cy - r)
        path.quadTo(cx, cy, cx + r, cy)
        path.quadTo(cx, cy, cx, cy + r)
        path.quadTo(cx, cy, cx - r, cy)
        path.quadTo(cx, cy, cx, cy - r)
        path.closeSubpath()
    return path, True


def _fork() -> tuple[QPainterPath, bool]:
    path = QPainterPath(QPointF(1.5, 8))
    path.lineTo(6, 8)
    path.cubicTo(8.5, 8, 9, 3.5, 12, 3.5)
    path.moveTo(6, 8)
    path.cubicTo(8.5, 8, 9, 12.5, 12, 12.5)
    for y in (3.5, 12.5):
        path.moveTo(10.5, y - 2)
        path.lineTo(13, y)
        path.lineTo(10.5, y + 2)
    return path, False


def _merge() -> tuple[QPainterPath, bool]:
    path = QPainterPath(QPointF(1.5, 3.5))
    path.cubicTo(5, 3.5, 5.5, 8, 9, 8)
    path.moveTo(1.5, 12.5)
    path.cubicTo(5, 12.5, 5.5, 8, 9, 8)
    path.lineTo(14, 8)
    path.moveTo(11.5, 5.5)
    path.lineTo(14, 8)
    path.lineTo(11.5, 10.5)
    return path, False


def _loop() -> tuple[QPainterPath, bool]:
    path = QPainterPath()
    rect = QRectF(2.5, 2.5, 11, 11)
    path.arcMoveTo(rect, 60)
    path.arcTo(rect, 60, 290)
    end = QPointF(8 + 5.5 * math.cos(math.radians(350)), 8 - 5.5 * math.sin(math.radians(350)))
    path.moveTo(end.x() - 2.6, end.y() - 1.6)
    path.lineTo(end)
    path.lineTo(end.x() + 1.6, end.y() - 2.8)
    return path, False


def _hook() -> tuple[QPainterPath, bool]:
    """An arrow coming back into a box: a call that returns later."""
    path = QPainterPath()
    path.moveTo(9.5, 2.5)
    path.lineTo(13.5, 2.5)
    path.lineTo(13.5, 13.5)
    path.lineTo(2.5, 13.5)
    path.lineTo(2.5, 9.5)
    path.moveTo(2.5, 2.5)
    path.lineTo(8.5, 8.5)
    path.moveTo(8.5, 4.5)
    path.lineTo(8.5, 8.5)
    path.lineTo(4.5, 8.5)
    return path, False


def _prompt() -> tuple[QPainterPath, bool]:
    path = QPainterPath()
    path.addRoundedRect(QRectF(1.5, 2.5, 13, 11), 1.5, 1.5)
    path.moveTo(4, 6)
    path.lineTo(6.5, 8)
    path.lineTo(4, 10)
    path.moveTo(8, 10.5)
    path.lineTo(11.5, 10.5)
    return path, False


def _nested() -> tuple[QPainterPath, bool]:
    """A flow inside a flow: an outer frame with a smaller one and an arrow into it."""
    path = QPainterPath()
    path.addRoundedRect(QRectF(1.5, 2.5, 13, 11), 1.5, 1.5)
    path.addRoundedRect(QRectF(8, 5.5, 4.5, 5), 1, 1)
    path.moveTo(3.5, 8)
    path.lineTo(7, 8)
    path.moveTo(5.5, 6.5)
    path.lineTo(7, 8)
    path.lineTo(5.5, 9.5)
    return path, False


def _braces() -> tuple[QPainterPath, bool]:
    path = QPainterPath()
    for sign, x in ((1, 5.5), (-1, 10.5)):
        path.moveTo(x + sign * 1.5, 2)
        path.quadTo(x, 2, x, 4)
        path.lineTo(x, 6.5)
        path.quadTo(x, 8, x - sign * 1.5, 8)
        path.quadTo(x, 8, x, 9.5)
        path.lineTo(x, 12)
        path.quadTo(x, 14, x + sign * 1.5, 14)
    return path, False


def _globe() -> tuple[QPainterPath, bool]:
    path = QPainterPath()
    path.addEllipse(QRectF(2, 2, 12, 12))
    path.addEllipse(QRectF(5.2, 2, 5.6, 12))
    path.moveTo(2, 8)
    path.lineTo(14, 8)
    return path, False


def _stop() -> tuple[QPainterPath, bool]:
    path = QPainterPath()
    path.addEllipse(QRectF(2, 2, 12, 12))
    path.addEllipse(QRectF(5, 5, 6, 6))
    path.setFillRule(Qt.FillRule.OddEvenFill)
    return path, True


def _question() -> tuple[QPainterPath, bool]:
    path = QPainterPath()
    font = QFont()
    font.setPixelSize(14)
    font.setBold(True)
    path.addText(QPointF(4, 13.5), font, "?")
    return path, True


_ICONS: dict[str, _PathMaker] = {
    "trigger.manual": _play,
    "trigger.schedule": _clock,
    "trigger.webhook": _bolt,
    "trigger.event": _broadcast,
    "queue": _hourglass,
    "approval": _check,
    "wait.callback": _hook,
    "budget.reserve": _coin,
    "ai.model": _sparkle,
    "router": _fork,
    "join": _merge,
    "foreach": _loop,
    "set": _braces,
    "http.request": _globe,
    "script": _prompt,
    "flow.call": _nested,
    "terminal": _stop,
}

_path_cache: dict[str, tuple[QPainterPath, bool]] = {}


def icon_path(type_name: str) -> tuple[QPainterPath, bool]:
    """The icon's path in a 16×16 box and whether it is filled (else stroked)."""
    if type_name not in _path_cache:
        _path_cache[type_name] = _ICONS.get(type_name, _question)()
    return _path_cache[type_name]


def paint_type_icon(painter: QPainter, rect: QRectF, type_name: str, color: QColor) -> None:
    """Draw the type's icon scaled into `rect`."""
    path, filled = icon_path(type_name)
    painter.save()
    painter.translate(rect.topLeft())
    scale = min(rect.width(), rect.height()) / 16.0
    painter.scale(scale, scale)
    if filled:
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(color)
    else:
        pen = QPen(color, 1.6)
        pen.setCapStyle(Qt.PenCapStyle.RoundCap)
        pen.setJoinStyle(Qt.PenJoinStyle.RoundJoin)
        painter.setPen(pen)
        painter.setBrush(Qt.BrushStyle.NoBrush)
    painter.drawPath(path)
    painter.restore()


def type_color(type_name: str) -> QColor:
    """The category colour of a node type in the current theme."""
    spec = node_type(type_name)
    theme = current_theme()
    return theme.category_color(spec.category) if spec is not None else theme.text_muted


def type_icon(type_name: str, size: int = 20) -> QIcon:
    """A QIcon for lists and menus, in the type's category colour."""
    icon = QIcon()
    for scale in (1, 2):
        pixmap = QPixmap(size * scale, size * scale)
        pixmap.fill(Qt.GlobalColor.transparent)
        pixmap.setDevicePixelRatio(scale)
        painter = QPainter(pixmap)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        paint_type_icon(painter, QRectF(1, 1, size - 2, size - 2), type_name, type_color(type_name))
        painter.end()
        icon.addPixmap(pixmap)
    return icon
