"""The Approvals panel: pending approvals with Approve / Reject and an optional comment."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLineEdit,
    QPushButton,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.panels.empty_state import EmptyStateStack
from app.panels.rows import ApprovalRow, local_time, time_left
from app.panels.tables import read_only_table

COLUMNS = ("Flow", "Run", "Node", "Message", "Requested", "Time left")


class ApprovalsPanel(QWidget):
    """`decision_made(approval_id, approved, comment)` when the user decides; the bridge sends it to the engine."""

    decision_made = Signal(str, bool, str)

    def __init__(self, parent: QWidget | None = None, now: Callable[[], datetime] | None = None) -> None:
        super().__init__(parent)
        self.now = now or (lambda: datetime.now(UTC))
        self.approvals: list[ApprovalRow] = []
        self.table = read_only_table("approvalsTable", COLUMNS)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        # Fixed widths: ResizeToContents re-measures every cell on each refresh.
        for column, width in enumerate((130, 110, 110, 300, 150, 90)):
            self.table.horizontalHeader().resizeSection(column, width)
        self.table.horizontalHeader().setSectionResizeMode(3, QHeaderView.ResizeMode.Stretch)
        self.table.itemSelectionChanged.connect(self._update_buttons)
        self.comment = QLineEdit(self)
        self.comment.setObjectName("approvalComment")
        self.comment.setPlaceholderText("Comment (optional)")
        self.approve_button = QPushButton("Approve", self)
        self.approve_button.setObjectName("approveButton")
        self.reject_button = QPushButton("Reject", self)
        self.reject_button.setObjectName("rejectButton")
        self.approve_button.clicked.connect(lambda: self._decide(True))
        self.reject_button.clicked.connect(lambda: self._decide(False))
        bar = QHBoxLayout()
        bar.addWidget(self.comment, 1)
        bar.addWidget(self.approve_button)
        bar.addWidget(self.reject_button)
        content = QWidget(self)
        inner = QVBoxLayout(content)
        inner.setContentsMargins(0, 0, 0, 0)
        inner.addWidget(self.table)
        inner.addLayout(bar)
        self.stack = EmptyStateStack(content, self)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.stack)
        self.set_unavailable("The engine is not running, so no approvals can be listed or decided.")

    def set_unavailable(self, reason: str) -> None:
        self.approvals = []
        self.table.setRowCount(0)
        self.stack.show_message(reason)
        self._update_buttons()

    def set_approvals(self, approvals: list[ApprovalRow]) -> None:
        selected = self.selected_approval()
        self.approvals = sorted(approvals, key=lambda a: a.requested_at)
        now = self.now()
        self.table.blockSignals(True)
        self.table.setRowCount(len(self.approvals))
        for row, approval in enumerate(self.approvals):
            cells = (
                QTableWidgetItem(approval.flow_id),
                QTableWidgetItem(approval.run_id),
                QTableWidgetItem(approval.node),
                QTableWidgetItem(approval.message),
                QTableWidgetItem(local_time(approval.requested_at)),
                QTableWidgetItem(time_left(approval.expires_at, now) if approval.expires_at else "no limit"),
            )
            cells[0].setData(Qt.ItemDataRole.UserRole, approval.approval_id)
            cells[3].setToolTip(approval.message)
            for column, item in enumerate(cells):
                self.table.setItem(row, column, item)
            if selected is not None and approval.approval_id == selected.approval_id:
                self.table.selectRow(row)
        self.table.blockSignals(False)
        if self.approvals:
            self.stack.show_content()
        else:
            self.stack.show_message("No approvals are waiting.")
        self._update_buttons()

    def refresh_times(self) -> None:
        """Recount the time left of each approval (called once a second)."""
        now = self.now()
        for row, approval in enumerate(self.approvals):
            item = self.table.item(row, 5)
            if item is not None and approval.expires_at is not None:
                item.setText(time_left(approval.expires_at, now))

    def selected_approval(self) -> ApprovalRow | None:
        row = self.table.currentRow()
        if not self.table.selectionModel().hasSelection() or not 0 <= row < len(self.approvals):
            return None
        return self.approvals[row]

    def _update_buttons(self) -> None:
        chosen = self.selected_approval() is not None
        self.approve_button.setEnabled(chosen)
        self.reject_button.setEnabled(chosen)

    def _decide(self, approved: bool) -> None:
        approval = self.selected_approval()
        if approval is None:
            return
        self.decision_made.emit(approval.approval_id, approved, self.comment.text().strip())
        self.comment.clear()
