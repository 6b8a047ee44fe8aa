"""Render the main window with the triage example in light and dark: `python -m app.screenshots docs/screenshots`."""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

WINDOW_SIZE = (1600, 1000)


def render(folder: Path) -> list[Path]:
    """Write app-light.png and app-dark.png into `folder`; returns their paths."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QApplication, QMessageBox

    from app.gui import create_application, create_main_window
    from app.settings import AppSettings

    folder.mkdir(parents=True, exist_ok=True)
    written = []
    with tempfile.TemporaryDirectory() as scratch:
        os.environ["LOCKGATE_DATA_DIR"] = str(Path(scratch) / "data")
        app = create_application([])
        for mode in ("light", "dark"):
            settings = AppSettings(QSettings(str(Path(scratch) / f"{mode}.ini"), QSettings.Format.IniFormat))
            settings.theme = mode
            window = create_main_window(app, settings, start_engine=False)
            window.ask_to_save = lambda _document: QMessageBox.StandardButton.Discard
            window.resize(*WINDOW_SIZE)
            window.show()
            if window.bridge is not None:
                window.bridge.start()
                deadline = time.monotonic() + 60
                while window.bridge.state not in ("running", "failed") and time.monotonic() < deadline:
                    QApplication.processEvents()
                    time.sleep(0.02)
            for _ in range(5):
                QApplication.processEvents()
            editor = window.tabs.current_editor()
            assert editor is not None
            editor.view.fit_selection_or_all()
            editor.view.flow_scene.select_nodes(["classify"])
            window.properties.show_node("classify")
            for _ in range(5):
                QApplication.processEvents()
            target = folder / f"app-{mode}.png"
            window.grab().save(str(target))
            written.append(target)
            window.close()
            QApplication.processEvents()
    return written


if __name__ == "__main__":
    for path in render(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/screenshots")):
        print(path)
