"""Docks that follow the window: side docks narrowed by a small window widen again when the window does, and
the bottom docks keep their share of its height.

QMainWindow takes the room a shrinking window loses from the docks once the canvas is at its minimum, but
gives all the room a growing window gains to the canvas, so after one small moment the palette and the
properties stay cramped for good. `SideDockWidths` remembers the width each side dock should have (its
starting width, or the width the user dragged it to) and, whenever the window grows, gives a dock narrower
than that its width back. `BottomDockHeight` keeps the bottom dock area at its share of the window's height
the same way, whichever way the window resizes.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt, QTimer
from PySide6.QtWidgets import QApplication, QDockWidget, QMainWindow


class _FollowsWindow(QObject):
    """Watches `window` and its docks: `_follow()` once the window's layout has placed the docks after a window
    resize, `_dock_resized(dock)` when one of its own docks (`_owns`) resized otherwise."""

    def __init__(self, window: QMainWindow) -> None:
        super().__init__(window)
        self.window = window
        self._window_resizing = False

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.Resize:
            if watched is self.window:
                # The window's layout resizes the docks right after this: that is not the user's choice.
                if not self._window_resizing:
                    self._window_resizing = True
                    QTimer.singleShot(0, self._followed)
            elif isinstance(watched, QDockWidget) and self._owns(watched):
                self._dock_resized(watched)
        return False

    def _followed(self) -> None:
        self._window_resizing = False
        self._follow()

    def _owns(self, dock: QDockWidget) -> bool:
        raise NotImplementedError

    def _dock_resized(self, dock: QDockWidget) -> None:
        raise NotImplementedError

    def _follow(self) -> None:
        raise NotImplementedError


class SideDockWidths(_FollowsWindow):
    """Sizes `widths`' docks (dock -> width in pixels) in `window` and keeps them so as the window resizes."""

    def __init__(self, window: QMainWindow, widths: dict[QDockWidget, int]) -> None:
        super().__init__(window)
        self.wanted: dict[QDockWidget, int] = dict(widths)
        """The width each dock should have when there is room: its start, or where the user dragged it."""
        self._window_width: int | None = None
        for dock, width in widths.items():
            window.resizeDocks([dock], [width], Qt.Orientation.Horizontal)
            dock.installEventFilter(self)
        window.installEventFilter(self)

    def _owns(self, dock: QDockWidget) -> bool:
        return dock in self.wanted

    def _dock_resized(self, dock: QDockWidget) -> None:
        # A button held while the window keeps its size: the user is dragging the dock's separator.
        dragging = QApplication.mouseButtons() != Qt.MouseButton.NoButton
        if dragging and not self._window_resizing and self._placed(dock):
            self.wanted[dock] = dock.width()

    def _placed(self, dock: QDockWidget) -> bool:
        return dock.isVisible() and not dock.isFloating() and self.window.dockWidgetArea(dock) in (
            Qt.DockWidgetArea.LeftDockWidgetArea, Qt.DockWidgetArea.RightDockWidgetArea)

    def _follow(self) -> None:
        width = self.window.width()
        grew = self._window_width is not None and width > self._window_width
        self._window_width = width
        if not grew:
            return
        cramped = [dock for dock, wanted in self.wanted.items() if self._placed(dock) and dock.width() < wanted]
        if not cramped:
            return
        self.window.resizeDocks(cramped, [self.wanted[dock] for dock in cramped], Qt.Orientation.Horizontal)


BOTTOM_SHARE = 1 / 3
"""The bottom docks' share of the window's height to start with: five or more table rows at 900 px high, four
at 700, and the canvas keeps the rest."""


class BottomDockHeight(_FollowsWindow):
    """Keeps the bottom dock area at a share of `window`'s height as the window resizes: `BOTTOM_SHARE` to start
    with, the share a restored layout had (`keep_current`), or the share the user dragged it to.

    QMainWindow gives a growing window's room to the canvas and takes a shrinking window's from it, so a dock
    area sized for one window height is a sliver in a taller one and crowds the canvas in a shorter one."""

    def __init__(self, window: QMainWindow, bottom: QDockWidget, share: float = BOTTOM_SHARE) -> None:
        super().__init__(window)
        self.share: float | None = share
        """The bottom area's height over the window's; None: take it from the layout as next laid out."""
        self._window_height: int | None = None
        window.resizeDocks([bottom], [round(share * window.height())], Qt.Orientation.Vertical)
        for dock in window.findChildren(QDockWidget):
            dock.installEventFilter(self)
        window.installEventFilter(self)

    def keep_current(self) -> None:
        """The layout was just restored: keep the share it gives the bottom docks rather than impose one."""
        self.share = None

    def keep_share(self, share: float) -> None:
        """The layout was just restored, and the bottom docks had `share` of the window's height when it was
        saved: give them that share of the height the window has now. The restored layout keeps the dock area's
        height in pixels, which would be a larger share each time a window comes back smaller than it was saved
        (another screen) and is then made larger again."""
        self.share = share
        self._window_height = None
        QTimer.singleShot(0, self._follow)

    def current_share(self) -> float | None:
        """The bottom dock area's height over the window's, or None while no dock is docked there."""
        height = self.area_height()
        return height / self.window.height() if height is not None and self.window.height() > 0 else None

    def area_height(self) -> int | None:
        """The bottom dock area's height (its tab bar included), or None while no dock is docked there."""
        dock = self._bottom_dock()
        if dock is None:
            return None
        status = self.window.statusBar()
        bottom = status.y() if status.isVisible() else self.window.height()
        return bottom - dock.y()

    def _owns(self, dock: QDockWidget) -> bool:
        return dock is self._bottom_dock()

    def _bottom_dock(self) -> QDockWidget | None:
        """A dock shown in the bottom area (a tabbed dock behind another is visible, but moved off the window)."""
        for dock in self.window.findChildren(QDockWidget):
            if (dock.isVisible() and not dock.isFloating() and self.window.rect().intersects(dock.geometry())
                    and self.window.dockWidgetArea(dock) == Qt.DockWidgetArea.BottomDockWidgetArea):
                return dock
        return None

    def _dock_resized(self, dock: QDockWidget) -> None:
        # A button held while the window keeps its size: the user is dragging the docks' separator.
        dragging = QApplication.mouseButtons() != Qt.MouseButton.NoButton
        height = self.area_height()
        if dragging and not self._window_resizing and height is not None and self.window.height() > 0:
            self.share = height / self.window.height()

    def _follow(self) -> None:
        window_height = self.window.height()
        if window_height == self._window_height:
            return
        self._window_height = window_height
        dock, height = self._bottom_dock(), self.area_height()
        if dock is None or height is None:
            return
        if self.share is None:
            self.share = height / window_height
            return
        wanted = round(self.share * window_height)
        if abs(wanted - height) > 1:
            self.window.resizeDocks([dock], [wanted], Qt.Orientation.Vertical)
