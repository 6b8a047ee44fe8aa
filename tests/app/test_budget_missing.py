"""A budget the engine does not have: a `budget_missing` warning with a button opening Settings ▸ Budgets on it,
a run refusal that points at that control (not at a CLI command), and both gone once the budget is added."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDialog, QMessageBox

from app.budget_check import BUDGET_MISSING
from app.gui import create_application, create_main_window
from app.settings import AppSettings
from app.settings_dialog import SettingsDialog
from app.window import MainWindow
from tests.app.cells import cell
from tests.app.test_first_start_example import TICKET


def missing(window: MainWindow) -> list[Any]:
    return [d for d in window.problems.diagnostics if d.code == BUDGET_MISSING]


def test_the_warning_waits_for_the_budgets_and_its_button_opens_settings_on_the_name(
        qtbot, app_settings: AppSettings, no_engine_env: None) -> None:
    app_settings.first_start_done = True
    window = create_main_window(create_application(), app_settings, start_engine=False)
    qtbot.addWidget(window)
    window.show()
    window.ask_to_save = lambda _document: QMessageBox.StandardButton.Discard
    document = window.open_example("ticket-triage.flow.json")
    assert missing(window) == []  # the engine's budgets are not known yet: nothing is claimed
    window.set_known_budgets({"ops"})
    (warning,) = missing(window)
    assert warning.severity == "warning" and warning.node == "reserve" and 'budget "default"' in warning.message
    assert "Settings ▸ Budgets" in warning.message and "lockgate" not in warning.message

    shown: list[tuple[str, str]] = []

    def inspect(dialog: QDialog) -> int:
        assert isinstance(dialog, SettingsDialog)
        row = dialog.budgets_table.currentRow()
        shown.append((dialog.tabs.tabText(dialog.tabs.currentIndex()), cell(dialog.budgets_table, row, 0).text()))
        return QDialog.DialogCode.Rejected

    window.run_settings_dialog = inspect
    row = window.problems.diagnostics.index(warning)
    button = window.problems.fix_button(row)
    assert button is not None and button.text() == "Budget default…"
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    assert shown == [("Budgets", "default")]

    window.set_known_budgets({"ops", "default"})
    assert missing(window) == [] and window.problems.fix_button(0) is None
    document.set_config_field("reserve", "budget", "marketing")
    document.validate_now()
    assert [d.message.split('"')[3] for d in missing(window)] == ["marketing"]


def test_publish_warns_a_run_is_refused_with_the_app_control_and_adding_the_budget_clears_both(
        qtbot, engine_window: MainWindow) -> None:
    window = engine_window
    document = window.open_example("ticket-triage.flow.json")
    document.set_config_field("reserve", "budget", "marketing")
    window.publish()
    qtbot.waitUntil(lambda: window.statusBar().currentMessage().startswith("ticket-triage v1 published"),
                    timeout=10_000)
    status = window.statusBar().currentMessage()
    assert 'no budget "marketing"' in status and "Settings ▸ Budgets" in status
    assert [d.node for d in missing(window)] == ["reserve"]

    window.ask_run_inputs = lambda _flow: {"ticket": TICKET}
    window.run_flow()
    qtbot.waitUntil(lambda: window.statusBar().currentMessage().startswith("Run of ticket-triage not started"),
                    timeout=10_000)
    refusal = window.statusBar().currentMessage()
    assert 'budget "marketing"' in refusal and "Settings ▸ Budgets" in refusal and "lockgate" not in refusal

    def add_it(dialog: QDialog) -> int:
        assert isinstance(dialog, SettingsDialog)
        assert cell(dialog.budgets_table, dialog.budgets_table.currentRow(), 0).text() == "marketing"
        dialog.save()
        return QDialog.DialogCode.Accepted

    window.run_settings_dialog = add_it
    row = window.problems.diagnostics.index(missing(window)[0])
    button = window.problems.fix_button(row)
    assert button is not None
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: missing(window) == [], timeout=10_000)
    assert "marketing" in {b.name for b in window.holds.budgets}
    window.run_flow()
    qtbot.waitUntil(lambda: "of ticket-triage v1 started" in window.statusBar().currentMessage(), timeout=10_000)
