"""The quick-add search box (Tab / Shift+A): type to filter node types, Enter creates one."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, QPoint, Qt, Signal
from PySide6.QtGui import QHideEvent, QKeyEvent
from PySide6.QtWidgets import QFrame, QLineEdit, QListWidget, QListWidgetItem, QVBoxLayout, QWidget

from canvas.icons import type_icon
from engine.catalog import CATALOG

TYPE_ROLE = Qt.ItemDataRole.UserRole
MAX_ROWS = 12


def matches(query: str, type_name: str) -> bool:
    """Whether every word of `query` appears in the type's name, title or category."""
    spec = CATALOG[type_name]
    haystack = f"{type_name} {spec.title} {spec.category}".lower()
    return all(word in haystack for word in query.lower().split())


class QuickAddBox(QFrame):
    """A small popup with a filter line and the matching node types. Emits `chosen(type_name)`."""

    chosen = Signal(str)
    dismissed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent, Qt.WindowType.Popup)
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setObjectName("QuickAddBox")
        self.search = QLineEdit(self)
        self.search.setPlaceholderText("Add node… (type to search)")
        self.search.setToolTip("Type part of a node name; Enter adds it, Esc closes")
        self.list = QListWidget(self)
        self.list.setToolTip("Node types; double-click or Enter to add")
        self.list.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.setSpacing(4)
        layout.addWidget(self.search)
        layout.addWidget(self.list)
        self.setFixedWidth(260)
        for type_name, spec in CATALOG.items():
            item = QListWidgetItem(type_icon(type_name), f"{spec.title}  ·  {spec.category}")
            item.setData(TYPE_ROLE, type_name)
            item.setToolTip(spec.description)
            self.list.addItem(item)
        self.search.textChanged.connect(self._filter)
        self.search.installEventFilter(self)
        self.list.itemActivated.connect(self._activate)
        self._done = False
        self.inputs_only = False

    def open_at(self, global_pos: QPoint, inputs_only: bool = False) -> None:
        """Show at `global_pos` with an empty filter and the first type selected; `inputs_only` (a node for a
        dragged wire) leaves out the types that take no input (triggers)."""
        self._done = False
        self.inputs_only = inputs_only
        self.search.clear()
        self._filter("")
        self.move(global_pos)
        self.show()
        self.search.setFocus()

    def _filter(self, text: str) -> None:
        first = None
        for row in range(self.list.count()):
            item = self.list.item(row)
            type_name = item.data(TYPE_ROLE)
            hidden = not matches(text, type_name) or (self.inputs_only and not CATALOG[type_name].has_input)
            item.setHidden(hidden)
            if not hidden and first is None:
                first = item
        if first is not None:
            self.list.setCurrentItem(first)
        else:
            self.list.setCurrentRow(-1)
        self._fit_to_rows()

    def _fit_to_rows(self) -> None:
        # Shrink to the matches, so a narrowed search does not leave an empty box over the canvas.
        rows = [r for r in range(self.list.count()) if not self.list.item(r).isHidden()]
        row_height = max(self.list.sizeHintForRow(rows[0]) if rows else 0, self.fontMetrics().height() + 6)
        list_height = min(max(1, len(rows)), MAX_ROWS) * row_height + 2 * self.list.frameWidth() + 2
        self.list.setFixedHeight(list_height)
        self.setFixedHeight(list_height + self.search.sizeHint().height() + 12)

    def visible_types(self) -> list[str]:
        return [self.list.item(r).data(TYPE_ROLE) for r in range(self.list.count()) if not self.list.item(r).isHidden()]

    def accept_current(self) -> str | None:
        """Choose the highlighted type (what Enter does)."""
        item = self.list.currentItem()
        if item is None or item.isHidden():
            return None
        self._activate(item)
        return str(item.data(TYPE_ROLE))

    def _activate(self, item: QListWidgetItem) -> None:
        self._done = True
        self.hide()
        self.chosen.emit(item.data(TYPE_ROLE))

    def _step(self, delta: int) -> None:
        rows = [r for r in range(self.list.count()) if not self.list.item(r).isHidden()]
        if not rows:
            return
        current = self.list.currentRow()
        index = rows.index(current) if current in rows else -1
        self.list.setCurrentRow(rows[max(0, min(len(rows) - 1, index + delta))])

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self.search and event.type() == QEvent.Type.KeyPress and isinstance(event, QKeyEvent):
            key = event.key()
            if key in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
                self.accept_current()
                return True
            if key == Qt.Key.Key_Down:
                self._step(1)
                return True
            if key == Qt.Key.Key_Up:
                self._step(-1)
                return True
            if key == Qt.Key.Key_Escape:
                self.hide()
                return True
        return super().eventFilter(watched, event)

    def hideEvent(self, event: QHideEvent) -> None:
        super().hideEvent(event)
        if not self._done:
            self.dismissed.emit()
