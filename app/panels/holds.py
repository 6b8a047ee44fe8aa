"""Holds & budgets: a bar per budget (spent, held, remaining of the limit) and the holds table."""

from __future__ import annotations

from PySide6.QtCore import QRectF, QSize, Qt
from PySide6.QtGui import QColor, QPainter, QPaintEvent
from PySide6.QtWidgets import (
    QHeaderView,
    QLabel,
    QSplitter,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.panels.empty_state import EmptyStateStack
from app.panels.rows import BudgetRow, HoldRow, local_time, usd
from app.panels.tables import read_only_table

HOLD_COLUMNS = ("Run", "Node", "Held", "Charged", "State", "Expires")
SPENT_COLOUR = QColor("#d64545")
HELD_COLOUR = QColor("#d68a00")
REMAINING_COLOUR = QColor("#219653")


class BudgetBar(QWidget):
    """One budget: a stacked bar of spent | held | remaining, with the figures as text."""

    def __init__(self, budget: BudgetRow, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.budget = budget
        self.setMinimumHeight(38)
        self.setToolTip(self.caption())

    def caption(self) -> str:
        b = self.budget
        return (f"{b.name} ({b.period}): spent {usd(b.spent_usd)}, held {usd(b.held_usd)}, "
                f"remaining {usd(b.remaining_usd)} of {usd(b.limit_usd)}")

    def sizeHint(self) -> QSize:
        return QSize(320, 38)

    def paintEvent(self, _event: QPaintEvent) -> None:
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setPen(self.palette().text().color())
        painter.drawText(QRectF(0, 0, self.width(), 18), Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
                         self.caption())
        bar = QRectF(0, 20, self.width() - 1, 14)
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


class HoldsPanel(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.budgets: list[BudgetRow] = []
        self.holds: list[HoldRow] = []
        self.bars_box = QWidget(self)
        self.bars_layout = QVBoxLayout(self.bars_box)
        self.bars_layout.setContentsMargins(6, 6, 6, 6)
        self.table = read_only_table("holdsTable", HOLD_COLUMNS)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Stretch)
        splitter = QSplitter(Qt.Orientation.Horizontal)
        splitter.addWidget(self.bars_box)
        splitter.addWidget(self.table)
        splitter.setStretchFactor(0, 1)
        splitter.setStretchFactor(1, 2)
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
                widget.deleteLater()
        for budget in budgets:
            self.bars_layout.addWidget(BudgetBar(budget, self.bars_box))
        if not budgets:
            self.bars_layout.addWidget(QLabel("No budgets: add one in Settings.", self.bars_box))
        self.bars_layout.addStretch(1)
        self.stack.show_content()

    def set_holds(self, holds: list[HoldRow]) -> None:
        self.holds = holds
        self.table.setRowCount(len(holds))
        for row, hold in enumerate(holds):
            charged = usd(hold.charged_usd) if hold.charged_usd is not None else ""
            cells = (hold.run_id, hold.node, usd(hold.amount_usd), charged, hold.state,
                     local_time(hold.expires_at) if hold.state == "placed" else "")
            for column, text in enumerate(cells):
                self.table.setItem(row, column, QTableWidgetItem(text))
        self.stack.show_content()
