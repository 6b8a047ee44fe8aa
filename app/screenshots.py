"""Render the main window with the triage example in light and dark: `python -m app.screenshots docs/screenshots`.

The embedded engine runs (in a temp data folder): the example is published and run once, and the
shot shows live mode with the run parked on its approval and the Approvals panel.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from PySide6.QtWidgets import QApplication

    from app.settings import ThemeMode
    from app.window import MainWindow

WINDOW_SIZE = (1600, 1000)
DEMO_TICKET = {"id": 42, "body": "I was charged twice, please refund me"}


def render(folder: Path) -> list[Path]:
    """Write app-light.png and app-dark.png (and run-details-light/dark.png: the parked run's details window)
    into `folder`; returns their paths."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from app.gui import create_application

    folder.mkdir(parents=True, exist_ok=True)
    written = []
    with tempfile.TemporaryDirectory() as scratch:
        app = create_application([])
        modes: tuple[ThemeMode, ...] = ("light", "dark")
        for mode in modes:
            window = open_published(app, Path(scratch), mode)
            assert window.engine is not None
            editor = window.tabs.current_editor()
            assert editor is not None
            window.actions_by_id["live"].trigger()
            window.ask_run_inputs = lambda _flow: {"ticket": DEMO_TICKET}
            window.run_flow()
            _wait_for(partial(_approval_pending, window))
            run_id = next(iter(window.runs.rows))
            written.append(shoot_run_details(window, run_id, folder / f"run-details-{mode}.png"))
            window.engine.select_run(run_id)
            window.docks["Approvals"].raise_()
            window.approvals.table.selectRow(0)
            editor.view.fit_selection_or_all()
            editor.view.flow_scene.select_nodes(["classify"])
            window.properties.show_node("classify")
            _pause(0.5)
            editor.view.flush_live()
            written.append(shoot(window, folder / f"app-{mode}.png"))
    return written


def open_published(app: QApplication, scratch: Path, mode: ThemeMode) -> MainWindow:
    """The main window in `mode` on its own engine (data and settings in `scratch`), the triage example
    published."""
    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QMessageBox

    from app.gui import create_main_window
    from app.settings import AppSettings, BudgetSetting

    os.environ["LOCKGATE_DATA_DIR"] = str(scratch / f"data-{mode}")
    settings = AppSettings(QSettings(str(scratch / f"{mode}.ini"), QSettings.Format.IniFormat))
    settings.theme = mode
    settings.set_budgets([BudgetSetting("default", 25.0, "month")])
    window = create_main_window(app, settings, start_engine=False)
    window.ask_to_save = lambda _document: QMessageBox.StandardButton.Discard
    window.resize(*WINDOW_SIZE)
    window.show()
    assert window.bridge is not None
    window.bridge.start()
    _wait_for(partial(_engine_settled, window))
    window.publish()
    _wait_for(partial(_published, window))
    return window


def shoot(window: MainWindow, target: Path) -> Path:
    """Let the window paint, save it to `target`, close it."""
    from PySide6.QtWidgets import QApplication

    for _ in range(5):
        QApplication.processEvents()
    window.grab().save(str(target))
    window.close()
    QApplication.processEvents()
    return target


def shoot_run_details(window: MainWindow, run_id: str, target: Path) -> Path:
    """Open the run's details window, show its classify step, save it to `target` and close it."""
    from PySide6.QtWidgets import QApplication

    assert window.engine is not None
    window.engine.open_run(run_id)
    _wait_for(partial(_details_shown, window))
    details = window.engine.details
    assert details is not None
    steps = details.run.steps if details.run else []
    for row, step in enumerate(steps):
        if step.node == "classify":
            details.steps.selectRow(row)
    for _ in range(5):
        QApplication.processEvents()
    details.grab().save(str(target))
    details.hide()
    return target


def _details_shown(window: MainWindow) -> bool:
    return window.engine is not None and window.engine.details is not None and window.engine.details.isVisible()


def _engine_settled(window: MainWindow) -> bool:
    return window.bridge is not None and window.bridge.state in ("running", "failed")


def _published(window: MainWindow) -> bool:
    return "published" in window.statusBar().currentMessage()


def _approval_pending(window: MainWindow) -> bool:
    return bool(window.approvals.approvals)


def _wait_for(condition: Callable[[], bool], seconds: float = 60.0) -> None:
    """Process events until `condition` holds; a shot of the wrong moment is worse than none, so time out loudly."""
    from PySide6.QtWidgets import QApplication

    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            name = getattr(condition, "func", condition).__name__
            raise TimeoutError(f"screenshot: {name} did not happen in {seconds:.0f} s")
        QApplication.processEvents()
        time.sleep(0.02)


def _pause(seconds: float) -> None:
    from PySide6.QtWidgets import QApplication

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        QApplication.processEvents()
        time.sleep(0.02)


if __name__ == "__main__":
    for path in render(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/screenshots")):
        print(path)
