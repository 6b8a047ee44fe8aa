"""Render a quorum approval in the app: `python -m app.screenshot_approvals docs/screenshots` writes
app-approvals-quorum.png.

The embedded engine runs (in a temp data folder): a release flow whose approval needs 3 of 5 approvers,
reminds every 2 s and escalates after 3 s, is published and run; two approvers decide through the engine's
Python API, and the shot shows the Approvals panel's progress ("2 of 3 approved · escalated · N reminders
sent"), who decided, and the canvas badge on the approval node.
"""

from __future__ import annotations

import os
import sys
import tempfile
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from app.screenshots import _pause, _wait_for, open_published, shoot

if TYPE_CHECKING:
    from app.window import MainWindow

APPROVERS = ["ada", "bob", "cy", "dee", "eve"]


def _add_release_flow(window: MainWindow) -> None:
    document = window.new_flow()
    document.rename_flow("Release approval")
    start = document.add_node("trigger.manual", (0, 0), "Start")
    ask = document.add_node("approval", (260, 0), "Three sign-offs")
    for key, value in (
        ("message", "Release 2.0 to production?"),
        ("timeout", "1h"),
        ("approvers", APPROVERS),
        ("required", 3),
        ("remind_every", "2s"),
        ("escalate_after", "3s"),
        ("escalate_to", ["cto"]),
    ):
        document.set_config_field(ask, key, value)
    ship = document.add_node("terminal", (540, -70), "Released")
    hold = document.add_node("terminal", (540, 70), "Held back")
    document.connect(start, None, ask)
    document.connect(ask, "approved", ship)
    document.connect(ask, "rejected", hold)


def _progress_shown(window: MainWindow) -> bool:
    rows = window.approvals.approvals
    return bool(rows) and rows[0].approved_count == 2 and rows[0].escalated and rows[0].reminders_sent >= 2


def render_approvals(folder: Path) -> Path:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from app.gui import create_application

    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        app = create_application([])
        window = open_published(app, Path(scratch), "light")
        assert window.engine is not None and window.bridge is not None
        _add_release_flow(window)
        window.publish()
        _wait_for(
            lambda: (
                "release-approval" in window.statusBar().currentMessage()
                and "published" in window.statusBar().currentMessage()
            )
        )
        window.actions_by_id["live"].trigger()
        window.ask_run_inputs = lambda _flow: {}
        window.run_flow()
        _wait_for(lambda: bool(window.approvals.approvals))
        approval = window.approvals.approvals[0]
        api = window.bridge.api
        assert api is not None
        api.decide(approval.approval_id, "approve", actor="ada", comment="changelog reviewed")
        api.decide(approval.approval_id, "approve", actor="bob", comment="load test green")

        def refreshed() -> bool:
            assert window.engine is not None
            window.engine.refresh_approvals()
            _pause(0.3)
            return _progress_shown(window)

        _wait_for(partial(refreshed), seconds=30)
        window.docks["Approvals"].raise_()
        window.approvals.table.selectRow(0)
        editor = window.tabs.current_editor()
        assert editor is not None
        run_id = window.approvals.approvals[0].run_id
        window.engine.select_run(run_id)
        editor.view.flow_scene.select_nodes([approval.node])
        window.properties.show_node(approval.node)
        editor.view.fit_selection_or_all()
        _pause(0.5)
        editor.view.flush_live()
        return shoot(window, folder / "app-approvals-quorum.png")


if __name__ == "__main__":
    print(render_approvals(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/screenshots")))
