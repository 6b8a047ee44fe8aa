"""The panels' read-only tables, and column widths that show every header and typical cell whole."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QStyle, QTableView, QTableWidget, QWidget

CELL_GAP = 8
"""Room beside a cell's text, so neighbouring columns do not touch."""
ROW_PADDING = 10
"""Room above and below a row's line of text: a push button in a cell (a fix, Enable, Copy URL) still fits."""


def read_only_table(name: str, columns: Sequence[str], parent: QWidget | None = None) -> QTableWidget:
    """An empty table named `name` with `columns` as headers: no row numbers, no editing, no grid."""
    table = QTableWidget(0, len(columns), parent)
    table.setObjectName(name)
    table.setHorizontalHeaderLabels(list(columns))
    table.verticalHeader().hide()
    table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    table.setShowGrid(False)
    compact_rows(table)
    return table


def compact_rows(table: QTableView) -> None:
    """Rows one line of text high. The style's default (about two lines) leaves a dock at a third of a small
    window showing three rows."""
    table.verticalHeader().setDefaultSectionSize(table.fontMetrics().height() + ROW_PADDING)


def text_width(table: QTableView, text: str) -> int:
    """The width a cell needs to show `text` whole."""
    margin = table.style().pixelMetric(QStyle.PixelMetric.PM_FocusFrameHMargin, None, table) + 1
    return table.fontMetrics().horizontalAdvance(text) + 2 * margin + CELL_GAP


def fit_columns(table: QTableView, samples: Mapping[int, str] | None = None, stretch: int | None = None) -> None:
    """Size each column to its header and to its typical text, `samples[column]`; column `stretch` takes the room
    left (and gives it back when the table narrows).

    The samples are measured once: ResizeToContents would measure every cell again on each refresh, seconds for
    a few hundred rows. Longer cells elide and show in full as their tooltip."""
    header = table.horizontalHeader()
    samples = samples or {}
    for column in range(header.count()):
        width = header.sectionSizeFromContents(column).width()
        if column in samples:
            width = max(width, text_width(table, samples[column]))
        header.resizeSection(column, width)
    if stretch is not None:
        header.setSectionResizeMode(stretch, QHeaderView.ResizeMode.Stretch)

