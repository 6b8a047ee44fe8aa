"""Table columns that share the table's width, so the table does not scroll sideways.

Every column starts as wide as its header, or as its `least` width (a column of icons or buttons). Then each of
the `stages`, in order, widens its columns to the width their text in that stage needs (`{column: text}`); when
the room left is short, the stage shares it out in proportion to what each column wants. The stretch column
takes whatever is left at the end. So the order of the stages says what matters most: e.g. the last characters
of a run id, then a place's typical text, then the short columns' typical cells, last the whole run id. Narrower
cells elide, their full text in the tooltip.

A dock too narrow for every header and the first `must_fit` stages hides the `optional` columns, in their
order, until the rest fit; they show again once there is room. Nine columns in half a small window would
otherwise each show three letters, or the place would sit past a sideways scroll.

Widths come from a few sample texts, not from every cell, so a refresh of hundreds of rows measures nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from PySide6.QtCore import QEvent, QModelIndex, QObject, QPersistentModelIndex, Qt
from PySide6.QtWidgets import QHeaderView, QStyledItemDelegate, QStyleOptionViewItem, QTableView

from app.panels.tables import text_width

Stage = Mapping[int, str]


def share_room(available: int, base: Mapping[int, int], stages: Sequence[Mapping[int, int]]) -> dict[int, int]:
    """Widths of the columns in `base` (their least width) within `available` pixels: each stage in turn widens
    its columns towards their wanted width, in proportion to what each wants when the room left is short."""
    widths = dict(base)
    for stage in stages:
        left = available - sum(widths.values())
        if left <= 0:
            break
        wants = {column: wanted - widths[column] for column, wanted in stage.items()
                 if column in widths and wanted > widths[column]}
        asked = sum(wants.values())
        given = min(left, asked)
        for column, want in wants.items():
            widths[column] += want * given // asked
    return widths


class ColumnWidths(QObject):
    """Keeps `table`'s columns sharing its viewport's width as it resizes; `stretch` takes the room left."""

    def __init__(self, table: QTableView, stages: Sequence[Stage], stretch: int, optional: Sequence[int] = (),
                 must_fit: int = 2, least: Mapping[int, int] | None = None) -> None:
        super().__init__(table)
        self.table = table
        self.stages = [dict(stage) for stage in stages]
        self.stretch = stretch
        self.least: dict[int, int] = dict(least or {})
        """Widths in pixels below which a column never goes: cells that are not text (an icon, a button)."""
        self.optional = list(optional)
        self.must_fit = must_fit
        self.dropped: set[int] = set()
        """Optional columns hidden for want of room (not those the panel hides itself)."""
        table.horizontalHeader().setSectionResizeMode(stretch, QHeaderView.ResizeMode.Stretch)
        table.viewport().installEventFilter(self)
        self.fit()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.Resize and watched is self.table.viewport():
            self.fit()
        return False

    def widths(self, available: int) -> dict[int, int]:
        """The width of each column to show when the table's viewport is `available` pixels wide (the others
        are hidden for want of room)."""
        header = self.table.horizontalHeader()
        candidates = [c for c in range(header.count()) if not header.isSectionHidden(c) or c in self.dropped]
        base = {column: max(header.sectionSizeFromContents(column).width(), self.least.get(column, 0))
                for column in candidates}
        stages = [{column: text_width(self.table, text) for column, text in stage.items()} for stage in self.stages]
        shown = list(candidates)
        for column in [None, *self.optional]:
            if column in shown:
                shown.remove(column)
            needed = share_room(1 << 30, {c: base[c] for c in shown}, stages[:self.must_fit])
            if sum(needed.values()) <= available:
                break
        widths = share_room(available, {c: base[c] for c in shown}, stages)
        if self.stretch in widths:
            widths[self.stretch] += max(0, available - sum(widths.values()))
        return widths

    def fit(self) -> None:
        """Size (and show or hide) the columns for the viewport's width now; the table does it on every resize."""
        header = self.table.horizontalHeader()
        widths = self.widths(self.table.viewport().width())
        for column in self.optional:
            hide = column not in widths and (not header.isSectionHidden(column) or column in self.dropped)
            if hide != (column in self.dropped):
                header.setSectionHidden(column, hide)
                self.dropped ^= {column}
                header.setToolTip(self.dropped_text())
        for column, width in widths.items():
            if column != self.stretch and header.sectionSize(column) != width:
                header.resizeSection(column, width)


    def dropped_text(self) -> str:
        """What the header's tooltip says while columns are hidden for want of room ("" while none are)."""
        model = self.table.model()
        names = [str(model.headerData(c, Qt.Orientation.Horizontal)) for c in self.optional if c in self.dropped]
        if not names:
            return ""
        return f"Hidden to make room: {', '.join(names)}. Widen the panel to see {'it' if len(names) == 1 else 'them'}."


class ElideStartDelegate(QStyledItemDelegate):
    """Cells that elide at their start, keeping their end: a run id's last characters tell it from the others."""

    def initStyleOption(self, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex) -> None:
        super().initStyleOption(option, index)
        option.textElideMode = Qt.TextElideMode.ElideLeft
