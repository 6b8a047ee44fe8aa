"""A read-only table model over a list of rows, reset in one go (cheap for hundreds of rows, unlike
refilling a QTableWidget item by item)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Generic, TypeVar

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, Qt
from PySide6.QtGui import QBrush, QColor

Row = TypeVar("Row")
Index = QModelIndex | QPersistentModelIndex


class RowsModel(QAbstractTableModel, Generic[Row]):
    """Columns are (header, text of a row) pairs; `colour(row, column)` may tint a cell's text. A cell's tooltip
    is its text, or `tooltips[column](row)` where its text is short for something longer."""

    def __init__(self, columns: Sequence[tuple[str, Callable[[Row], str]]],
                 colour: Callable[[Row, int], str | None] | None = None,
                 tooltips: Mapping[int, Callable[[Row], str]] | None = None) -> None:
        super().__init__()
        self.columns = list(columns)
        self.colour = colour
        self.tooltips = dict(tooltips or {})
        self.rows: list[Row] = []

    def set_rows(self, rows: list[Row]) -> None:
        self.beginResetModel()
        self.rows = list(rows)
        self.endResetModel()

    def update_rows(self, rows: list[Row], key: Callable[[Row], object]) -> None:
        """Show `rows`, telling the view only what changed: the changed cells' rows, or the rows new on top.

        A reset makes the view drop and re-measure everything (and its selection); while live changes
        arrive many times a second that is the GUI thread's biggest cost in the table."""
        old_keys = [key(row) for row in self.rows]
        new_keys = [key(row) for row in rows]
        added = len(new_keys) - len(old_keys)
        if added < 0 or new_keys[added:] != old_keys:
            self.set_rows(rows)
            return
        if added:
            self.beginInsertRows(QModelIndex(), 0, added - 1)
            self.rows = list(rows[:added]) + self.rows
            self.endInsertRows()
        changed = [i for i in range(added, len(rows)) if rows[i] != self.rows[i]]
        self.rows = list(rows)
        if changed:
            self.dataChanged.emit(self.index(changed[0], 0), self.index(changed[-1], len(self.columns) - 1))

    def rowCount(self, parent: Index = QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self.rows)

    def columnCount(self, parent: Index = QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self.columns)

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        row = self.rows[index.row()]
        if role == Qt.ItemDataRole.ToolTipRole and index.column() in self.tooltips:
            return self.tooltips[index.column()](row)
        if role in (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.ToolTipRole):
            return self.columns[index.column()][1](row)
        if role == Qt.ItemDataRole.ForegroundRole and self.colour is not None:
            colour = self.colour(row, index.column())
            return QBrush(QColor(colour)) if colour else None
        return None

    def headerData(self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if role == Qt.ItemDataRole.DisplayRole and orientation == Qt.Orientation.Horizontal:
            return self.columns[section][0]
        return None

    def text(self, row: int, column: int) -> str:
        """The text a cell shows (for tests and copy)."""
        return self.columns[column][1](self.rows[row])
