"""The centre of the window: one canvas tab per open flow, titled with the flow's name and marked `*` while it
has unsaved changes; the tooltip names the file. Messages of every canvas (wire hints, refusals) come out of
`status`."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtWidgets import QTabBar, QTabWidget, QToolButton, QWidget

from app.toolbar_icons import toolbar_icon

if TYPE_CHECKING:
    from canvas.document import FlowDocument
    from canvas.editor import FlowEditor

DIRTY_MARK = " *"
NOT_SAVED = "not saved"


def flow_label(document: FlowDocument) -> str:
    """The flow's name (its id when it has none)."""
    flow = document.flow_ref()
    return flow.name or flow.id


def tab_title(document: FlowDocument, where: str | None = None) -> str:
    """The flow's name, with `where` (its file, to tell same-named tabs apart) and `*` when unsaved."""
    name = flow_label(document) + (f" — {where}" if where else "")
    return name + (DIRTY_MARK if document.is_dirty() else "")


def tab_tooltip(document: FlowDocument) -> str:
    return str(document.path) if document.path is not None else "Not saved yet"


class FlowTabs(QTabWidget):
    """Holds the editors; the window asks it for the current document and listens to its signals."""

    current_document_changed = Signal(object)
    selection_changed = Signal(list)
    close_requested = Signal(int)
    status = Signal(str)
    """A canvas's message (wire hints while dragging, why a connection was refused), from any tab."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("flowTabs")
        self.setDocumentMode(True)
        self.setMovable(True)
        self.fixed_titles: dict[int, tuple[str, str]] = {}
        """(title, tooltip) by id(document) of tabs whose title is not the flow's name (a published version)."""
        self.currentChanged.connect(lambda _index: self.current_document_changed.emit(self.current_document()))

    def add_document(self, document: FlowDocument) -> FlowEditor:
        from canvas.editor import FlowEditor

        editor = FlowEditor(document, self)
        index = self.addTab(editor, tab_title(document))
        self.tabBar().setTabButton(index, QTabBar.ButtonPosition.RightSide, self._close_button(editor))
        self.setTabToolTip(index, tab_tooltip(document))
        document.dirty_changed.connect(lambda _dirty, d=document: self.refresh_title(d))
        document.path_changed.connect(lambda _path, d=document: self.refresh_title(d))
        document.header_changed.connect(lambda d=document: self.refresh_title(d))
        editor.view.selection_changed.connect(lambda ids, e=editor: self._forward_selection(e, ids))
        editor.view.status.connect(self.status)
        self.refresh_titles()
        self.setCurrentIndex(index)
        return editor


    def _close_button(self, editor: QWidget) -> QToolButton:
        """The tab's close button: an outline cross in the text colour (the style's own is a red square, which
        reads as an error badge), closing the tab it sits on wherever that tab has moved."""
        button = QToolButton(self.tabBar())
        button.setObjectName("tabClose")
        button.setAutoRaise(True)
        button.setIcon(toolbar_icon("close", self.palette()))
        button.setIconSize(QSize(14, 14))
        button.setToolTip("Close this flow (Ctrl+W)")
        button.setCursor(Qt.CursorShape.PointingHandCursor)
        button.clicked.connect(lambda: self.close_requested.emit(self.indexOf(editor)))
        return button

    def refresh_close_buttons(self) -> None:
        """Draw the close buttons again in the palette in force (after a theme change)."""
        for index in range(self.count()):
            button = self.tabBar().tabButton(index, QTabBar.ButtonPosition.RightSide)
            if isinstance(button, QToolButton):
                button.setIcon(toolbar_icon("close", self.palette()))
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

    def tab_name(self, index: int) -> str:
        """The tab's title without the unsaved-changes mark."""
        return self.tabText(index).removesuffix(DIRTY_MARK)

    def set_fixed_title(self, document: FlowDocument, title: str, tooltip: str) -> None:
        """Title `document`'s tab `title` for good (not the flow's name), e.g. a published version's."""
        self.fixed_titles[id(document)] = (title, tooltip)
        self.refresh_titles()

    def refresh_title(self, document: FlowDocument) -> None:
        """`document`'s tab after its name, file or unsaved state changed (tabs of the same name too)."""
        self.refresh_titles()

    def refresh_titles(self) -> None:
        """Every tab: the flow's name; tabs that share a name say which file each is (or that it is not saved)."""
        documents = self.documents()
        named = [d for d in documents if id(d) not in self.fixed_titles]
        shared = {name for name, count in Counter(flow_label(d) for d in named).items() if count > 1}
        wheres = {id(d): _where(d) for d in named if flow_label(d) in shared}
        # Same name and same file name (different folders): the folder tells them apart.
        for file_name, count in Counter(wheres.values()).items():
            if count > 1 and file_name != NOT_SAVED:
                for d in named:
                    if wheres.get(id(d)) == file_name and d.path is not None:
                        wheres[id(d)] = f"{Path(d.path).parent.name}/{file_name}"
        seen: Counter[tuple[str, str]] = Counter()
        for index, document in enumerate(documents):
            fixed = self.fixed_titles.get(id(document))
            if fixed is not None:
                title, tooltip = fixed[0] + (DIRTY_MARK if document.is_dirty() else ""), fixed[1]
            else:
                where = wheres.get(id(document))
                if where is not None:
                    key = (flow_label(document), where)
                    seen[key] += 1
                    if seen[key] > 1:  # unsaved flows of one name: numbered in tab order
                        where = f"{where} {seen[key]}"
                title, tooltip = tab_title(document, where), tab_tooltip(document)
            if self.tabText(index) != title:
                self.setTabText(index, title)
            self.setTabToolTip(index, tooltip)

    def remove_at(self, index: int) -> None:
        widget = self.widget(index)
        if widget is not None:
            self.fixed_titles.pop(id(self.document_at(index)), None)
        self.removeTab(index)
        if widget is not None:
            widget.deleteLater()
        self.refresh_titles()


def _where(document: FlowDocument) -> str:
    return Path(document.path).name if document.path is not None else NOT_SAVED
