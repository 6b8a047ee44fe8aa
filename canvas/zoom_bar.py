"""The canvas corner controls: zoom out / percentage (click: 100%) / zoom in, Fit, and the minimap toggle."""

from __future__ import annotations

from PySide6.QtWidgets import QHBoxLayout, QToolButton, QWidget


def zoom_text(level: float) -> str:
    return f"{round(level * 100)}%"


class ZoomBar(QWidget):
    """Buttons only; the view connects them to its own commands and calls `show_zoom` when the zoom moves."""

    def __init__(self, parent: QWidget) -> None:
        super().__init__(parent)
        self.setObjectName("zoomBar")
        self.setAutoFillBackground(True)
        row = QHBoxLayout(self)
        row.setContentsMargins(3, 3, 3, 3)
        row.setSpacing(2)
        self.zoom_out = self._button("−", "Zoom out (Ctrl+-)")
        self.percent = self._button("100%", "Zoom level; click for 100% (Ctrl+0)")
        self.percent.setMinimumWidth(48)
        self.zoom_in = self._button("+", "Zoom in (Ctrl++)")
        self.fit = self._button("Fit", "Frame the selection, or the whole flow (F)")
        self.minimap = self._button("Map", "Show or hide the overview (Ctrl+M)")
        self.minimap.setCheckable(True)
        self.minimap.setChecked(True)
        for button in (self.zoom_out, self.percent, self.zoom_in, self.fit, self.minimap):
            row.addWidget(button)
        self.adjustSize()

    def _button(self, text: str, tip: str) -> QToolButton:
        button = QToolButton(self)
        button.setText(text)
        button.setToolTip(tip)
        button.setAutoRaise(True)
        button.setAccessibleName(tip.split(" (")[0].split(";")[0])
        return button

    def show_zoom(self, level: float) -> None:
        self.percent.setText(zoom_text(level))
