"""Render the Triggers dock: `python -m app.screenshot_triggers docs/screenshots` writes app-triggers.png.

The embedded engine runs in a temp data folder: the triage example is published, its webhook enabled (so it
has a URL and token) and disabled again, and one signed delivery sent to it, which started nothing: the dock
counts it and the canvas marks the node.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from app.screenshots import _pause, _wait_for, open_published, shoot


def render_triggers(folder: Path) -> Path:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import Qt

    from app.gui import create_application
    from engine.triggers.webhooks import signature_of

    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        app = create_application([])
        window = open_published(app, Path(scratch), "light")
        assert window.bridge is not None and window.trigger_watch is not None
        window.show_triggers()
        panel = window.triggers
        _wait_for(lambda: panel.row_of("hook") is not None)
        window.trigger_watch.set_enabled("hook", "trigger.webhook", True)
        _wait_for(lambda: bool((row := panel.row_of("hook")) and row.token))
        window.trigger_watch.set_enabled("hook", "trigger.webhook", False)
        _wait_for(lambda: bool((row := panel.row_of("hook")) and row.state == "disabled"))
        row = panel.row_of("hook")
        assert row is not None
        api = window.bridge.api
        assert api is not None
        body = b'{"ticket": {"id": 42, "body": "I was charged twice"}}'
        api.webhook(row.token, {"X-Hub-Signature-256": signature_of(body, row.token), "X-Delivery-Id": "d-1"}, body)
        window.trigger_watch.refresh()
        _wait_for(lambda: bool((r := panel.row_of("hook")) and r.disabled_hits))
        editor = window.tabs.current_editor()
        assert editor is not None
        editor.view.fit_selection_or_all()
        editor.view.flow_scene.select_nodes(["hook"])
        window.properties.show_node("hook")
        window.resizeDocks([window.docks["Triggers"]], [260], Qt.Orientation.Vertical)
        _pause(0.5)
        return shoot(window, folder / "app-triggers.png")


if __name__ == "__main__":
    print(render_triggers(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/screenshots")))
