"""The Runs panel: runs with status colour, version, times, cost, tokens and where they are; filter by status."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from PySide6.QtCore import QItemSelectionModel, QPoint, Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QApplication,
    QComboBox,
    QHBoxLayout,
    QLabel,
    QMenu,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from app.panels.column_widths import ColumnWidths, ElideStartDelegate
from app.panels.empty_state import EmptyStateStack
from app.panels.rows import RUN_STATUSES, RunRow, cents, local_time, short_time, tokens_text, usd
from app.panels.table_model import RowsModel
from app.panels.tables import compact_rows
from app.theme import status_colour
from engine.runtime.transitions import TERMINAL

ALL_STATUSES = "All statuses"
VERSION_COLUMN, STARTED_COLUMN, DURATION_COLUMN, COST_COLUMN, TOKENS_COLUMN, WHERE_COLUMN, RUN_COLUMN = range(2, 9)
RUN_WIDTHS = (
    {RUN_COLUMN: "…c6d7e8f9"},
    {WHERE_COLUMN: "approve: approval"},
    {0: "● succeeded", 1: "ticket-triage", VERSION_COLUMN: "v10", STARTED_COLUMN: "17:26:33",
     DURATION_COLUMN: "59m59s", COST_COLUMN: "<$0.01", TOKENS_COLUMN: "1,234 in · 56 out"},
    {WHERE_COLUMN: "approve: approval (23h59m left)"},
    {0: "● interrupted", STARTED_COLUMN: "Dec 31 23:59", DURATION_COLUMN: "23h59m59s",
     COST_COLUMN: "$1,234.56", TOKENS_COLUMN: "125.3k in · 9,870 out"},
    {RUN_COLUMN: "01a250f757b9c0d1e2f3a4b5c6d7e8f9"},
)
"""What the columns get, in order, as room allows (`ColumnWidths`): the run id's last 8 characters (what
messages call a run), the place's node and reason, today's typical cells, the place with its time left, the
longer cells, the whole run id; the place takes the rest. The run id elides at its start: its time-ordered
first digits are alike for runs started within a minute."""
OPTIONAL_COLUMNS = (VERSION_COLUMN, TOKENS_COLUMN, DURATION_COLUMN, COST_COLUMN)
"""Hidden in this order in a dock too narrow for the others' typical cells (a run's details show them all)."""


class RunsPanel(QWidget):
    """`run_selected(run_id)` when the user picks a run (live mode follows it)."""

    run_selected = Signal(str)
    run_opened = Signal(str)
    """Double-click or Enter on a run: open its details."""
    rerun_requested = Signal(str)
    """Context menu ▸ Rerun from here…: from the node selected on the canvas (else its details say how)."""

    def __init__(self, parent: QWidget | None = None, now: Callable[[], datetime] | None = None) -> None:
        super().__init__(parent)
        self.now = now or (lambda: datetime.now(UTC))
        self.rows: dict[str, RunRow] = {}
        self.status_filter = QComboBox(self)
        self.status_filter.setObjectName("runsStatusFilter")
        self.status_filter.addItem(ALL_STATUSES, None)
        for status in RUN_STATUSES:
            self.status_filter.addItem(status, status)
        self.status_filter.currentIndexChanged.connect(lambda _i: self._fill())
        self.count_label = QLabel(self)
        bar = QHBoxLayout()
        bar.addWidget(QLabel("Show"))
        bar.addWidget(self.status_filter)
        bar.addStretch(1)
        bar.addWidget(self.count_label)

        self.model: RowsModel[RunRow] = RowsModel(
            [
                ("Status", lambda r: f"● {r.status}"),
                ("Flow", lambda r: r.flow_id),
                ("Version", lambda r: f"v{r.version}"),
                ("Started", lambda r: short_time(r.started_at, self.now())),
                ("Duration", lambda r: r.duration(self.now())),
                ("Cost", lambda r: cents(r.cost_usd) if r.cost_usd is not None else "—"),
                ("Tokens", lambda r: tokens_text(r.tokens_in, r.tokens_out)),
                ("Where", lambda r: r.where(self.now())),
                ("Run", lambda r: r.run_id),
            ],
            colour=lambda r, column: status_colour(r.status) if column == 0 else None,
            tooltips={STARTED_COLUMN: lambda r: local_time(r.started_at),
                      COST_COLUMN: lambda r: usd(r.cost_usd) if r.cost_usd is not None else "not charged yet"},
        )
        self.table = QTableView()
        self.table.setObjectName("runsTable")
        self.table.setModel(self.model)
        self.table.verticalHeader().hide()
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setShowGrid(False)
        self.table.setAlternatingRowColors(True)
        self.table.setWordWrap(False)  # one line a run: a long place elides (in full as its tooltip)
        compact_rows(self.table)
        self.table.setItemDelegateForColumn(RUN_COLUMN, ElideStartDelegate(self.table))
        self.column_widths = ColumnWidths(self.table, RUN_WIDTHS, stretch=WHERE_COLUMN, optional=OPTIONAL_COLUMNS,
                                          must_fit=3)
        self.table.selectionModel().selectionChanged.connect(lambda *_args: self._selected())
        self.table.activated.connect(lambda index: self.run_opened.emit(self.model.rows[index.row()].run_id))
        self.table.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.table.customContextMenuRequested.connect(self._context_menu)
        self.menu: QMenu | None = None
        self.stack = EmptyStateStack(self.table, self)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(bar)
        layout.addWidget(self.stack)
        self._selected_id: str | None = None
        self.set_unavailable("The engine is not running, so there are no runs to show.")

    def set_unavailable(self, reason: str) -> None:
        self.rows = {}
        self.model.set_rows([])
        self.count_label.setText("")
        self.stack.show_message(reason)

    def set_runs(self, runs: list[RunRow]) -> None:
        self.rows = {run.run_id: run for run in runs}
        self._fill()

    def update_run(self, run: RunRow) -> None:
        self.update_runs([run])

    def update_runs(self, runs: list[RunRow]) -> None:
        """Change rows in place (live changes); only the rows that changed are redrawn."""
        for run in runs:
            self.rows[run.run_id] = run
        self._fill()

    def refresh_times(self) -> None:
        """Recount the durations and times left of unfinished runs (called once a second)."""
        live = [row for row, run in enumerate(self.model.rows) if run.finished_at is None]
        if live:
            self.model.dataChanged.emit(self.model.index(live[0], DURATION_COLUMN),
                                        self.model.index(live[-1], WHERE_COLUMN))

    def visible_runs(self) -> list[RunRow]:
        wanted = self.status_filter.currentData()
        latest = datetime.max.replace(tzinfo=UTC)
        runs = sorted(self.rows.values(), key=lambda r: (r.started_at or latest, r.run_id), reverse=True)
        return [run for run in runs if wanted is None or run.status == wanted]

    def row_count(self) -> int:
        return self.model.rowCount()

    def cell_text(self, row: int, column: int) -> str:
        return self.model.text(row, column)

    def select_row(self, row: int) -> None:
        self.table.selectRow(row)

    def _fill(self) -> None:
        keep = self._selected_id
        runs = self.visible_runs()
        self.table.selectionModel().blockSignals(True)
        self.model.update_rows(runs, key=_run_id)
        if keep is not None:
            for row, run in enumerate(runs):
                if run.run_id == keep:
                    self.table.selectionModel().select(
                        self.model.index(row, 0),
                        QItemSelectionModel.SelectionFlag.ClearAndSelect | QItemSelectionModel.SelectionFlag.Rows)
                    break
        self.table.selectionModel().blockSignals(False)
        self.count_label.setText(f"{len(runs)} of {len(self.rows)} runs")
        if self.rows:
            self.stack.show_content()
        else:
            self.stack.show_message("No runs yet: publish a flow and press Run (F5).")

    def _selected(self) -> None:
        rows = self.table.selectionModel().selectedRows()
        if rows:
            run = self.model.rows[rows[0].row()]
            self._selected_id = run.run_id
            self.run_selected.emit(run.run_id)


    def context_menu_for(self, row: int) -> QMenu:
        """The menu of one run's row: open its details, rerun it from a node (a finished run only)."""
        run = self.model.rows[row]
        menu = QMenu(self)
        menu.setObjectName("runsContextMenu")
        menu.addAction("Open run details", lambda: self.run_opened.emit(run.run_id))
        copy = menu.addAction("Copy run id", lambda: QApplication.clipboard().setText(run.run_id))
        copy.setObjectName("copyRunIdAction")
        rerun = menu.addAction("Rerun from here…", lambda: self.rerun_requested.emit(run.run_id))
        rerun.setObjectName("rerunFromHereAction")
        rerun.setEnabled(run.status in TERMINAL)
        rerun.setToolTip("A new run from the node selected on the canvas: the steps before it are reused")
        return menu

    def _context_menu(self, at: QPoint) -> None:
        index = self.table.indexAt(at)
        if not index.isValid():
            return
        self.table.selectRow(index.row())
        self.menu = self.context_menu_for(index.row())
        self.menu.popup(self.table.viewport().mapToGlobal(at))


def _run_id(run: RunRow) -> str:
    return run.run_id
