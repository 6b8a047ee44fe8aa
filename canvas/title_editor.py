"""In-place editing of a node's title (double-click its header, or F2): a line edit laid over the header."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, QRectF, Qt, Signal
from PySide6.QtGui import QFocusEvent, QFont, QKeyEvent
from PySide6.QtWidgets import QLineEdit, QWidget

from canvas.geometry import HEADER_HEIGHT, NODE_WIDTH
from canvas.items import TITLE_FONT

TITLE_LEFT = 31.0
"""Where the title text starts in the header, after the type icon (scene units)."""


def title_rect() -> QRectF:
    """The title's area in a node's own coordinates."""
    return QRectF(TITLE_LEFT - 4, 2, NODE_WIDTH - TITLE_LEFT, HEADER_HEIGHT - 4)


class TitleEditor(QLineEdit):
    """Edits one node's title at a time. Enter or leaving commits (`renamed(node_id, title)`), Esc cancels."""

    renamed = Signal(str, str)
    finished = Signal()

    def __init__(self, parent: QWidget) -> None:
        super().__init__(parent)
        self.setObjectName("titleEditor")
        self.setToolTip("The node's title: Enter keeps it, Esc cancels")
        self.setAccessibleName("Node title")
        self.node_id: str | None = None
        self._original = ""
        self.hide()
        self.installEventFilter(self)

    def start(self, node_id: str, title: str, view_rect: QRectF, zoom: float) -> None:
        """Show over `view_rect` (viewport pixels) holding `title`, all of it selected."""
        self.node_id = node_id
        self._original = title
        self.place(view_rect, zoom)
        self.setText(title)
        self.selectAll()
        self.show()
        self.raise_()
        self.setFocus(Qt.FocusReason.OtherFocusReason)

    def place(self, view_rect: QRectF, zoom: float) -> None:
        """Cover `view_rect` with a font the title's size at `zoom`."""
        font = QFont(TITLE_FONT)
        font.setPixelSize(max(9, round(TITLE_FONT.pixelSize() * zoom)))
        self.setFont(font)
        self.setGeometry(view_rect.toAlignedRect())

    def editing(self) -> bool:
        return self.node_id is not None

    def commit(self) -> None:
        node_id, self.node_id = self.node_id, None
        if node_id is None:
            return
        title = self.text().strip()
        self.hide()
        if title and title != self._original:
            self.renamed.emit(node_id, title)
        self.finished.emit()

    def cancel(self) -> None:
        if self.node_id is None:
            return
        self.node_id = None
        self.hide()
        self.finished.emit()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self and event.type() == QEvent.Type.KeyPress and isinstance(event, QKeyEvent):
            if event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
                self.commit()
                return True
            if event.key() == Qt.Key.Key_Escape:
                self.cancel()
                return True
        return super().eventFilter(watched, event)

    def focusOutEvent(self, event: QFocusEvent) -> None:
        super().focusOutEvent(event)
        if self.isVisible():
            self.commit()
