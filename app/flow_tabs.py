"""The centre of the window: one canvas tab per open flow, marked `*` while it has unsaved changes."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QTabWidget, QWidget

if TYPE_CHECKING:
    from canvas.document import FlowDocument
    from canvas.editor import FlowEditor

DIRTY_MARK = " *"


def tab_title(document: FlowDocument) -> str:
    """The file name (or the flow's name for a new flow), with `*` when unsaved."""
    if document.path is not None:
        name = Path(document.path).name
    else:
        flow = document.flow_ref()
        name = flow.name or flow.id
    return name + (DIRTY_MARK if document.is_dirty() else "")


class FlowTabs(QTabWidget):
    """Holds the editors; the window asks it for the current document and listens to its signals."""

    current_document_changed = Signal(object)
    selection_changed = Signal(list)
    close_requested = Signal(int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("flowTabs")
        self.setDocumentMode(True)
        self.setTabsClosable(True)
        self.setMovable(True)
        self.tabCloseRequested.connect(self.close_requested.emit)
        self.currentChanged.connect(lambda _index: self.current_document_changed.emit(self.current_document()))

    def add_document(self, document: FlowDocument) -> FlowEditor:
        from canvas.editor import FlowEditor

        editor = FlowEditor(document, self)
        index = self.addTab(editor, tab_title(document))
        self.setTabToolTip(index, str(document.path) if document.path else "Not saved yet")
        document.dirty_changed.connect(lambda _dirty, d=document: self.refresh_title(d))
        document.path_changed.connect(lambda _path, d=document: self.refresh_title(d))
        document.header_changed.connect(lambda d=document: self.refresh_title(d))
        editor.view.selection_changed.connect(lambda ids, e=editor: self._forward_selection(e, ids))
        self.setCurrentIndex(index)
        return editor

    def _forward_selection(self, editor: FlowEditor, node_ids: list[str]) -> None:
        if editor is self.currentWidget():
            self.selection_changed.emit(list(node_ids))

    def documents(self) -> list[FlowDocument]:
        return [self.document_at(i) for i in range(self.count())]

    def document_at(self, index: int) -> FlowDocument:
        return self.editor_at(index).document

    def editor_at(self, index: int) -> FlowEditor:
        from canvas.editor import FlowEditor

        editor = self.widget(index)
        if not isinstance(editor, FlowEditor):
            raise IndexError(f"no flow tab at index {index}")
        return editor

    def current_document(self) -> FlowDocument | None:
        return self.document_at(self.currentIndex()) if self.count() else None

    def current_editor(self) -> FlowEditor | None:
        return self.editor_at(self.currentIndex()) if self.count() else None

    def index_of(self, document: FlowDocument) -> int:
        for index in range(self.count()):
            if self.document_at(index) is document:
                return index
        return -1

    def index_of_path(self, path: Path) -> int:
        for index, document in enumerate(self.documents()):
            if document.path is not None and Path(document.path).resolve() == path.resolve():
                return index
        return -1

    def refresh_title(self, document: FlowDocument) -> None:
        index = self.index_of(document)
        if index >= 0:
            self.setTabText(index, tab_title(document))
            self.setTabToolTip(index, str(document.path) if document.path else "Not saved yet")

    def remove_at(self, index: int) -> None:
        widget = self.widget(index)
        self.removeTab(index)
        if widget is not None:
            widget.deleteLater()
