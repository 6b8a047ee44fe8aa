"""The window's Edit menu, opened and clicked with the mouse: each entry runs the current canvas's command
(undoable) and shows the canvas's key."""

from __future__ import annotations

import itertools
from pathlib import Path

from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QCursor
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QMenu, QToolButton

from app.window import MainWindow

EDIT_ENTRIES = ["Undo", "Redo", "Cut", "Copy", "Paste", "Duplicate", "Delete", "Rename node", "Select all",
                "Auto-layout"]

_CLICKS = itertools.count()


def _choose(qtbot, window: MainWindow, entry: str) -> None:
    """Click Edit in the menu bar, then `entry` in the menu that opens."""
    menu: QMenu = window.menus["&Edit"]
    bar = window.menuBar()
    QTest.mouseClick(bar, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier,
                     bar.actionGeometry(menu.menuAction()).center())
    qtbot.waitUntil(menu.isVisible)
    action = next(a for a in menu.actions() if a.text().replace("&", "").split("\t")[0] == entry)
    assert action.isEnabled(), entry
    area = menu.actionGeometry(action)
    # Alternate ends of the entry: two clicks on one spot in a row would be read as a double-click.
    at = QPoint(area.left() + 24 if next(_CLICKS) % 2 else area.right() - 24, area.center().y())
    QTest.mouseMove(menu, at)
    QTest.mouseClick(menu, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, at)
    qtbot.waitUntil(lambda: not menu.isVisible())


def test_edit_menu_runs_the_canvas_commands(qtbot, window: MainWindow, triage_path: Path) -> None:
    menu = window.menus["&Edit"]
    texts = [a.text().replace("&", "") for a in menu.actions() if not a.isSeparator()]
    assert [t.split("\t")[0] for t in texts] == EDIT_ENTRIES
    keys = dict(t.split("\t") for t in texts if "\t" in t)
    assert keys == {"Cut": "Ctrl+X", "Copy": "Ctrl+C", "Paste": "Ctrl+V", "Duplicate": "Ctrl+D",
                    "Delete": "Del, Backspace", "Rename node": "F2", "Select all": "Ctrl+A",
                    "Auto-layout": "Ctrl+L"}
    assert not window.actions_by_id["cut"].isEnabled()  # no flow open
    document = window.open_file(triage_path)
    editor = window.tabs.current_editor()
    assert document is not None and editor is not None
    original = document.text()

    editor.view.flow_scene.select_nodes(["note"])
    _choose(qtbot, window, "Cut")
    assert document.node("note") is None
    _choose(qtbot, window, "Paste")
    assert [n for n in (n.id for n in document.flow_ref().nodes) if n.startswith("note")] == ["note"]
    _choose(qtbot, window, "Duplicate")
    assert document.node("note_2") is not None
    _choose(qtbot, window, "Delete")
    assert document.node("note_2") is None
    _choose(qtbot, window, "Select all")
    assert len(editor.view.selected_node_ids()) == len(document.flow_ref().nodes)
    _choose(qtbot, window, "Auto-layout")
    assert document.undo_stack.text(document.undo_stack.index() - 1) == "Auto-layout"
    editor.view.flow_scene.select_nodes(["route"])
    _choose(qtbot, window, "Rename node")
    assert editor.view.title_editor.isVisible() and editor.view.title_editor.node_id == "route"
    QTest.keyClicks(editor.view.title_editor, "Route by label")
    QTest.keyClick(editor.view.title_editor, Qt.Key.Key_Return)
    assert document.node("route") is not None and document.node("route").title == "Route by label"

    steps = document.undo_stack.index()
    assert steps == 6  # cut, paste, duplicate, delete, layout, rename
    for left in reversed(range(steps)):
        _choose(qtbot, window, "Undo")
        assert document.undo_stack.index() == left
    assert document.text() == original


def test_a_later_tests_window_is_not_under_the_menus_pointer(qtbot, window: MainWindow) -> None:
    """The clicks above leave the pointer on the Edit menu's Undo entry, over where a later window's toolbar has
    its Undo button. The pointer is parked off every window between tests (tests/app/conftest.py), so no status
    tip takes the place of this window's message, not even when a closing popup re-enters the widget under it."""
    assert window.statusBar().currentMessage() == ""
    window.statusBar().showMessage("untitled v1 published")
    menu = window.menus["&Edit"]
    menu.popup(window.mapToGlobal(window.rect().center()))
    qtbot.waitUntil(menu.isVisible)
    menu.close()
    qtbot.waitUntil(lambda: not menu.isVisible())
    assert window.statusBar().currentMessage() == "untitled v1 published"
    assert QApplication.widgetAt(QCursor.pos()) is None
    assert not any(button.underMouse() for button in window.toolbar.findChildren(QToolButton))
