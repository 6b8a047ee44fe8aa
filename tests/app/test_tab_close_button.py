"""Each flow tab's close button is an outline cross in the theme's text colour (not the style's red square) and
closes the tab it sits on, also after tabs were moved; a dirty flow still asks first."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QMessageBox, QTabBar, QToolButton

from app.window import MainWindow


def _close_button(window: MainWindow, index: int) -> QToolButton:
    button = window.tabs.tabBar().tabButton(index, QTabBar.ButtonPosition.RightSide)
    assert isinstance(button, QToolButton)
    return button


def _names(window: MainWindow) -> list[str]:
    return [window.tabs.document_at(i).header().name for i in range(window.tabs.count())]


def test_a_tabs_close_button_closes_that_tab_wherever_it_moved(qtbot, window: MainWindow) -> None:
    for name in ("First", "Second", "Third"):
        window.new_flow().rename_flow(name)
    start = window.tabs.count() - 3
    window.tabs.tabBar().moveTab(start, start + 2)  # First goes last
    assert _names(window)[start:] == ["Second", "Third", "First"]
    window.tabs.setCurrentIndex(start)

    button = _close_button(window, start + 1)  # Third's, not the current tab's
    assert button.toolTip() == "Close this flow (Ctrl+W)"
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    assert _names(window)[start:] == ["Second", "First"]

    qtbot.mouseClick(_close_button(window, start + 1), Qt.MouseButton.LeftButton)
    assert _names(window)[start:] == ["Second"]


def test_the_cross_is_drawn_in_the_text_colour(qtbot, window: MainWindow) -> None:
    window.new_flow()
    image = _close_button(window, window.tabs.count() - 1).icon().pixmap(40, 40).toImage()
    colours = [image.pixelColor(x, y) for x in range(image.width()) for y in range(image.height())]
    inked = max(colours, key=lambda colour: colour.alpha())
    text = window.tabs.palette().color(QPalette.ColorRole.ButtonText)
    assert inked.alpha() > 200
    assert max(abs(a - b) for a, b in zip(inked.getRgb()[:3], text.getRgb()[:3], strict=True)) <= 2, (
        inked.name(), text.name())


def test_a_dirty_flow_asks_before_its_close_button_closes_it(qtbot, window: MainWindow) -> None:
    document = window.new_flow()
    document.rename_flow("Unsaved")
    asked: list[str] = []

    def answer(asked_for) -> QMessageBox.StandardButton:
        asked.append(asked_for.header().name)
        return QMessageBox.StandardButton.Cancel

    window.ask_to_save = answer
    index = window.tabs.count() - 1
    qtbot.mouseClick(_close_button(window, index), Qt.MouseButton.LeftButton)
    assert asked == ["Unsaved"] and window.tabs.count() == index + 1
