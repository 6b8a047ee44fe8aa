"""Problems, Runs, Approvals, Holds and the Run dialog on real widgets."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLineEdit, QPlainTextEdit

from app.panels.approvals import ApprovalsPanel
from app.panels.holds import BudgetBar, HoldsPanel
from app.panels.problems import ProblemsPanel
from app.panels.rows import ApprovalRow, BudgetRow, HoldRow, RunRow, usd
from app.panels.runs import RunsPanel
from app.run_dialog import InputError, RunInputsDialog
from canvas.document import FlowDocument
from engine.flow import load_flow
from tests.app.cells import cell

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def test_problems_lists_diagnostics_and_picks_nodes(qtbot, triage_path: Path) -> None:
    document = FlowDocument.open(triage_path)
    # A queue between the reserve and its model: the finance chain rule must fire.
    document.connect("reserve", None, "followup")
    document.disconnect(next(e for e in document.flow_ref().edges if e.from_ == "reserve" and e.to == "classify"))
    document.connect("followup", "default", "classify")
    diagnostics = document.validate_now()
    panel = ProblemsPanel()
    qtbot.addWidget(panel)
    panel.set_diagnostics(diagnostics)
    codes = [cell(panel.table, r, 1).text() for r in range(panel.table.rowCount())]
    assert "park_inside_finance_chain" in codes
    severities = [cell(panel.table, r, 0).toolTip() for r in range(panel.table.rowCount())]
    assert severities == sorted(severities, key=lambda s: s != "error")
    row = codes.index("park_inside_finance_chain")
    with qtbot.waitSignal(panel.node_activated) as picked:
        panel.table.selectRow(row)
    assert picked.args == [panel.diagnostics[row].node]
    assert "error" in panel.summary.text()

    panel.set_diagnostics([])
    assert panel.table.rowCount() == 0
    assert "No problems" in panel.summary.text()


def _run(run_id: str, status: str, minutes_ago: int, **extra: object) -> RunRow:
    started = NOW - timedelta(minutes=minutes_ago)
    return RunRow(run_id, "ticket-triage", 3, status, started, None, 0.0123, **extra)  # type: ignore[arg-type]


def test_runs_table_filters_by_status(qtbot) -> None:
    panel = RunsPanel(now=lambda: NOW)
    qtbot.addWidget(panel)
    assert panel.stack.showing_message
    panel.set_runs([
        _run("r1", "succeeded", 30),
        _run("r2", "waiting", 10, current_node="approve", waiting_reason="approval",
             waiting_until=NOW + timedelta(hours=23)),
        _run("r3", "running", 1, current_node="classify", tokens_in=125_300, tokens_out=980),
    ])
    assert not panel.stack.showing_message
    assert panel.row_count() == 3
    assert panel.cell_text(0, 8) == "r3"
    assert panel.cell_text(0, 5) == "$0.01"  # to the cent in the table; exact in its tooltip
    assert panel.cell_text(0, 6) == "125.3k in · 980 out"
    assert panel.cell_text(2, 6) == "—"  # no model call reported tokens
    panel.status_filter.setCurrentIndex(panel.status_filter.findData("waiting"))
    assert panel.row_count() == 1
    assert panel.cell_text(0, 2) == "v3"
    assert panel.cell_text(0, 7) == "approve: approval (23h left)"
    assert panel.cell_text(0, 4) == "10m"
    with qtbot.waitSignal(panel.run_selected) as chosen:
        panel.select_row(0)
    assert chosen.args == ["r2"]
    # A refresh keeps the selected run selected without announcing it again.
    panel.set_runs(list(panel.rows.values()))
    assert [i.row() for i in panel.table.selectionModel().selectedRows()] == [0]


def test_approvals_decide_with_comment(qtbot) -> None:
    panel = ApprovalsPanel(now=lambda: NOW)
    qtbot.addWidget(panel)
    assert not panel.approve_button.isEnabled()
    panel.set_approvals([
        ApprovalRow("a1", "ticket-triage", "r2", "approve", "Refund ticket 42?", NOW - timedelta(minutes=5),
                    NOW + timedelta(hours=1)),
    ])
    assert cell(panel.table, 0, 3).text() == "Refund ticket 42?"
    assert cell(panel.table, 0, 5).text() == "1h"
    panel.table.selectRow(0)
    assert panel.approve_button.isEnabled()
    panel.comment.setText("customer is right")
    with qtbot.waitSignal(panel.decision_made) as decided:
        panel.reject_button.click()
    assert decided.args == ["a1", False, "customer is right"]
    panel.set_approvals([])
    assert panel.stack.showing_message


def _approval(approval_id: str, run_id: str, minutes_ago: int) -> ApprovalRow:
    return ApprovalRow(approval_id, "refunds", run_id, "ask", f"Refund {run_id}?", NOW - timedelta(minutes=minutes_ago),
                       NOW + timedelta(hours=1))


def test_approvals_say_who_decides_show_a_refusal_and_move_on_only_after_the_list_updates(qtbot) -> None:
    panel = ApprovalsPanel(now=lambda: NOW)
    qtbot.addWidget(panel)
    panel.show()
    panel.set_decider("root")
    assert "Deciding as <b>root</b>" in panel.decider_label.text()
    asked: list[int] = []
    panel.change_name_requested.connect(lambda: asked.append(1))
    qtbot.mouseClick(panel.change_name_button, Qt.MouseButton.LeftButton)
    assert asked == [1]
    rows = [_approval("a1", "run-one", 9), _approval("a2", "run-two", 5), _approval("a3", "run-three", 1)]
    panel.set_approvals(rows)
    panel.table.selectRow(1)
    qtbot.keyClicks(panel.comment, "customer is right")
    with qtbot.waitSignal(panel.decision_made) as decided:
        qtbot.mouseClick(panel.approve_button, Qt.MouseButton.LeftButton)
    assert decided.args == ["a2", True, "customer is right"]
    assert not panel.approve_button.isEnabled() and not panel.reject_button.isEnabled()

    panel.decision_result("a2", False, "Not decided: root may not decide approval a2.")
    assert panel.problem == "Not decided: root may not decide approval a2."
    assert panel.comment.text() == "customer is right"
    assert panel.selected_approval() == rows[1] and panel.approve_button.isEnabled()

    panel.set_decider("alice")
    qtbot.mouseClick(panel.approve_button, Qt.MouseButton.LeftButton)
    panel.set_approvals(rows)  # a refresh that still lists the decided row: nothing moves, nothing is clickable
    assert panel.selected_approval() == rows[1] and not panel.approve_button.isEnabled()
    panel.decision_result("a2", True, "Approved as alice: run run-two continues through approved.")
    assert panel.comment.text() == "" and panel.problem is None
    assert panel.selected_approval() == rows[1] and not panel.approve_button.isEnabled()
    panel.set_approvals([rows[0], rows[2]])
    assert panel.selected_approval() == rows[2] and panel.approve_button.isEnabled()
    assert "Selected now: refunds run un-three (Refund run-three?)" in panel.result_label.text()  # its last 8

    # The list may update before the answer: no row is chosen until the answer is in.
    qtbot.mouseClick(panel.reject_button, Qt.MouseButton.LeftButton)
    panel.set_approvals([rows[0]])
    assert panel.selected_approval() is None and not panel.reject_button.isEnabled()
    panel.decision_result("a3", True, "Rejected as alice.")
    assert panel.selected_approval() == rows[0] and panel.reject_button.isEnabled()


def test_holds_bars_and_table(qtbot) -> None:
    panel = HoldsPanel()
    qtbot.addWidget(panel)
    budget = BudgetRow("default", 10.0, 2.5, 0.2, "month")
    panel.set_budgets([budget])
    panel.set_holds([HoldRow("h1", "r2", "classify", 0.2, "placed", NOW + timedelta(minutes=30))])
    bars = panel.bars_box.findChildren(BudgetBar)
    assert len(bars) == 1
    assert "remaining $7.30 of $10.00" in bars[0].caption()
    assert cell(panel.table, 0, 2).text() == "$0.20"
    assert usd(0.0035) == "$0.0035"
    bars[0].resize(300, 40)
    assert not bars[0].grab().isNull()


def test_run_dialog_masks_secrets_and_types_inputs(qtbot, triage_path: Path) -> None:
    dialog = RunInputsDialog(load_flow(triage_path), version=3)
    qtbot.addWidget(dialog)
    assert "v3" in dialog.windowTitle()
    token = dialog.widgets["crm_token"]
    assert isinstance(token, QLineEdit) and token.echoMode() == QLineEdit.EchoMode.Password
    ticket = dialog.widgets["ticket"]
    assert isinstance(ticket, QPlainTextEdit)
    try:
        dialog.values()
    except InputError as exc:
        assert "'ticket' is required" in str(exc)
    else:
        raise AssertionError("a missing required input was accepted")
    ticket.setPlainText('{"id": 42, "body": "please refund"}')
    token.setText("crm-secret")
    assert dialog.values() == {"ticket": {"id": 42, "body": "please refund"}, "crm_token": "crm-secret"}
    ticket.setPlainText("[1, 2]")
    dialog.accept()
    assert dialog.problem.text() == "input 'ticket' must be a JSON object {…}"
