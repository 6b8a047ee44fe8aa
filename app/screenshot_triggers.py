"""Render the Triggers dock: `python -m app.screenshot_triggers docs/screenshots` writes app-triggers.png.

The embedded engine runs in a temp data folder: the triage example is published, its webhook enabled (so it
has a URL and token) and disabled again, and one signed delivery sent to it, which started nothing: the dock
counts it and the canvas marks the node.
"""

from __future__ import annotations

import os
import sys
import tempfile
from functools import partial
from pathlib import Path

from app.screenshots import WINDOW_SIZE, _engine_settled, _pause, _published, _wait_for


def render_triggers(folder: Path) -> Path:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import QSettings, Qt
    from PySide6.QtWidgets import QApplication, QMessageBox

    from app.gui import create_application, create_main_window
    from app.settings import AppSettings, BudgetSetting
    from engine.triggers.webhooks import handle_webhook, signature_of

    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        app = create_application([])
        os.environ["LOCKGATE_DATA_DIR"] = str(Path(scratch) / "data")
        settings = AppSettings(QSettings(str(Path(scratch) / "light.ini"), QSettings.Format.IniFormat))
        settings.theme = "light"
        settings.set_budgets([BudgetSetting("default", 25.0, "month")])
        window = create_main_window(app, settings, start_engine=False)
        window.ask_to_save = lambda _document: QMessageBox.StandardButton.Discard
        window.resize(*WINDOW_SIZE)
        window.show()
        assert window.bridge is not None and window.trigger_watch is not None
        window.bridge.start()
        _wait_for(partial(_engine_settled, window))
        window.publish()
        _wait_for(partial(_published, window))
        window.show_triggers()
        panel = window.triggers
        _wait_for(lambda: panel.row_of("hook") is not None)
        window.trigger_watch.set_enabled("hook", "trigger.webhook", True)
        _wait_for(lambda: bool((row := panel.row_of("hook")) and row.token))
        window.trigger_watch.set_enabled("hook", "trigger.webhook", False)
        _wait_for(lambda: bool((row := panel.row_of("hook")) and row.state == "disabled"))
        row = panel.row_of("hook")
        assert row is not None
        services = window.bridge.services
        body = b'{"ticket": {"id": 42, "body": "I was charged twice"}}'
        handle_webhook(services.handles, services.create_run, row.token,
                       {"X-Hub-Signature-256": signature_of(body, row.token), "X-Delivery-Id": "d-1"}, body)
        window.trigger_watch.refresh()
        _wait_for(lambda: bool((r := panel.row_of("hook")) and r.disabled_hits))
        editor = window.tabs.current_editor()
        assert editor is not None
        editor.view.fit_selection_or_all()
        editor.view.flow_scene.select_nodes(["hook"])
        window.properties.show_node("hook")
        window.resizeDocks([window.docks["Triggers"]], [260], Qt.Orientation.Vertical)
        _pause(0.5)
        for _ in range(5):
            QApplication.processEvents()
        target = folder / "app-triggers.png"
        window.grab().save(str(target))
        window.close()
        QApplication.processEvents()
    return target


if __name__ == "__main__":
    print(render_triggers(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/screenshots")))
