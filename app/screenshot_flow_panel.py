"""Render a flow made in the app with its flow panel: `python -m app.screenshot_flow_panel docs/screenshots`
writes app-flow-panel.png.

No engine: a New flow is named, given inputs and a limit in the flow panel, and four nodes are added and wired
through the document's edit methods (the commands the canvas and the panel use).
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from app.screenshots import WINDOW_SIZE, _pause, shoot


def render_flow_panel(folder: Path) -> Path:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QMessageBox

    from app.gui import create_application, create_main_window
    from app.settings import AppSettings
    from canvas.flow_header import input_spec

    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        app = create_application([])
        settings = AppSettings(QSettings(str(Path(scratch) / "light.ini"), QSettings.Format.IniFormat))
        settings.theme = "light"
        settings.first_start_done = True
        window = create_main_window(app, settings, start_engine=False)
        window.ask_to_save = lambda _document: QMessageBox.StandardButton.Discard  # closing after the shot
        window.resize(*WINDOW_SIZE)
        window.show()
        document = window.new_flow()
        document.rename_flow("Refund approvals")
        document.set_description("Ask a person before a refund is paid; pay it through the refunds API.")
        document.add_input("ticket", input_spec("object", True, False, "The ticket as the help desk sends it"))
        document.add_input("amount", input_spec("number", True, False, "Refund in USD", 20, True))
        document.add_input("api_token", input_spec("string", False, True, None))
        document.set_setting("max_wait", "48h")
        start = document.add_node("trigger.manual", (0, 0), "Start")
        ask = document.add_node("approval", (240, 0), "Approve refund")
        document.set_config_field(ask, "message", "Refund ${{ inputs.amount }} for ticket {{ inputs.ticket.id }}?")
        pay = document.add_node("http.request", (480, -60), "Pay refund")
        document.set_config_field(pay, "method", "POST")
        document.set_config_field(pay, "url", "https://payments.example.com/refunds")
        done = document.add_node("terminal", (720, 0), "Done")
        document.connect(start, None, ask)
        document.connect(ask, "approved", pay)
        document.connect(pay, None, done)
        document.connect(ask, "rejected", done)
        window.show_flow_properties()
        editor = window.tabs.current_editor()
        assert editor is not None
        _pause(0.3)
        editor.view.fit_selection_or_all()
        _pause(0.3)
        return shoot(window, folder / "app-flow-panel.png")


if __name__ == "__main__":
    print(render_flow_panel(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/screenshots")))
