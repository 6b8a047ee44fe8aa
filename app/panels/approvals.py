"""The Approvals panel: pending approvals with Approve / Reject, an optional comment, and who decides.

A decision in flight disables the buttons until its answer is back; a refusal is shown here, with the comment
kept. After an accepted decision the selection moves to the neighbouring row only once the list no longer holds
the decided one, and the panel says which run is selected now, so a second click never acts on a run the user
did not see chosen. With nothing chosen the first waiting approval is selected, and the user's choice stays
across refreshes; when the chosen approval leaves the list unasked (decided elsewhere, timed out) nothing else is
selected in its place until the user picks one, and the panel says so.

Approvals v2: the Progress column shows a quorum's "2 of 3 approved", "escalated" and the reminders sent;
below the table, the selected approval's decisions so far (who, when, comment).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from html import escape

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QTableWidgetItem,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.panels.column_widths import ColumnWidths, ElideStartDelegate
from app.panels.empty_state import EmptyStateStack
from app.panels.rows import ApprovalRow, local_time, short_time, time_left
from app.panels.tables import read_only_table
from app.readable import short_run_id

COLUMNS = ("Flow", "Run", "Node", "Message", "Requested", "Time left", "Progress")
FLOW_COLUMN, RUN_COLUMN, NODE_COLUMN, MESSAGE_COLUMN, REQUESTED_COLUMN, TIME_LEFT_COLUMN, PROGRESS_COLUMN = range(7)
APPROVAL_WIDTHS = (
    {RUN_COLUMN: "…c6d7e8f9"},
    {FLOW_COLUMN: "ticket-triage", MESSAGE_COLUMN: "Refund ticket T-42?"},
    {NODE_COLUMN: "Refund approval", REQUESTED_COLUMN: "17:26:33", TIME_LEFT_COLUMN: "23h59m",
     PROGRESS_COLUMN: "2 of 3 approved"},
    {MESSAGE_COLUMN: "Refund ticket T-42 (120 EUR) to the customer?", REQUESTED_COLUMN: "Dec 31 23:59",
     PROGRESS_COLUMN: "2 of 3 approved · escalated · 2 reminders sent"},
    {RUN_COLUMN: "01a250f757b9c0d1e2f3a4b5c6d7e8f9"},
)
"""What the columns get, in order, as room allows (`ColumnWidths`): the run id's last 8 characters, the flow and
a short message, the other columns' typical cells, a longer message and progress, the whole run id; the message
takes the rest. Cells that do not fit elide (the run id at its start), in full as their tooltip."""
OPTIONAL_COLUMNS = (REQUESTED_COLUMN, NODE_COLUMN)
"""Hidden in this order in a dock too narrow for the others' typical cells: the time left says more than when
it was asked."""


class ApprovalsPanel(QWidget):
    """`decision_made(approval_id, approved, comment)` when the user decides; the bridge sends it to the engine
    and the answer comes back through `decision_result`. `change_name_requested` asks for Settings ▸ General."""

    decision_made = Signal(str, bool, str)
    change_name_requested = Signal()
    count_changed = Signal(int)
    """How many approvals are listed as waiting (0 while the engine does not run); the dock's title shows it."""

    def __init__(self, parent: QWidget | None = None, now: Callable[[], datetime] | None = None) -> None:
        super().__init__(parent)
        self.now = now or (lambda: datetime.now(UTC))
        self.approvals: list[ApprovalRow] = []
        self.decider = ""
        self.deciding: str | None = None
        """The approval whose decision is in flight or accepted but still listed: the buttons wait for it."""
        self._decided_row = 0
        self._answered = False
        self._choice_gone = ""
        """The note shown while the user's chosen approval has left the list and no other is chosen for them."""
        self.table = read_only_table("approvalsTable", COLUMNS)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        # A long message elides on one line (in full as its tooltip) rather than wrap into a clipped second one.
        self.table.setWordWrap(False)
        self.table.setItemDelegateForColumn(RUN_COLUMN, ElideStartDelegate(self.table))
        self.table.setColumnHidden(PROGRESS_COLUMN, True)  # until a quorum, escalation or reminder has some
        self.column_widths = ColumnWidths(self.table, APPROVAL_WIDTHS, stretch=MESSAGE_COLUMN,
                                          optional=OPTIONAL_COLUMNS, must_fit=3)
        self.table.itemSelectionChanged.connect(self._update_buttons)
        self.decider_label = QLabel(self)
        self.decider_label.setObjectName("deciderLabel")
        self.decider_label.setTextFormat(Qt.TextFormat.RichText)
        self.decider_label.setToolTip("The name your decisions are recorded under; approval nodes that list "
                                      "approvers accept only those names")
        self.change_name_button = QToolButton(self)
        self.change_name_button.setObjectName("changeNameButton")
        self.change_name_button.setText("Change…")
        self.change_name_button.setToolTip("Settings ▸ General ▸ Your name")
        self.change_name_button.clicked.connect(self.change_name_requested.emit)
        self.decided_label = QLabel(self)
        self.decided_label.setObjectName("decidedSoFar")
        self.decided_label.setWordWrap(True)
        self.decided_label.hide()
        self.result_label = QLabel(self)
        self.result_label.setObjectName("fieldNote")
        self.result_label.setWordWrap(True)
        self.result_label.hide()
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
        bar.addWidget(self.decider_label)
        bar.addWidget(self.change_name_button)
        bar.addWidget(self.comment, 1)
        bar.addWidget(self.approve_button)
        bar.addWidget(self.reject_button)
        self.stack = EmptyStateStack(self.table, self)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.stack, 1)
        layout.addWidget(self.decided_label)
        layout.addLayout(bar)
        layout.addWidget(self.result_label)
        self.set_decider("")
        self.set_unavailable("The engine is not running, so no approvals can be listed or decided.")

    def set_decider(self, name: str) -> None:
        """Show who the panel decides as (Settings ▸ General ▸ Your name)."""
        self.decider = name
        self.decider_label.setText(f"Deciding as <b>{escape(name) or '?'}</b>")

    def set_unavailable(self, reason: str) -> None:
        self.deciding = None
        self._choice_gone = ""
        self.approvals = []
        self.table.setRowCount(0)
        self.stack.show_message(reason)
        self._update_buttons()
        self.count_changed.emit(0)

    def set_approvals(self, approvals: list[ApprovalRow]) -> None:
        selected = self.selected_approval()
        self.approvals = sorted(approvals, key=lambda a: a.requested_at)
        decided_gone = self.deciding is not None and all(a.approval_id != self.deciding for a in self.approvals)
        now = self.now()
        self.table.blockSignals(True)
        self.table.clearSelection()  # rows shift: the choice is made again below, by approval id
        kept = False
        self.table.setRowCount(len(self.approvals))
        for row, approval in enumerate(self.approvals):
            cells = (
                QTableWidgetItem(approval.flow_id),
                QTableWidgetItem(approval.run_id),
                QTableWidgetItem(approval.node_label),
                QTableWidgetItem(approval.message),
                QTableWidgetItem(short_time(approval.requested_at, now)),
                QTableWidgetItem(time_left(approval.expires_at, now) if approval.expires_at else "no limit"),
                QTableWidgetItem(approval.progress()),
            )
            cells[0].setData(Qt.ItemDataRole.UserRole, approval.approval_id)
            for item in cells:  # any cell may elide in a narrow dock
                item.setToolTip(item.text())
            cells[REQUESTED_COLUMN].setToolTip(local_time(approval.requested_at))
            cells[NODE_COLUMN].setToolTip(f"{approval.title} (node {approval.node})" if approval.title
                                          else f"node {approval.node}")
            if approval.decisions:
                cells[PROGRESS_COLUMN].setToolTip(f"{approval.progress()}\n{approval.decided_so_far()}")
            for column, item in enumerate(cells):
                self.table.setItem(row, column, item)
            if selected is not None and approval.approval_id == selected.approval_id:
                self.table.selectRow(row)
                kept = True
        self._show_progress_column(any(approval.progress() for approval in self.approvals))
        if decided_gone:
            self.table.clearSelection()
            if self._answered:
                self._select_after_decision()
        elif self.deciding is None:
            self._choose(selected, kept)
        self.table.blockSignals(False)
        if self.approvals:
            self.stack.show_content()
        else:
            self.stack.show_message("No approvals are waiting.")
        self._update_buttons()
        self.count_changed.emit(len(self.approvals))

    def _choose(self, selected: ApprovalRow | None, kept: bool) -> None:
        """After a refresh with no decision in flight: keep the user's choice; with none, select the first row;
        when the chosen approval has gone, select none (a click meant for it must not land on its neighbour)."""
        if not self.approvals:
            self._choice_gone = ""
            return
        if selected is not None and not kept:
            self.table.clearSelection()
            self._choice_gone = (f"{selected.flow_id} run {short_run_id(selected.run_id)} is no longer waiting "
                                 f"(decided elsewhere or timed out). Select an approval to decide it.")
            self._say(self._choice_gone, problem=False)
        elif selected is None and not self._choice_gone:
            self.table.selectRow(0)

    def _show_progress_column(self, shown: bool) -> None:
        if self.table.isColumnHidden(PROGRESS_COLUMN) == shown:
            self.table.setColumnHidden(PROGRESS_COLUMN, not shown)
            self.column_widths.fit()

    def decision_result(self, approval_id: str, accepted: bool, message: str, still_pending: bool = False) -> None:
        """The engine's answer to a decision from this panel: a refusal is shown with the comment kept;
        `still_pending`: a vote counted towards a quorum not yet reached, so the approval stays listed."""
        if approval_id != self.deciding:
            return
        if accepted and still_pending:
            self.deciding = None
            self.comment.clear()
            self._say(message, problem=False)
        elif accepted:
            self.comment.clear()
            self._say(message, problem=False)
            self._answered = True
            if all(a.approval_id != approval_id for a in self.approvals):  # the list updated first
                self._select_after_decision()
        else:
            self.deciding = None
            self._say(message, problem=True)
        self._update_buttons()

    def _select_after_decision(self) -> None:
        """The decided row is gone and its answer is in: select its neighbour and say which run that is."""
        self.deciding = None
        if not self.approvals:
            return
        row = min(self._decided_row, len(self.approvals) - 1)
        self.table.selectRow(row)
        shown = self.approvals[row]
        self._say(f"{self.result_label.text()} Selected now: {shown.flow_id} run {short_run_id(shown.run_id)} "
                  f"({shown.message or shown.node_label}).", problem=False)

    def _say(self, text: str, problem: bool) -> None:
        self.result_label.setText(text)
        self.result_label.setProperty("problem", problem)
        self.result_label.style().unpolish(self.result_label)
        self.result_label.style().polish(self.result_label)
        self.result_label.setVisible(bool(text))

    @property
    def problem(self) -> str | None:
        """The refusal shown, if any."""
        label = self.result_label
        return label.text() if label.property("problem") and not label.isHidden() else None

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
        selected = self.selected_approval()
        if selected is not None and self._choice_gone:  # the user chose again
            if self.result_label.text() == self._choice_gone:
                self._say("", problem=False)
            self._choice_gone = ""
        self._show_decided(selected)
        chosen = selected is not None and self.deciding is None
        self.approve_button.setEnabled(chosen)
        self.reject_button.setEnabled(chosen)

    def _show_decided(self, approval: ApprovalRow | None) -> None:
        """The selected quorum approval's decisions so far, under the table."""
        if approval is None or not (approval.is_quorum or approval.decisions):
            self.decided_label.hide()
            return
        head = f"{approval.flow_id} run {short_run_id(approval.run_id)}: {approval.progress()}"
        body = approval.decided_so_far() or "no decisions yet"
        self.decided_label.setText(f"{head}\n{body}")
        self.decided_label.setToolTip(f"Run {approval.run_id}")
        self.decided_label.show()

    def _decide(self, approved: bool) -> None:
        approval = self.selected_approval()
        if approval is None or self.deciding is not None:
            return
        self.deciding = approval.approval_id
        self._answered = False
        self._decided_row = self.table.currentRow()
        self._say(f"{'Approving' if approved else 'Rejecting'} {approval.flow_id} run "
                  f"{short_run_id(approval.run_id)} as {self.decider}…", problem=False)
        self._update_buttons()
        self.decision_made.emit(approval.approval_id, approved, self.comment.text().strip())
