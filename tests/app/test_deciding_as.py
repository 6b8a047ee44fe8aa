"""Who decides: approvals decided in the app are decided as Settings ▸ General ▸ Your name (default the login
name); a refusal shows in the Approvals panel with the comment kept (real embedded engine)."""

from __future__ import annotations

import copy

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDialog

from app.settings import login_name
from app.settings_dialog import SettingsDialog
from app.window import MainWindow
from canvas.document import FlowDocument
from engine.flow import flow_from_data
from tests.app.approval_flows import approval_flow

ALICE_OR_BOB = approval_flow("refund-named", "Refund, named approvers",
                             {"timeout": "1h", "approvers": ["alice", "bob"], "message": "Refund?"})


def test_a_refused_decision_shows_in_the_panel_and_your_name_decides(qtbot, engine_window: MainWindow) -> None:
    window = engine_window
    panel = window.approvals
    assert window.settings.your_name == login_name() != "alice"
    assert f"Deciding as <b>{login_name()}</b>" in panel.decider_label.text()
    window.add_document(FlowDocument.from_flow(flow_from_data(copy.deepcopy(ALICE_OR_BOB))))
    window.publish()
    qtbot.waitUntil(lambda: window.statusBar().currentMessage() == "refund-named v1 published", timeout=10_000)
    window.ask_run_inputs = lambda _flow: {}
    window.run_flow()
    qtbot.waitUntil(lambda: len(panel.approvals) == 1, timeout=15_000)
    run_id = panel.approvals[0].run_id

    panel.table.selectRow(0)
    qtbot.keyClicks(panel.comment, "ok by me")
    qtbot.mouseClick(panel.approve_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: panel.problem is not None, timeout=10_000)
    assert f"{login_name()} may not decide" in (panel.problem or "") and "alice, bob" in (panel.problem or "")
    assert "Settings ▸ General" in (panel.problem or "")
    assert panel.comment.text() == "ok by me" and panel.approve_button.isEnabled()

    # The name is set in Settings (opened from the panel's link), then the same click decides.
    def answer(dialog: QDialog) -> int:
        assert isinstance(dialog, SettingsDialog)
        assert dialog.tabs.tabText(dialog.tabs.currentIndex()) == "General"
        dialog.your_name_edit.setText("alice")
        dialog.save()
        return QDialog.DialogCode.Accepted

    window.run_settings_dialog = answer
    qtbot.mouseClick(panel.change_name_button, Qt.MouseButton.LeftButton)
    assert window.settings.your_name == "alice" and "Deciding as <b>alice</b>" in panel.decider_label.text()
    qtbot.mouseClick(panel.approve_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: panel.approvals == [], timeout=10_000)
    assert "Approved as alice" in panel.result_label.text() and panel.comment.text() == ""
    qtbot.waitUntil(lambda: window.runs.rows.get(run_id) is not None
                    and window.runs.rows[run_id].status == "succeeded", timeout=15_000)
