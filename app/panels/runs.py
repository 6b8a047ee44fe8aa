"""The Runs panel: runs with status colour, version, times, cost, tokens and where they are; filter by status."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from PySide6.QtCore import QItemSelectionModel, QPoint, Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QHBoxLayout,
    QLabel,
    QMenu,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from app.panels.empty_state import EmptyStateStack
from app.panels.rows import RUN_STATUSES, RunRow, local_time, tokens_text, usd
from app.panels.table_model import RowsModel
from app.panels.tables import fit_columns
from app.theme import status_colour
from engine.runtime.transitions import TERMINAL

ALL_STATUSES = "All statuses"
DURATION_COLUMN, COST_COLUMN, TOKENS_COLUMN, WHERE_COLUMN, RUN_COLUMN = 4, 5, 6, 7, 8
RUN_SAMPLES = {0: "● interrupted", 1: "ticket-triage", 2: "v10", 3: "2026-12-31 23:59:59", 4: "23h59m",
               5: "$0.0125", 6: "1,234 in · 56 out", RUN_COLUMN: "01a250f757b9…"}
"""Typical cells the columns are sized for; the run id shows its first 12 digits (all of it as the tooltip)."""


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
                ("Started", lambda r: local_time(r.started_at)),
                ("Duration", lambda r: r.duration(self.now())),
                ("Cost", lambda r: usd(r.cost_usd) if r.cost_usd is not None else "—"),
                ("Tokens", lambda r: tokens_text(r.tokens_in, r.tokens_out)),
                ("Where", lambda r: r.where(self.now())),
                ("Run", lambda r: r.run_id),
            ],
            colour=lambda r, column: status_colour(r.status) if column == 0 else None,
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
        fit_columns(self.table, RUN_SAMPLES, stretch=WHERE_COLUMN)
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
