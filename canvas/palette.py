"""The node palette: node types by category with icons and a filter; drag one onto the canvas."""

from __future__ import annotations

from PySide6.QtCore import QMimeData, Qt, Signal
from PySide6.QtGui import QDrag
from PySide6.QtWidgets import QLineEdit, QStyle, QTreeWidget, QTreeWidgetItem, QVBoxLayout, QWidget

from canvas.icons import type_icon
from canvas.quick_add import matches
from canvas.theme import theme_notifier
from engine.catalog import categories

NODE_TYPE_MIME = "application/x-lockgate-node-type"
TYPE_ROLE = Qt.ItemDataRole.UserRole


def node_type_mime(type_name: str) -> QMimeData:
    """The drag payload for one node type (what the canvas accepts on drop)."""
    data = QMimeData()
    data.setData(NODE_TYPE_MIME, type_name.encode("utf-8"))
    data.setText(type_name)
    return data


class _TypeTree(QTreeWidget):
    def mimeTypes(self) -> list[str]:
        return [NODE_TYPE_MIME]

    def mimeData(self, items: list[QTreeWidgetItem]) -> QMimeData:  # type: ignore[override]
        type_name = items[0].data(0, TYPE_ROLE) if items else None
        return node_type_mime(type_name) if type_name else QMimeData()

    def startDrag(self, supported: Qt.DropAction) -> None:
        item = self.currentItem()
        type_name = item.data(0, TYPE_ROLE) if item is not None else None
        if item is None or not type_name:
            return
        drag = QDrag(self)
        drag.setMimeData(node_type_mime(type_name))
        drag.setPixmap(item.icon(0).pixmap(28, 28))
        drag.exec(Qt.DropAction.CopyAction)


class NodePalette(QWidget):
    """Node types grouped by category. Signal `activated(type_name)` on double-click or Enter."""

    activated = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.filter = QLineEdit(self)
        self.filter.setPlaceholderText("Filter nodes…")
        self.filter.setClearButtonEnabled(True)
        self.filter.setToolTip("Type to filter node types by name or category")
        self.tree = _TypeTree(self)
        self.tree.setHeaderHidden(True)
        self.tree.setRootIsDecorated(False)
        self.tree.setIndentation(8)
        self.tree.setDragEnabled(True)
        self.tree.setDragDropMode(QTreeWidget.DragDropMode.DragOnly)
        self.tree.setToolTip("Drag a node type onto the canvas, or double-click to add it where there is room")
        self.tree.setAccessibleName("Node palette")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.setSpacing(6)
        layout.addWidget(self.filter)
        layout.addWidget(self.tree)
        self._populate()
        self.filter.textChanged.connect(self.set_filter)
        self.tree.itemActivated.connect(self._activate)
        theme_notifier().changed.connect(self._on_theme)

    def _on_theme(self, _theme: object) -> None:
        self._populate()

    def _populate(self) -> None:
        self.tree.clear()
        self._groups: list[tuple[QTreeWidgetItem, list[QTreeWidgetItem]]] = []
        for category, specs in categories().items():
            group = QTreeWidgetItem(self.tree, [category])
            group.setFlags(Qt.ItemFlag.ItemIsEnabled)
            font = group.font(0)
            font.setBold(True)
            group.setFont(0, font)
            children: list[QTreeWidgetItem] = []
            self._groups.append((group, children))
            for spec in specs:
                item = QTreeWidgetItem(group, [spec.title])
                item.setIcon(0, type_icon(spec.type))
                item.setData(0, TYPE_ROLE, spec.type)
                item.setToolTip(0, spec.description)
                item.setFlags(Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable | Qt.ItemFlag.ItemIsDragEnabled)
                children.append(item)
        self.tree.expandAll()
        # Every type's name shows whole ("Wait for callback", not "Wait for callb…"), however narrow the dock.
        self.tree.setMinimumWidth(self.tree.sizeHintForColumn(0) + 2 * self.tree.frameWidth()
                                  + self.tree.style().pixelMetric(QStyle.PixelMetric.PM_ScrollBarExtent))
        self.set_filter(self.filter.text())

    def set_filter(self, text: str) -> None:
        """Show only types matching `text` (and the categories holding them)."""
        for group, children in self._groups:
            shown = 0
            for child in children:
                hidden = not matches(text, child.data(0, TYPE_ROLE))
                child.setHidden(hidden)
                shown += not hidden
            group.setHidden(shown == 0)

    def visible_types(self) -> list[str]:
        return [
            child.data(0, TYPE_ROLE)
            for group, children in self._groups
            if not group.isHidden()
            for child in children
            if not child.isHidden()
        ]

    def item_for(self, type_name: str) -> QTreeWidgetItem | None:
        for _group, children in self._groups:
            for child in children:
                if child.data(0, TYPE_ROLE) == type_name:
                    return child
        return None

    def _activate(self, item: QTreeWidgetItem) -> None:
        type_name = item.data(0, TYPE_ROLE)
        if type_name:
            self.activated.emit(type_name)
