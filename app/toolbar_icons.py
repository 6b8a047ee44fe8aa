"""The toolbar's icons, drawn as outlines in the palette's text colour so they read on light and dark alike
(the style's stock arrows and play button are black, invisible on a dark toolbar)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QAction, QColor, QIcon, QPainter, QPainterPath, QPalette, QPen, QPixmap
from PySide6.QtWidgets import QApplication

ICON_SIZE = 20
_Maker = Callable[[], tuple[QPainterPath, bool]]


def _polyline(*points: tuple[float, float]) -> QPainterPath:
    path = QPainterPath(QPointF(*points[0]))
    for point in points[1:]:
        path.lineTo(*point)
    return path


def _new() -> tuple[QPainterPath, bool]:
    path = _polyline((3.5, 1.5), (9.5, 1.5), (13, 5), (13, 14.5), (3.5, 14.5))
    path.closeSubpath()
    path.addPath(_polyline((9.5, 1.5), (9.5, 5), (13, 5)))
    return path, False


def _open() -> tuple[QPainterPath, bool]:
    path = _polyline((1.5, 13.5), (1.5, 3), (6, 3), (7.5, 5), (13, 5), (13, 7))
    path.addPath(_polyline((1.5, 13.5), (4, 7), (15, 7), (12.5, 13.5)))
    path.closeSubpath()
    return path, False


def _save() -> tuple[QPainterPath, bool]:
    path = _polyline((2, 2), (11.5, 2), (14, 4.5), (14, 14), (2, 14))
    path.closeSubpath()
    path.addRect(QRectF(5, 2, 5.5, 3.5))
    path.addRect(QRectF(4.5, 9, 7, 5))
    return path, False


def _undo() -> tuple[QPainterPath, bool]:
    path = _polyline((5.5, 3.5), (2, 7), (5.5, 10.5))
    path.moveTo(2, 7)
    path.lineTo(10, 7)
    path.cubicTo(12.8, 7, 14.5, 8.8, 14.5, 10.8)
    path.cubicTo(14.5, 12.8, 12.8, 14, 10.5, 14)
    path.lineTo(7, 14)
    return path, False


def _redo() -> tuple[QPainterPath, bool]:
    path = _polyline((10.5, 3.5), (14, 7), (10.5, 10.5))
    path.moveTo(14, 7)
    path.lineTo(6, 7)
    path.cubicTo(3.2, 7, 1.5, 8.8, 1.5, 10.8)
    path.cubicTo(1.5, 12.8, 3.2, 14, 5.5, 14)
    path.lineTo(9, 14)
    return path, False


def _validate() -> tuple[QPainterPath, bool]:
    return _polyline((2.5, 8.5), (6.5, 12.5), (13.5, 3.5)), False


def _publish() -> tuple[QPainterPath, bool]:
    path = _polyline((8, 11), (8, 2))
    path.addPath(_polyline((4.5, 5.5), (8, 2), (11.5, 5.5)))
    path.addPath(_polyline((2.5, 10), (2.5, 14), (13.5, 14), (13.5, 10)))
    return path, False


def _run() -> tuple[QPainterPath, bool]:
    path = _polyline((4.5, 2.5), (13.5, 8), (4.5, 13.5))
    path.closeSubpath()
    return path, True


def _live() -> tuple[QPainterPath, bool]:
    return _polyline((1.5, 8.5), (4.5, 8.5), (6.5, 3), (9.5, 13.5), (11.5, 8.5), (14.5, 8.5)), False


def _close() -> tuple[QPainterPath, bool]:
    path = _polyline((4, 4), (12, 12))
    path.addPath(_polyline((12, 4), (4, 12)))
    return path, False


TOOLBAR_ICONS: dict[str, _Maker] = {
    "new": _new, "open": _open, "save": _save, "undo": _undo, "redo": _redo,
    "validate": _validate, "publish": _publish, "run": _run, "live": _live, "close": _close,
}
"""Each toolbar action's drawing by action id; `close` is the flow tabs' close button."""


def _pixmap(path: QPainterPath, filled: bool, colour: QColor, scale: int) -> QPixmap:
    pixmap = QPixmap(ICON_SIZE * scale, ICON_SIZE * scale)
    pixmap.fill(Qt.GlobalColor.transparent)
    pixmap.setDevicePixelRatio(scale)
    painter = QPainter(pixmap)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.translate(2, 2)
    painter.scale((ICON_SIZE - 4) / 16, (ICON_SIZE - 4) / 16)
    if filled:
        painter.setPen(QPen(colour, 1.2, Qt.PenStyle.SolidLine, Qt.PenCapStyle.RoundCap, Qt.PenJoinStyle.RoundJoin))
        painter.setBrush(colour)
    else:
        painter.setPen(QPen(colour, 1.6, Qt.PenStyle.SolidLine, Qt.PenCapStyle.RoundCap, Qt.PenJoinStyle.RoundJoin))
        painter.setBrush(Qt.BrushStyle.NoBrush)
    painter.drawPath(path)
    painter.end()
    return pixmap


def toolbar_icon(action_id: str, palette: QPalette) -> QIcon:
    """The action's icon in `palette`'s button text colour, and dimmed in its disabled colour."""
    path, filled = TOOLBAR_ICONS[action_id]()
    icon = QIcon()
    normal = palette.color(QPalette.ColorGroup.Active, QPalette.ColorRole.ButtonText)
    disabled = palette.color(QPalette.ColorGroup.Disabled, QPalette.ColorRole.ButtonText)
    for scale in (1, 2):
        icon.addPixmap(_pixmap(path, filled, normal, scale), QIcon.Mode.Normal)
        icon.addPixmap(_pixmap(path, filled, normal, scale), QIcon.Mode.Active)
        icon.addPixmap(_pixmap(path, filled, disabled, scale), QIcon.Mode.Disabled)
    return icon


def apply_toolbar_icons(actions: Mapping[str, QAction], palette: QPalette | None = None) -> None:
    """Give the toolbar's actions their icons in the palette in force (again after a theme change)."""
    palette = palette or QApplication.palette()
    for action_id in TOOLBAR_ICONS:
        action = actions.get(action_id)
        if action is not None:
            action.setIcon(toolbar_icon(action_id, palette))
