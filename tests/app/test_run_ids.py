"""Runs started together are told apart wherever the app names a run: messages and tables show the random end
of the time-ordered id, and the whole id stays at hand (tooltip, Copy run id, the details' header)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QStyle, QStyleOptionViewItem

from app.live import run_end_text
from app.panels.approvals import ApprovalsPanel
from app.panels.rows import ApprovalRow, RunRow
from app.panels.runs import RUN_COLUMN, RunsPanel
from app.readable import short_run_id
from app.run_details import RunDetails
from engine.ids import time_ordered_id
from engine.read_models import Run

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def ids_started_together() -> tuple[str, str]:
    """Two run ids made one after the other, as for two runs started in the same moment."""
    while True:
        first, second = time_ordered_id(), time_ordered_id()
        if first[:8] == second[:8]:  # not straddling the 65 s step of the 8th digit
            return first, second


def _run(run_id: str) -> Run:
    return Run.model_validate({"id": run_id, "flow_id": "refund-desk", "version": 2, "status": "succeeded",
                               "state": {}, "steps": []})


def test_the_short_form_tells_runs_started_together_apart() -> None:
    first, second = ids_started_together()
    assert short_run_id(first) != short_run_id(second)
    assert first.endswith(short_run_id(first)) and len(short_run_id(first)) == 8
    assert run_end_text(_run(first)) != run_end_text(_run(second))
    assert run_end_text(_run(first)) == f"Run {short_run_id(first)} of refund-desk succeeded."


def test_approvals_name_the_run_being_decided_by_its_distinct_end(qtbot) -> None:
    first, second = ids_started_together()
    panel = ApprovalsPanel(now=lambda: NOW)
    qtbot.addWidget(panel)
    panel.show()
    panel.set_decider("root")
    panel.set_approvals([ApprovalRow(f"a{index}", "refunds", run_id, "ask", "Refund?", NOW - timedelta(minutes=index),
                                     NOW + timedelta(hours=1)) for index, run_id in enumerate((first, second))])
    said = []
    for row in range(2):
        panel.table.selectRow(row)
        qtbot.mouseClick(panel.approve_button, Qt.MouseButton.LeftButton)
        said.append(panel.result_label.text())
        panel.decision_result(panel.approvals[row].approval_id, False, "refused")
    assert said[0] != said[1]
    assert all(short_run_id(approval.run_id) in text for approval, text in zip(panel.approvals, said, strict=True))


def test_the_runs_table_shows_the_end_of_the_id_and_keeps_it_whole(qtbot) -> None:
    first, second = ids_started_together()
    panel = RunsPanel(now=lambda: NOW)
    qtbot.addWidget(panel)
    panel.resize(900, 300)
    panel.show()
    qtbot.waitExposed(panel)
    panel.set_runs([RunRow(run_id, "refund-desk", 2, "succeeded", NOW - timedelta(seconds=index), NOW, 0.01)
                    for index, run_id in enumerate((first, second))])
    table = panel.table
    assert table.columnWidth(RUN_COLUMN) < table.fontMetrics().horizontalAdvance(first)  # too narrow for all of it
    margin = table.style().pixelMetric(QStyle.PixelMetric.PM_FocusFrameHMargin, None, table) + 1
    shown = []
    for row, run in enumerate(panel.model.rows):
        index = panel.model.index(row, RUN_COLUMN)
        option = QStyleOptionViewItem()
        option.initFrom(table)
        delegate = table.itemDelegateForIndex(index)
        delegate.initStyleOption(option, index)  # type: ignore[attr-defined]
        text = table.fontMetrics().elidedText(option.text, option.textElideMode,
                                              table.columnWidth(RUN_COLUMN) - 2 * margin)
        assert text.endswith(short_run_id(run.run_id)), text
        shown.append(text)
        assert panel.model.data(index, Qt.ItemDataRole.ToolTipRole) == run.run_id
    assert shown[0] != shown[1]
    menu = panel.context_menu_for(0)
    copy = next(action for action in menu.actions() if action.objectName() == "copyRunIdAction")
    copy.trigger()
    assert QApplication.clipboard().text() == panel.model.rows[0].run_id


def test_run_details_title_the_run_short_and_show_its_whole_id(qtbot) -> None:
    first, _second = ids_started_together()
    details = RunDetails()
    qtbot.addWidget(details)
    details.show_run(_run(first))
    assert details.windowTitle() == f"Run {short_run_id(first)} — refund-desk v2"
    assert first in details.header.text()
    assert details.header.textInteractionFlags() & Qt.TextInteractionFlag.TextSelectableByMouse
