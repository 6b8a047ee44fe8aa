"""Render a version comparison: `python -m app.screenshot_compare docs/screenshots` writes app-compare.png.

No engine: the triage example is opened, edited through the document's edit methods, and compared with the
example as shipped (what Flow ▸ Compare with version… does with a published version)."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from app.screenshots import WINDOW_SIZE, _pause, shoot


def render_compare(folder: Path, theme: str = "light") -> Path:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QMessageBox

    from app.gui import create_application, create_main_window
    from app.settings import AppSettings

    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        app = create_application([])
        settings = AppSettings(QSettings(str(Path(scratch) / f"{theme}.ini"), QSettings.Format.IniFormat))
        settings.theme = theme  # type: ignore[assignment]
        settings.first_start_done = True
        window = create_main_window(app, settings, start_engine=False)
        window.ask_to_save = lambda _document: QMessageBox.StandardButton.Discard
        window.resize(*WINDOW_SIZE)
        window.show()
        document = window.open_example("ticket-triage.flow.json")
        before = document.flow_ref().model_copy(deep=True)
        ids = [node.id for node in document.flow_ref().nodes]
        document.rename_node("classify", "Classify with a cheaper model")
        document.set_config_field("classify", "max_tokens", 200)
        removed = next(node_id for node_id in reversed(ids) if node_id not in ("start", "classify"))
        document.delete_nodes([removed])
        added = document.add_node("http.request", (900, 380), "Notify the team")
        document.set_config_field(added, "url", "https://chat.example.com/hooks/triage")
        window.comparisons.start(before, "v3")
        editor = window.tabs.current_editor()
        assert editor is not None
        _pause(0.3)
        editor.view.fit_selection_or_all()
        window.changes.list.setCurrentRow(0)
        _pause(0.3)
        editor.view.flow_scene.clearSelection()
        editor.view.fit_selection_or_all()
        _pause(0.3)
        return shoot(window, folder / f"app-compare{'' if theme == 'light' else '-' + theme}.png")


if __name__ == "__main__":
    print(render_compare(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/screenshots")))
