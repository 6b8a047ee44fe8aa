"""The Approvals panel names the node a run waits at by its title ("Refund approval"), read from the run's
published version, with the node's id in the tooltip; the id while the title is unknown or the node has none."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from app.panels.approvals import NODE_COLUMN, ApprovalsPanel
from app.panels.rows import ApprovalRow
from app.window import MainWindow
from canvas.document import FlowDocument
from engine.flow import flow_from_data
from tests.app.approval_flows import approval_flow
from tests.app.cells import cell

NOW = datetime(2026, 12, 7, 20, 0, tzinfo=UTC)

REFUND_FLOW = approval_flow("refund-titles", "Refund desk", {"timeout": "1h", "message": "Refund it?"},
                            node="approve", title="Refund approval")


def _row(approval_id: str, title: str) -> ApprovalRow:
    return ApprovalRow(approval_id, "refund-desk", f"run-{approval_id}", "approve", "Refund it?",
                       NOW - timedelta(minutes=5), NOW + timedelta(hours=1), title=title)


def test_the_node_column_shows_the_title_and_the_id_as_its_tooltip(qtbot) -> None:
    panel = ApprovalsPanel(now=lambda: NOW)
    qtbot.addWidget(panel)
    panel.show()
    panel.set_approvals([_row("a1", "Refund approval"), _row("a2", "")])
    assert cell(panel.table, 0, NODE_COLUMN).text() == "Refund approval"
    assert cell(panel.table, 0, NODE_COLUMN).toolTip() == "Refund approval (node approve)"
    assert cell(panel.table, 1, NODE_COLUMN).text() == "approve"  # no title: its id
    assert cell(panel.table, 1, NODE_COLUMN).toolTip() == "node approve"


def node_cells(window: MainWindow) -> dict[str, str]:
    """Run id -> the Node cell the Approvals panel shows for it."""
    table = window.approvals.table
    return {approval.run_id: cell(table, row, NODE_COLUMN).text()
            for row, approval in enumerate(window.approvals.approvals)}


def test_each_approval_shows_the_title_of_its_runs_version(qtbot, engine_window: MainWindow) -> None:
    window = engine_window
    document = FlowDocument.from_flow(flow_from_data(REFUND_FLOW))
    window.add_document(document)
    window.publish()
    qtbot.waitUntil(lambda: window.statusBar().currentMessage() == "refund-titles v1 published", timeout=10_000)
    window.ask_run_inputs = lambda _flow: {}
    window.run_flow()
    qtbot.waitUntil(lambda: len(window.approvals.approvals) == 1, timeout=15_000)
    first = window.approvals.approvals[0].run_id
    qtbot.waitUntil(lambda: node_cells(window) == {first: "Refund approval"}, timeout=10_000)
    assert cell(window.approvals.table, 0, NODE_COLUMN).toolTip() == "Refund approval (node approve)"

    # Version 2 renames the node: the run of version 1 keeps its title, the new run shows the new one.
    document.rename_node("approve", "Second look")
    window.publish()
    qtbot.waitUntil(lambda: window.statusBar().currentMessage() == "refund-titles v2 published", timeout=10_000)
    window.run_flow()
    qtbot.waitUntil(lambda: len(window.approvals.approvals) == 2, timeout=15_000)
    second = next(a.run_id for a in window.approvals.approvals if a.run_id != first)
    qtbot.waitUntil(lambda: node_cells(window) == {first: "Refund approval", second: "Second look"},
                    timeout=10_000)
