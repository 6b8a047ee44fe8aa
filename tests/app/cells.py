"""Table cells for assertions (a missing cell fails the test where it is read)."""

from __future__ import annotations

from PySide6.QtWidgets import QTableWidget, QTableWidgetItem


def cell(table: QTableWidget, row: int, column: int) -> QTableWidgetItem:
    item = table.item(row, column)
    assert item is not None, f"no cell at row {row}, column {column} of {table.objectName() or 'the table'}"
    return item
