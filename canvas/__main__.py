"""`python -m canvas [FILE]`: the canvas in a plain window (palette + editor)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from PySide6.QtCore import Qt
from PySide6.QtGui import QKeySequence
from PySide6.QtWidgets import QApplication, QDockWidget, QFileDialog, QMainWindow, QMessageBox

from canvas.document import FlowDocument
from canvas.editor import FlowEditor
from canvas.palette import NodePalette
from canvas.theme import apply_theme
from engine.flow import FlowLoadError


class CanvasWindow(QMainWindow):
    """A minimal window: palette dock, one editor, undo/redo, save."""

    def __init__(self, document: FlowDocument) -> None:
        super().__init__()
        self.editor = FlowEditor(document, self)
        self.setCentralWidget(self.editor)
        self.palette_widget = NodePalette(self)
        dock = QDockWidget("Nodes", self)
        dock.setWidget(self.palette_widget)
        dock.setFeatures(QDockWidget.DockWidgetFeature.NoDockWidgetFeatures)
        self.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, dock)
        self.palette_widget.activated.connect(self.editor.add_node_at_centre)
        menu = self.menuBar().addMenu("&Edit")
        undo = document.undo_stack.createUndoAction(self, "&Undo")
        undo.setShortcut(QKeySequence.StandardKey.Undo)
        redo = document.undo_stack.createRedoAction(self, "&Redo")
        redo.setShortcut(QKeySequence.StandardKey.Redo)
        menu.addActions([undo, redo])
        menu.addSeparator()
        menu.addActions(list(self.editor.view.actions_by_name.values()))
        file_menu = self.menuBar().addMenu("&File")
        save = file_menu.addAction("&Save")
        save.setShortcut(QKeySequence.StandardKey.Save)
        save.triggered.connect(self.save)
        self.editor.view.status.connect(lambda text: self.statusBar().showMessage(text, 4000))
        document.dirty_changed.connect(lambda _dirty: self._title())
        self._title()
        self.resize(1280, 800)

    def _title(self) -> None:
        document = self.editor.document
        name = document.path.name if document.path else "untitled.flow.json"
        self.setWindowTitle(f"{name}{' •' if document.is_dirty() else ''} — Lockgate canvas")

    def save(self) -> None:
        document = self.editor.document
        path = document.path
        if path is None:
            chosen, _ = QFileDialog.getSaveFileName(self, "Save flow", "untitled.flow.json", "Flows (*.flow.json)")
            if not chosen:
                return
            path = chosen  # type: ignore[assignment]
        document.save(path)
        self._title()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m canvas", description="Show the Lockgate canvas in a plain window.")
    parser.add_argument("file", nargs="?", help="a *.flow.json to open")
    parser.add_argument("--theme", choices=("light", "dark", "system"), default="system")
    args = parser.parse_args(argv)
    app = QApplication.instance() or QApplication(sys.argv[:1])
    assert isinstance(app, QApplication)
    apply_theme(app, args.theme)
    try:
        document = FlowDocument.open(args.file) if args.file else FlowDocument()
    except (OSError, FlowLoadError) as exc:
        message = f"cannot open {args.file}: {exc}; pick a *.flow.json file (lockgate validate FILE explains problems)"
        print(message, file=sys.stderr)
        if app.platformName() != "offscreen":
            QMessageBox.critical(None, "Cannot open flow", message)
        return 1
    window = CanvasWindow(document)
    window.show()
    window.editor.view.fit_selection_or_all()
    return app.exec()


if __name__ == "__main__":
    sys.exit(main())
