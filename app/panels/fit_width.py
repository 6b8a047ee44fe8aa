"""Forms that fit their dock's width: nothing hides under the vertical scroll bar or past the right edge.

A `FitWidthScrollArea` scrolls vertically only. Its page always takes the viewport's width, and the area asks
for at least the page's minimum width plus the scroll bar, so the dock holding it cannot be made narrower
than its form. The forms keep that minimum small: rows whose field does not fit beside its label wrap below it
(`fit_form`), and combo boxes do not ask for the width of their longest item (`narrow_combo`).
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, QSize, Qt
from PySide6.QtWidgets import QComboBox, QFormLayout, QScrollArea, QStyle, QWidget

COMBO_CHARACTERS = 8
"""The characters a narrowed combo box asks room for; it grows past that with its form."""


class FitWidthScrollArea(QScrollArea):
    """A vertical scroll area whose page is always exactly as wide as the viewport."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWidgetResizable(True)
        self.setFrameShape(QScrollArea.Shape.NoFrame)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)

    def setWidget(self, widget: QWidget) -> None:
        old = self.widget()
        if old is not None:
            old.removeEventFilter(self)
        super().setWidget(widget)
        widget.installEventFilter(self)
        self.updateGeometry()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        # The page's minimum width changed (a field or note appeared, a row wrapped): tell the dock.
        if watched is self.widget() and event.type() == QEvent.Type.LayoutRequest:
            self.updateGeometry()
        return super().eventFilter(watched, event)

    def minimumSizeHint(self) -> QSize:
        hint = super().minimumSizeHint()
        page = self.widget()
        if page is None:
            return hint
        return QSize(max(hint.width(), self.page_minimum_width() + self.reserved_width()), hint.height())

    def page_minimum_width(self) -> int:
        """The narrowest the page can be without clipping a field."""
        page = self.widget()
        if page is None:
            return 0
        layout = page.layout()
        return max(page.minimumSizeHint().width(), layout.minimumSize().width() if layout is not None else 0,
                   page.minimumWidth())

    def reserved_width(self) -> int:
        """What the area takes beside its page: the vertical scroll bar (whenever it may show) and the frame."""
        bar = self.style().pixelMetric(QStyle.PixelMetric.PM_ScrollBarExtent, None, self.verticalScrollBar())
        return bar + 2 * self.frameWidth()


def fit_form(form: QFormLayout) -> QFormLayout:
    """Fields grow to the form's width; a field too wide to sit beside its label goes below it."""
    form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
    form.setRowWrapPolicy(QFormLayout.RowWrapPolicy.WrapLongRows)
    return form


def narrow_combo(combo: QComboBox, characters: int = COMBO_CHARACTERS) -> QComboBox:
    """A combo box that asks for room for `characters`, not for its longest item (its list still shows them
    whole), so it never sets its form's minimum width."""
    combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
    combo.setMinimumContentsLength(characters)
    return combo
