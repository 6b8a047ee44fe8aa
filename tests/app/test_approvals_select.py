"""The Approvals panel chooses a row for the user: the first waiting approval when none is chosen, the user's own
choice across refreshes; when the chosen approval is gone (decided elsewhere, timed out) nothing else is chosen
in its place, and the panel says so. Real widgets, offscreen."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from PySide6.QtCore import Qt

from app.panels.approvals import ApprovalsPanel
from app.panels.rows import ApprovalRow

NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)


def approval(approval_id: str, run_id: str, minutes_ago: int) -> ApprovalRow:
    return ApprovalRow(approval_id, "ticket-triage", run_id, "approve", f"Refund {run_id}?",
                       NOW - timedelta(minutes=minutes_ago), NOW + timedelta(hours=1))


def test_a_single_waiting_approval_is_chosen_so_it_can_be_decided(qtbot) -> None:
    panel = ApprovalsPanel(now=lambda: NOW)
    qtbot.addWidget(panel)
    panel.show()
    assert not panel.approve_button.isEnabled()
    only = approval("a1", "01a2521eeb9c0d1ef6c90c65", 1)
    panel.set_approvals([only])
    assert panel.selected_approval() == only
    assert panel.approve_button.isEnabled() and panel.reject_button.isEnabled()
    assert [index.row() for index in panel.table.selectionModel().selectedRows()] == [0]
    with qtbot.waitSignal(panel.decision_made) as decided:
        qtbot.mouseClick(panel.approve_button, Qt.MouseButton.LeftButton)
    assert decided.args == ["a1", True, ""]


def test_the_users_choice_stays_across_refreshes(qtbot) -> None:
    panel = ApprovalsPanel(now=lambda: NOW)
    qtbot.addWidget(panel)
    panel.show()
    first, second = approval("a1", "run-one", 9), approval("a2", "run-two", 5)
    panel.set_approvals([first, second])
    assert panel.selected_approval() == first
    panel.table.selectRow(1)
    earlier = approval("a0", "run-zero", 30)  # listed above the chosen one: its row number changes
    panel.set_approvals([first, second, earlier])
    assert panel.selected_approval() == second and panel.approve_button.isEnabled()


def test_a_chosen_approval_gone_leaves_nothing_chosen_and_says_so(qtbot) -> None:
    panel = ApprovalsPanel(now=lambda: NOW)
    qtbot.addWidget(panel)
    panel.show()
    first, second = approval("a1", "01a2521eeb9aaaaaaaa11111", 9), approval("a2", "01a2521eeb9bbbbbbbb22222", 5)
    panel.set_approvals([first, second])
    panel.table.selectRow(1)
    # Someone else decided the chosen one: a click meant for it must not land on its neighbour.
    panel.set_approvals([first])
    assert panel.selected_approval() is None and not panel.approve_button.isEnabled()
    assert "bb22222" in panel.result_label.text() and "no longer waiting" in panel.result_label.text()
    assert panel.result_label.isVisibleTo(panel)
    panel.set_approvals([first])  # a later refresh does not choose one either
    assert panel.selected_approval() is None
    panel.table.selectRow(0)  # the user chooses: the note has done its job
    assert panel.selected_approval() == first and panel.approve_button.isEnabled()
    assert not panel.result_label.isVisibleTo(panel)
    panel.set_approvals([])
    panel.set_approvals([second])  # a new list after an empty one: its first row is chosen again
    assert panel.selected_approval() == second
