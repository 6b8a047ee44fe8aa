"""Holds & budgets on real widgets, offscreen: a budget's spent, held and remaining-of-limit read whole in the
dock at the usual window sizes, each beside a swatch of its bar segment's colour; the holds table names a run by
its id's end, as the Runs and Approvals tables do.

The checks measure the widgets as laid out (label sizes, the scroll viewport, column widths), never a constant."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from PySide6.QtCore import QPoint, QRect, Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QLabel, QStyle, QTableView

from app.panels.column_widths import ElideStartDelegate
from app.panels.holds import HELD_COLOUR, REMAINING_COLOUR, SPENT_COLOUR, BudgetBar
from app.panels.rows import BudgetRow, HoldRow
from app.readable import short_run_id
from app.window import MainWindow
from engine.ids import time_ordered_id
from tests.app.cells import cell
from tests.app.test_layout_fit import SIZES, hidden_headers, settle

BUDGET = BudgetRow("default", 10.0, 0.000015, 0.2, "month")
"""What the new user saw after one model call: a few micro-dollars spent, $0.20 held, $9.80 of $10.00 left."""
SHOWN = ("spent <$0.01", "held $0.20", "$9.80 left of $10.00")
"""The essential figures to the cent, as the Runs table writes money."""


def holds(now: datetime) -> list[HoldRow]:
    # Runs started within the same second: their ids share all but their last characters.
    return [HoldRow(f"h{index}", time_ordered_id(), "reserve", 0.2, state, now + timedelta(minutes=30),
                    0.000015 if state == "charged" else None)
            for index, state in enumerate(("placed", "charged", "released"))]


def plain(label: QLabel) -> str:
    """A rich-text label's words, as shown."""
    document_text = label.text()
    for tag in ("<b>", "</b>", "&nbsp;"):
        document_text = document_text.replace(tag, " " if tag == "&nbsp;" else "")
    while "<" in document_text:
        start = document_text.index("<")
        document_text = document_text[:start] + document_text[document_text.index(">", start) + 1:]
    return " ".join(document_text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&").split())


def shown_whole(label: QLabel, viewport: QRect, within) -> bool:
    """Whether every line of `label` shows: it is as tall as its text needs at its width, wraps inside its
    width (or needs no more than it), and lies inside the visible part of the dock."""
    needed = label.heightForWidth(label.width()) if label.wordWrap() else label.sizeHint().height()
    if label.height() < needed or (not label.wordWrap() and label.width() < label.sizeHint().width()):
        return False
    top_left = label.mapTo(within, QPoint(0, 0))
    return viewport.contains(QRect(top_left, label.size()))


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_a_budget_says_spent_held_and_what_is_left_whole_in_the_dock(qtbot, window: MainWindow,
                                                                     size: tuple[int, int]) -> None:
    window.resize(*size)
    panel = window.holds
    panel.set_budgets([BUDGET, BudgetRow("ops", 250.0, 12.5, 0.0, "day")])
    panel.set_holds(holds(datetime.now(UTC)))
    window.docks["Holds & budgets"].raise_()
    settle(qtbot, 100)
    bars = panel.bars_box.findChildren(BudgetBar)
    assert len(bars) == 2
    bar = bars[0]
    area = panel.bars_area
    viewport = area.viewport()
    visible = QRect(QPoint(0, 0), viewport.size())
    labels = [label for label in bar.findChildren(QLabel) if label.isVisibleTo(bar)]
    said = " ".join(plain(label) for label in labels)
    for text in SHOWN:
        assert text in said, (text, said)
    assert all(shown_whole(label, visible, viewport) for label in labels), [
        (plain(label), label.size(), label.heightForWidth(label.width())) for label in labels]
    assert area.horizontalScrollBar().maximum() == 0
    # The exact amounts, as the engine writes them, are in the tooltip.
    assert "spent $0.000015" in bar.toolTip() and "remaining $9.799985 of $10.00" in bar.toolTip()


def test_the_figures_wear_their_bar_segments_colours(qtbot) -> None:
    bar = BudgetBar(BUDGET)
    qtbot.addWidget(bar)
    legend = bar.legend.text()
    # Each figure follows a swatch in its segment's colour, in the bar's order: spent, held, remaining.
    positions = []
    for colour, words in ((SPENT_COLOUR, "spent"), (HELD_COLOUR, "held"), (REMAINING_COLOUR, "left")):
        swatch = legend.index(QColor(colour).name())
        assert words in legend[swatch:], words
        positions.append(swatch)
    assert positions == sorted(positions)
    image = bar.grab().toImage()
    assert not image.isNull()


def visible_text(table: QTableView, row: int, column: int) -> str:
    """What a cell shows after eliding to its column, as its delegate elides it."""
    index = table.model().index(row, column)
    text = str(index.data())
    delegate = table.itemDelegateForColumn(column)
    mode = Qt.TextElideMode.ElideLeft if isinstance(delegate, ElideStartDelegate) else table.textElideMode()
    margin = table.style().pixelMetric(QStyle.PixelMetric.PM_FocusFrameHMargin, None, table) + 1
    return table.fontMetrics().elidedText(text, mode, table.columnWidth(column) - 2 * margin)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_holds_table_names_a_run_by_its_ids_end_like_the_runs_table(qtbot, window: MainWindow,
                                                                    size: tuple[int, int]) -> None:
    window.resize(*size)
    panel = window.holds
    panel.set_budgets([BUDGET])
    rows = holds(datetime.now(UTC))
    panel.set_holds(rows)
    window.docks["Holds & budgets"].raise_()
    settle(qtbot, 100)
    table = panel.table
    assert hidden_headers(table) == []
    assert table.horizontalScrollBar().maximum() == 0
    for row, hold in enumerate(rows):
        item = cell(table, row, 0)
        assert item.text() == hold.run_id and item.toolTip() == hold.run_id
        assert visible_text(table, row, 0).endswith(short_run_id(hold.run_id)), visible_text(table, row, 0)
    # Money to the cent, as in the Runs table; the exact amount in the tooltip.
    charged = cell(table, 1, 3)
    assert (charged.text(), charged.toolTip()) == ("<$0.01", "$0.000015")
    assert (cell(table, 0, 2).text(), cell(table, 0, 2).toolTip()) == ("$0.20", "$0.20")
