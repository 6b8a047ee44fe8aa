"""Comparing a draft with a published version: one overlay per open document, the Changes panel for the
current one, stepping through the changes from the keyboard."""

from __future__ import annotations

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QDockWidget

from app.flow_tabs import FlowTabs
from app.panels.changes import ChangesPanel
from canvas.diff_overlay import DiffOverlay
from canvas.document import FlowDocument
from engine.flow import Flow
from engine.flow_diff import FlowDiff


class Comparisons(QObject):
    def __init__(self, tabs: FlowTabs, panel: ChangesPanel, dock: QDockWidget) -> None:
        super().__init__(panel)
        self.tabs = tabs
        self.panel = panel
        self.dock = dock
        self.overlays: dict[int, DiffOverlay] = {}
        """By `id(document)`; an overlay lives as long as its scene."""
        panel.node_chosen.connect(self._reveal)
        panel.stop_requested.connect(self.stop)

    def current(self) -> DiffOverlay | None:
        document = self.tabs.current_document()
        return self.overlays.get(id(document)) if document is not None else None

    def start(self, before: Flow, label: str) -> DiffOverlay | None:
        """Compare the current draft with `before` (e.g. the flow of version 3, `label` "v3")."""
        editor = self.tabs.current_editor()
        document = self.tabs.current_document()
        if editor is None or document is None:
            return None
        self.stop()
        overlay = DiffOverlay(editor.view.flow_scene, before, label)
        self.overlays[id(document)] = overlay
        overlay.changed.connect(self._show_current)
        document.destroyed.connect(lambda *_: self.overlays.pop(id(document), None))
        self._show_current()
        self.dock.show()
        self.dock.raise_()
        return overlay

    def stop(self) -> None:
        overlay = self.current()
        document = self.tabs.current_document()
        if overlay is None or document is None:
            return
        del self.overlays[id(document)]
        overlay.changed.disconnect(self._show_current)
        overlay.clear()
        self._show_current()

    def document_switched(self, _document: FlowDocument | None) -> None:
        self._show_current()

    def step(self, delta: int) -> None:
        if self.current() is not None:
            self.dock.show()
            self.panel.step(delta)

    def _show_current(self) -> None:
        overlay = self.current()
        if overlay is None:
            self.panel.show_diff(None, FlowDiff(), [])
            return
        self.panel.show_diff(overlay.label, overlay.diff, overlay.navigable())

    def _reveal(self, node_id: str) -> None:
        editor = self.tabs.current_editor()
        document = self.tabs.current_document()
        if editor is None or document is None:
            return
        if document.node(node_id) is not None:
            editor.view.select_node(node_id)
            editor.view.center_on_node(node_id)
            return
        overlay = self.current()
        old = overlay.before.node(node_id) if overlay is not None else None
        if old is not None:
            editor.view.scene().clearSelection()
            editor.view.centerOn(old.position[0], old.position[1])
