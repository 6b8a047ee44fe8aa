"""One document's canvas, ready to sit in a tab: the view (with its minimap) and the document."""

from __future__ import annotations

from PySide6.QtWidgets import QVBoxLayout, QWidget

from canvas.document import FlowDocument
from canvas.view import FlowView


class FlowEditor(QWidget):
    """`FlowEditor(document)`; `.view` is the FlowView, `.document` the FlowDocument."""

    def __init__(self, document: FlowDocument, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.document = document
        self.view = FlowView(document, self)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.view)
        self.setFocusProxy(self.view)

    def add_node_at_centre(self, type_name: str) -> str:
        """Add a node near the middle of what is visible, where it overlaps no other (palette double-click)."""
        return self.view.add_node_where_free(type_name)
