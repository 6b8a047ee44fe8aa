"""Approvals v2 in the app, on real widgets and a running embedded engine: the Approvals panel's quorum progress,
who decided, "escalated" and reminders; the canvas badge "1 of 2 approved"; forbid_self refusing the app's user."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from PySide6.QtCore import Qt

from app.approval_badges import quorum_badges
from app.panels.approvals import ApprovalsPanel
from app.panels.rows import ApprovalRow, ApprovalVoteRow
from app.window import MainWindow
from canvas.document import FlowDocument
from tests.app.approval_flows import approval_flow
from tests.app.cells import cell

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)

QUORUM_FLOW = approval_flow(
    "release-ok", "Release OK?",
    {"timeout": "1h", "message": "Release 2.0?", "required": 2, "forbid_self": True},
    title="Two approvers", done="Released", declined="Held back", inputs={},
)


def _quorum_row(run_id: str = "run-1", approved: int = 2, escalated: bool = True) -> ApprovalRow:
    votes = tuple(
        ApprovalVoteRow(f"key:k{i}", "approve", "ok" if i == 0 else "", NOW - timedelta(minutes=3 - i))
        for i in range(approved)
    )
    return ApprovalRow(
        "a1",
        "release",
        run_id,
        "ask",
        "Release?",
        NOW - timedelta(minutes=10),
        NOW + timedelta(hours=1),
        3,
        approved,
        votes,
        escalated,
        2,
    )


def test_the_panel_shows_quorum_progress_who_decided_escalation_and_reminders(qtbot) -> None:
    panel = ApprovalsPanel(now=lambda: NOW)
    qtbot.addWidget(panel)
    panel.show()
    plain = ApprovalRow(
        "a0", "refunds", "run-0", "ask", "Refund?", NOW - timedelta(minutes=20), NOW + timedelta(hours=1)
    )
    panel.set_approvals([plain, _quorum_row()])
    assert cell(panel.table, 0, 6).text() == ""  # a v1 approval: nothing new
    assert cell(panel.table, 1, 6).text() == "2 of 3 approved · escalated · 2 reminders sent"
    assert "approved by key:k0" in cell(panel.table, 1, 6).toolTip()
    panel.table.selectRow(0)
    assert panel.decided_label.isHidden()
    rect = panel.table.visualRect(panel.table.model().index(1, 0))
    qtbot.mouseClick(panel.table.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    assert panel.selected_approval() == _quorum_row()
    assert not panel.decided_label.isHidden()
    text = panel.decided_label.text()
    assert "2 of 3 approved" in text and "approved by key:k0" in text and "“ok”" in text and "key:k1" in text


def test_a_vote_short_of_the_quorum_keeps_the_row_and_frees_the_buttons(qtbot) -> None:
    panel = ApprovalsPanel(now=lambda: NOW)
    qtbot.addWidget(panel)
    panel.set_approvals([_quorum_row(approved=1, escalated=False)])
    panel.table.selectRow(0)
    with qtbot.waitSignal(panel.decision_made):
        panel.approve_button.click()
    assert not panel.approve_button.isEnabled()
    panel.decision_result(
        "a1", True, "Approved as ada: 2 of 3 approved; run run-1 waits for 1 more.", still_pending=True
    )
    assert panel.approve_button.isEnabled() and panel.problem is None
    assert "waits for 1 more" in panel.result_label.text()


def test_badges_prefer_the_selected_run() -> None:
    first, second = _quorum_row("run-1", 1), _quorum_row("run-2", 2)
    assert quorum_badges([first, second], "release", None)["ask"][0] == "1 of 3 approved"  # the later request
    assert quorum_badges([first, second], "release", "run-2")["ask"][0] == "2 of 3 approved"
    assert "1 more run waiting here" in quorum_badges([first, second], "release", "run-2")["ask"][1]
    assert quorum_badges([first], "other-flow", None) == {}


def test_a_quorum_in_the_app_panel_and_canvas_badge(qtbot, engine_window: MainWindow) -> None:
    from engine.approvals.decide import decide
    from engine.flow import flow_from_data

    window = engine_window
    window.settings.your_name = "root"
    document = FlowDocument.from_flow(flow_from_data(QUORUM_FLOW))
    window.add_document(document)
    window.publish()
    qtbot.waitUntil(lambda: window.statusBar().currentMessage() == "release-ok v1 published", timeout=10_000)
    window.ask_run_inputs = lambda _flow: {}
    window.run_flow()
    qtbot.waitUntil(lambda: len(window.approvals.approvals) == 1, timeout=15_000)
    [pending] = window.approvals.approvals
    assert (pending.required, pending.approved_count) == (2, 0)
    assert cell(window.approvals.table, 0, 6).text() == "0 of 2 approved"

    # The app's user started the run, and forbid_self refuses them.
    window.approvals.table.selectRow(0)
    window.approvals.approve_button.click()
    qtbot.waitUntil(lambda: window.approvals.problem is not None, timeout=10_000)
    assert "forbid_self" in (window.approvals.problem or "")

    # Another user decides in the panel: a vote short of the quorum keeps the row and frees the buttons.
    window.settings.your_name = "ada"
    window.approvals.set_decider("ada")
    window.approvals.comment.setText("tests are green")
    qtbot.mouseClick(window.approvals.approve_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: "1 of 2 approved" in window.approvals.result_label.text(), timeout=10_000)
    assert window.approvals.problem is None and "waits for 1 more" in window.approvals.result_label.text()
    qtbot.waitUntil(
        lambda: bool(window.approvals.approvals) and window.approvals.approvals[0].approved_count == 1, timeout=10_000
    )
    qtbot.waitUntil(lambda: window.approvals.approve_button.isEnabled(), timeout=20_000)
    assert [(v.by, v.comment) for v in window.approvals.approvals[0].decisions] == [("ada", "tests are green")]
    services = window.bridge.services if window.bridge is not None else None
    assert services is not None
    assert window.engine is not None
    assert cell(window.approvals.table, 0, 6).text() == "1 of 2 approved"
    editor = window.tabs.current_editor()
    assert editor is not None
    item = editor.view.flow_scene.node_items["ask"]
    qtbot.waitUntil(lambda: item.quorum[0] == "1 of 2 approved", timeout=10_000)

    assert decide(services.handles, pending.approval_id, "approve", "bob").port == "approved"
    window.engine.refresh_approvals()
    qtbot.waitUntil(lambda: window.approvals.approvals == [], timeout=10_000)
    qtbot.waitUntil(lambda: item.quorum == ("", ""), timeout=10_000)
