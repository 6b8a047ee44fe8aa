"""The panels' read-only tables."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtWidgets import QAbstractItemView, QTableWidget, QWidget


def read_only_table(name: str, columns: Sequence[str], parent: QWidget | None = None) -> QTableWidget:
    """An empty table named `name` with `columns` as headers: no row numbers, no editing, no grid."""
    table = QTableWidget(0, len(columns), parent)
    table.setObjectName(name)
    table.setHorizontalHeaderLabels(list(columns))
    table.verticalHeader().hide()
    table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    table.setShowGrid(False)
    return table
