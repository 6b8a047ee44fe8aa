"""Holds & budgets: a bar per budget (spent, held, remaining of the limit) and the holds table.

Each budget's figures read whole in a small dock: its name and period, the bar, then a legend that wraps
between its items, each figure beside a swatch of its segment's colour, to the cent as the Runs table writes
money (the exact amounts, as the engine writes them, in the tooltip). The holds table names a run by its id's
end, as the Runs and Approvals tables do.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from html import escape

from PySide6.QtCore import QRectF, QSize, Qt
from PySide6.QtGui import QColor, QPainter, QPaintEvent
from PySide6.QtWidgets import (
    QLabel,
    QSizePolicy,
    QSplitter,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.panels.column_widths import ColumnWidths, ElideStartDelegate
from app.panels.empty_state import EmptyStateStack
from app.panels.fit_width import FitWidthScrollArea
from app.panels.rows import BudgetRow, HoldRow, cents, local_time, short_time, usd
from app.panels.tables import read_only_table

HOLD_COLUMNS = ("Run", "Node", "Held", "Charged", "State", "Expires")
RUN_COLUMN, NODE_COLUMN, HELD_COLUMN, CHARGED_COLUMN, STATE_COLUMN, EXPIRES_COLUMN = range(6)
HOLD_WIDTHS = (
    {RUN_COLUMN: "…c6d7e8f9"},
    {NODE_COLUMN: "classify", HELD_COLUMN: "$10.00", CHARGED_COLUMN: "<$0.01", STATE_COLUMN: "released",
     EXPIRES_COLUMN: "17:26:33"},
    {NODE_COLUMN: "reserve_refund", HELD_COLUMN: "$1,234.56", CHARGED_COLUMN: "$1,234.56",
     EXPIRES_COLUMN: "Dec 31 23:59"},
    {RUN_COLUMN: "01a250f757b9c0d1e2f3a4b5c6d7e8f9"},
)
"""What the columns get, in order, as room allows (`ColumnWidths`): the run id's last 8 characters (what
messages call a run), the typical cells, longer amounts and dates, the whole run id; the node takes the rest.
The run id elides at its start: its time-ordered first digits are alike for runs started within a minute."""
OPTIONAL_COLUMNS = (EXPIRES_COLUMN, NODE_COLUMN)
"""Hidden in this order in a dock too narrow for the others' typical cells: what a hold is and what it cost
matter more than when an unspent one lapses (the header's tooltip names what is hidden)."""
SPENT_COLOUR = QColor("#d64545")
HELD_COLOUR = QColor("#d68a00")
REMAINING_COLOUR = QColor("#219653")
BAR_HEIGHT = 14
PERIOD_WORDS = {"day": "today", "week": "this week", "month": "this month"}


def swatch(colour: QColor, text: str) -> str:
    """A legend item: a square of `colour`, then `text`, kept on one line (the legend wraps between items)."""
    return f'<span style="color:{colour.name()}">■</span>&nbsp;{escape(text).replace(" ", "&nbsp;")}'


class BudgetMeter(QWidget):
    """The stacked bar: spent | held | remaining, as parts of the limit."""

    def __init__(self, budget: BudgetRow, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.budget = budget
        self.setFixedHeight(BAR_HEIGHT)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)

    def sizeHint(self) -> QSize:
        return QSize(160, BAR_HEIGHT)

    def minimumSizeHint(self) -> QSize:
        return QSize(40, BAR_HEIGHT)

    def paintEvent(self, _event: QPaintEvent) -> None:
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        bar = QRectF(0, 0, self.width() - 1, self.height())
        limit = max(self.budget.limit_usd, 1e-9)
        x = bar.left()
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(self.palette().mid())
        painter.drawRoundedRect(bar, 4, 4)
        for amount, colour in ((self.budget.spent_usd, SPENT_COLOUR), (self.budget.held_usd, HELD_COLOUR),
                               (self.budget.remaining_usd, REMAINING_COLOUR)):
            width = bar.width() * min(max(amount / limit, 0.0), 1.0)
            width = min(width, bar.right() - x)
            if width > 0:
                painter.setBrush(colour)
                painter.drawRect(QRectF(x, bar.top(), width, bar.height()))
                x += width
        painter.end()


class BudgetBar(QWidget):
    """One budget: its name and period, the bar, and a legend with the figures in the segments' colours."""

    def __init__(self, budget: BudgetRow, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.budget = budget
        b = budget
        period = PERIOD_WORDS.get(b.period, f"({b.period})" if b.period else "")
        self.title = QLabel(f"<b>{escape(b.name)}</b>" + (f" · {escape(period)}" if period else ""), self)
        self.title.setObjectName("budgetTitle")
        self.title.setTextFormat(Qt.TextFormat.RichText)
        self.title.setWordWrap(True)
        self.meter = BudgetMeter(budget, self)
        self.legend = QLabel(" &nbsp; ".join((
            swatch(SPENT_COLOUR, f"spent {cents(b.spent_usd)}"),
            swatch(HELD_COLOUR, f"held {cents(b.held_usd)}"),
            swatch(REMAINING_COLOUR, f"{cents(b.remaining_usd)} left of {cents(b.limit_usd)}"),
        )), self)
        self.legend.setObjectName("budgetLegend")
        self.legend.setTextFormat(Qt.TextFormat.RichText)
        self.legend.setWordWrap(True)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(3)
        layout.addWidget(self.title)
        layout.addWidget(self.meter)
        layout.addWidget(self.legend)
        self.setToolTip(self.caption())

    def caption(self) -> str:
        """The figures in full, as the engine writes them: the tooltip."""
        b = self.budget
        return (f"{b.name} ({b.period}): spent {usd(b.spent_usd)}, held {usd(b.held_usd)}, "
                f"remaining {usd(b.remaining_usd)} of {usd(b.limit_usd)}")


class HoldsPanel(QWidget):
    def __init__(self, parent: QWidget | None = None, now: Callable[[], datetime] | None = None) -> None:
        super().__init__(parent)
        self.now = now or (lambda: datetime.now(UTC))
        self.budgets: list[BudgetRow] = []
        self.holds: list[HoldRow] = []
        self.bars_box = QWidget()
        self.bars_layout = QVBoxLayout(self.bars_box)
        self.bars_layout.setContentsMargins(6, 6, 6, 6)
        self.bars_layout.setSpacing(10)
        self.bars_area = FitWidthScrollArea()
        self.bars_area.setObjectName("budgetBars")
        self.bars_area.setWidget(self.bars_box)
        self.table = read_only_table("holdsTable", HOLD_COLUMNS)
        self.table.setWordWrap(False)  # one line a hold: a long cell elides (in full as its tooltip)
        self.table.setItemDelegateForColumn(RUN_COLUMN, ElideStartDelegate(self.table))
        self.column_widths = ColumnWidths(self.table, HOLD_WIDTHS, stretch=NODE_COLUMN, optional=OPTIONAL_COLUMNS)
        splitter = QSplitter(Qt.Orientation.Horizontal)
        splitter.addWidget(self.bars_area)
        splitter.addWidget(self.table)
        splitter.setStretchFactor(0, 1)
        splitter.setStretchFactor(1, 2)
        splitter.setChildrenCollapsible(False)
        self.stack = EmptyStateStack(splitter, self)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.stack)
        self.set_unavailable("The engine is not running, so budgets and holds cannot be read.")

    def set_unavailable(self, reason: str) -> None:
        self.set_budgets([])
        self.set_holds([])
        self.stack.show_message(reason)

    def set_budgets(self, budgets: list[BudgetRow]) -> None:
        self.budgets = budgets
        while self.bars_layout.count():
            item = self.bars_layout.takeAt(0)
            widget = item.widget() if item is not None else None
            if widget is not None:
                widget.hide()  # at once: the deletion waits for the event loop
                widget.deleteLater()
        for budget in budgets:
            self.bars_layout.addWidget(BudgetBar(budget, self.bars_box))
        if not budgets:
            none = QLabel("No budgets: add one in Settings.", self.bars_box)
            none.setWordWrap(True)
            self.bars_layout.addWidget(none)
        self.bars_layout.addStretch(1)
        self.stack.show_content()

    def set_holds(self, holds: list[HoldRow]) -> None:
        self.holds = holds
        now = self.now()
        self.table.setRowCount(len(holds))
        for row, hold in enumerate(holds):
            placed = hold.state == "placed"
            cells = (
                (hold.run_id, hold.run_id),
                (hold.node, hold.node),
                (cents(hold.amount_usd), usd(hold.amount_usd)),
                (cents(hold.charged_usd), usd(hold.charged_usd)) if hold.charged_usd is not None else ("", ""),
                (hold.state, hold.state),
                (short_time(hold.expires_at, now), local_time(hold.expires_at)) if placed else ("", ""),
            )
            for column, (text, tip) in enumerate(cells):
                item = QTableWidgetItem(text)
                item.setToolTip(tip)
                self.table.setItem(row, column, item)
        self.stack.show_content()
