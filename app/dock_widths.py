"""Side docks that follow the window: narrowed by a small window, they widen again when the window does.

QMainWindow takes the room a shrinking window loses from the docks once the canvas is at its minimum, but
gives all the room a growing window gains to the canvas, so after one small moment the palette and the
properties stay cramped for good. `SideDockWidths` remembers the width each side dock should have (its
starting width, or the width the user dragged it to) and, whenever the window grows, gives a dock narrower
than that its width back.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt, QTimer
from PySide6.QtWidgets import QApplication, QDockWidget, QMainWindow


class SideDockWidths(QObject):
    """Sizes `widths`' docks (dock -> width in pixels) in `window` and keeps them so as the window resizes."""

    def __init__(self, window: QMainWindow, widths: dict[QDockWidget, int]) -> None:
        super().__init__(window)
        self.window = window
        self.wanted: dict[QDockWidget, int] = dict(widths)
        """The width each dock should have when there is room: its start, or where the user dragged it."""
        self._window_width: int | None = None
        self._window_resizing = False
        for dock, width in widths.items():
            window.resizeDocks([dock], [width], Qt.Orientation.Horizontal)
            dock.installEventFilter(self)
        window.installEventFilter(self)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.Resize:
            if watched is self.window:
                # The window's layout resizes the docks right after this: that is not the user's choice.
                if not self._window_resizing:
                    self._window_resizing = True
                    QTimer.singleShot(0, self._follow)
            elif isinstance(watched, QDockWidget) and watched in self.wanted:
                self._dock_resized(watched)
        return False

    def _dock_resized(self, dock: QDockWidget) -> None:
        # A button held while the window keeps its size: the user is dragging the dock's separator.
        dragging = QApplication.mouseButtons() != Qt.MouseButton.NoButton
        if dragging and not self._window_resizing and self._placed(dock):
            self.wanted[dock] = dock.width()

    def _placed(self, dock: QDockWidget) -> bool:
        return dock.isVisible() and not dock.isFloating() and self.window.dockWidgetArea(dock) in (
            Qt.DockWidgetArea.LeftDockWidgetArea, Qt.DockWidgetArea.RightDockWidgetArea)

    def _follow(self) -> None:
        self._window_resizing = False
        width = self.window.width()
        grew = self._window_width is not None and width > self._window_width
        self._window_width = width
        if not grew:
            return
        cramped = [dock for dock, wanted in self.wanted.items() if self._placed(dock) and dock.width() < wanted]
        if not cramped:
            return
        self.window.resizeDocks(cramped, [self.wanted[dock] for dock in cramped], Qt.Orientation.Horizontal)
