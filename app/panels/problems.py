"""The Problems panel: the current document's diagnostics; picking one selects its node. A problem the app can
fix from one of its own controls gets a button that opens it (a missing budget: Settings ▸ Budgets)."""

from __future__ import annotations

import re

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHeaderView,
    QLabel,
    QPushButton,
    QStyle,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.budget_check import BudgetDiagnostic
from app.panels.column_widths import ColumnWidths
from app.panels.tables import read_only_table
from app.readable import counted
from engine.validation import Diagnostic

COLUMNS = ("", "Code", "Node", "Message", "Fix")
SEVERITY_COLUMN, CODE_COLUMN, NODE_COLUMN, MESSAGE_COLUMN, FIX_COLUMN = range(5)
SEVERITY_WIDTH = 28
"""The severity icon's column."""
PROBLEM_WIDTHS = (
    {CODE_COLUMN: "unreachable_node", NODE_COLUMN: "approve_refund"},
    {MESSAGE_COLUMN: "config.timeout is required; set it"},
    {CODE_COLUMN: "park_inside_finance_chain", NODE_COLUMN: "classify_ticket_text"},
)
"""What the columns get, in order, as room allows (`ColumnWidths`): a typical code and node, the start of a
message, the longest codes; the message takes the rest. Cells that do not fit elide, in full as their tooltip
(and the current problem's whole text shows under the table)."""


def message_cell(diagnostic: Diagnostic) -> str:
    """The message as its table cell shows it: without the `node "id" (type): ` it starts with, which the Node
    column beside it already says."""
    if not diagnostic.node:
        return diagnostic.message
    named = re.match(rf'node "{re.escape(diagnostic.node)}"(?: \([^)]*\))?: ', diagnostic.message)
    return diagnostic.message[named.end():] if named else diagnostic.message


class ProblemsPanel(QWidget):
    """A table of diagnostics, errors first; `node_activated(id)` when the user picks a row with a node."""

    node_activated = Signal(str)
    budget_requested = Signal(str)
    """(budget name): the user asked to create or change that budget."""
    counts_changed = Signal(int, int)
    """(errors, warnings) after each update, for the dock title and status bar."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.diagnostics: list[Diagnostic] = []
        self.summary = QLabel(self)
        self.summary.setObjectName("problemsSummary")
        self.table = read_only_table("problemsTable", COLUMNS, self)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setWordWrap(False)
        self.table.setAlternatingRowColors(True)
        self.table.horizontalHeader().setSectionResizeMode(SEVERITY_COLUMN, QHeaderView.ResizeMode.Fixed)
        # Widths from sample texts: ResizeToContents would re-measure every cell on each validation of a big flow.
        self.column_widths = ColumnWidths(self.table, PROBLEM_WIDTHS, stretch=MESSAGE_COLUMN,
                                          least={SEVERITY_COLUMN: SEVERITY_WIDTH})
        self.detail = QLabel(self)
        self.detail.setObjectName("problemDetail")
        self.detail.setWordWrap(True)
        self.detail.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.table.itemSelectionChanged.connect(self._selection_changed)
        self.table.currentCellChanged.connect(lambda *_args: self._show_detail())
        self.table.itemActivated.connect(lambda _item: self._selection_changed())
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addWidget(self.summary)
        layout.addWidget(self.table)
        layout.addWidget(self.detail)
        self.has_flow = False
        self.set_diagnostics([])

    def show_no_flow(self) -> None:
        """No flow is open: nothing to check, and nothing to publish."""
        self.set_diagnostics([], has_flow=False)

    def set_diagnostics(self, diagnostics: list[Diagnostic], has_flow: bool = True) -> None:
        """Show `diagnostics` (errors first, each group in document order)."""
        self.has_flow = has_flow
        ordered = [d for d in diagnostics if d.severity == "error"] + [d for d in diagnostics if d.severity != "error"]
        self.diagnostics = ordered
        style = self.style()
        icons = {
            "error": style.standardIcon(QStyle.StandardPixmap.SP_MessageBoxCritical),
            "warning": style.standardIcon(QStyle.StandardPixmap.SP_MessageBoxWarning),
        }
        self.table.blockSignals(True)
        self.table.setRowCount(len(ordered))
        for row, diagnostic in enumerate(ordered):
            severity = QTableWidgetItem(icons.get(diagnostic.severity, icons["warning"]), "")
            severity.setToolTip(diagnostic.severity)
            severity.setData(Qt.ItemDataRole.UserRole, diagnostic.severity)
            cells = (severity, QTableWidgetItem(diagnostic.code), QTableWidgetItem(diagnostic.node or "—"),
                     QTableWidgetItem(message_cell(diagnostic)))
            for column, item in enumerate(cells):
                if column != SEVERITY_COLUMN:
                    item.setToolTip(item.text() if column != MESSAGE_COLUMN else diagnostic.message)
                self.table.setItem(row, column, item)
            button = self._fix_button(diagnostic)
            if button is not None:
                self.table.setCellWidget(row, FIX_COLUMN, button)
            elif self.table.cellWidget(row, FIX_COLUMN) is not None:
                self.table.removeCellWidget(row, FIX_COLUMN)
        self.table.blockSignals(False)
        buttons = [self.fix_button(row) for row in range(len(ordered))]
        self.column_widths.least[FIX_COLUMN] = max((b.sizeHint().width() for b in buttons if b is not None), default=0)
        self.column_widths.fit()
        errors = sum(1 for d in ordered if d.severity == "error")
        warnings = len(ordered) - errors
        if not has_flow:
            self.summary.setText("No flow is open: open or create one (File ▸ Open, File ▸ New flow) to check it.")
        elif not ordered:
            self.summary.setText("No problems: this flow can be published.")
        else:
            self.summary.setText(f"{counted(errors, 'error')}, {counted(warnings, 'warning')}"
                                 + (" — fix the errors to publish." if errors else "."))
        self._show_detail()
        self.counts_changed.emit(errors, warnings)

    def _show_detail(self) -> None:
        """The whole message (with its fix) of the current problem, or of the first one: the table's cell
        is cut at its width."""
        row = self.table.currentRow()
        if not 0 <= row < len(self.diagnostics):
            row = 0
        if not self.diagnostics:
            self.detail.hide()
            return
        diagnostic = self.diagnostics[row]
        where = f" at {diagnostic.node}" if diagnostic.node else ""
        self.detail.setText(f"{diagnostic.severity.capitalize()}{where} ({diagnostic.code}): {diagnostic.message}")
        self.detail.show()

    def _fix_button(self, diagnostic: Diagnostic) -> QPushButton | None:
        if not isinstance(diagnostic, BudgetDiagnostic):
            return None
        button = QPushButton(f"Budget {diagnostic.budget}…", self.table)
        button.setObjectName("fixButton")
        button.setToolTip(f"Open Settings ▸ Budgets to add budget {diagnostic.budget!r} or change it")
        button.clicked.connect(lambda _checked=False, name=diagnostic.budget: self.budget_requested.emit(name))
        return button

    def fix_button(self, row: int) -> QPushButton | None:
        """The row's fix button, if it has one."""
        widget = self.table.cellWidget(row, FIX_COLUMN)
        return widget if isinstance(widget, QPushButton) else None

    def _selection_changed(self) -> None:
        row = self.table.currentRow()
        if 0 <= row < len(self.diagnostics):
            node = self.diagnostics[row].node
            if node:
                self.node_activated.emit(node)
