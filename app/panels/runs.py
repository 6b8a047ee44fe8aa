"""The Runs panel: runs with status colour, version, times, cost and where they are; filter by status."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.panels.empty_state import EmptyStateStack
from app.panels.rows import RUN_STATUSES, STATUS_COLOURS, RunRow, local_time, usd

COLUMNS = ("Status", "Flow", "Version", "Started", "Duration", "Cost", "Where", "Run")
ALL_STATUSES = "All statuses"


class RunsPanel(QWidget):
    """`run_selected(run_id)` when the user picks a run (live mode follows it)."""

    run_selected = Signal(str)

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

        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setObjectName("runsTable")
        self.table.setHorizontalHeaderLabels(list(COLUMNS))
        self.table.verticalHeader().hide()
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setShowGrid(False)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.horizontalHeader().setSectionResizeMode(6, QHeaderView.ResizeMode.Stretch)
        self.table.itemSelectionChanged.connect(self._selected)
        self.stack = EmptyStateStack(self.table, self)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(bar)
        layout.addWidget(self.stack)
        self.set_unavailable("The engine is not running, so there are no runs to show.")

    def set_unavailable(self, reason: str) -> None:
        self.rows = {}
        self.table.setRowCount(0)
        self.count_label.setText("")
        self.stack.show_message(reason)

    def set_runs(self, runs: list[RunRow]) -> None:
        self.rows = {run.run_id: run for run in runs}
        self._fill()

    def update_run(self, run: RunRow) -> None:
        self.rows[run.run_id] = run
        self._fill()

    def visible_runs(self) -> list[RunRow]:
        wanted = self.status_filter.currentData()
        runs = sorted(self.rows.values(), key=lambda r: r.started_at or datetime.max.replace(tzinfo=UTC),
                      reverse=True)
        return [run for run in runs if wanted is None or run.status == wanted]

    def _fill(self) -> None:
        runs = self.visible_runs()
        now = self.now()
        self.table.blockSignals(True)
        self.table.setRowCount(len(runs))
        for row, run in enumerate(runs):
            status = QTableWidgetItem(f"● {run.status}")
            status.setForeground(QBrush(QColor(STATUS_COLOURS.get(run.status, "#888888"))))
            status.setData(Qt.ItemDataRole.UserRole, run.run_id)
            cells = (
                status,
                QTableWidgetItem(run.flow_id),
                QTableWidgetItem(f"v{run.version}"),
                QTableWidgetItem(local_time(run.started_at)),
                QTableWidgetItem(run.duration(now)),
                QTableWidgetItem(usd(run.cost_usd) if run.cost_usd is not None else "—"),
                QTableWidgetItem(run.where(now)),
                QTableWidgetItem(run.run_id),
            )
            for column, item in enumerate(cells):
                self.table.setItem(row, column, item)
        self.table.blockSignals(False)
        self.count_label.setText(f"{len(runs)} of {len(self.rows)} runs")
        if self.rows:
            self.stack.show_content()
        else:
            self.stack.show_message("No runs yet: publish a flow and press Run (F5).")

    def _selected(self) -> None:
        item = self.table.item(self.table.currentRow(), 0)
        if item is not None:
            self.run_selected.emit(str(item.data(Qt.ItemDataRole.UserRole)))
