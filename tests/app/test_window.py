"""The main window on real widgets: docks, actions, shortcuts, files, dirty marks, persistence, themes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from PySide6.QtCore import QSettings, Qt
from PySide6.QtWidgets import QApplication, QMessageBox, QTableWidget

from app.examples import FIRST_START_HINT
from app.gui import create_application, create_main_window
from app.settings import AppSettings
from app.window import MainWindow
from canvas.theme import current_theme
from tests.app.cells import cell

DOCKS = ("Palette", "Properties", "Problems", "Runs", "Triggers", "Approvals", "Holds & budgets", "Log", "Changes")
ACTIONS = ("new", "open", "save", "save_as", "undo", "redo", "validate", "publish", "run", "live")


def test_window_has_every_dock_and_action(window: MainWindow) -> None:
    assert set(window.docks) == set(DOCKS)
    assert all(not window.docks[name].isHidden() for name in DOCKS if name != "Changes")
    assert window.docks["Changes"].isHidden()  # until Flow ▸ Compare with version…
    assert window.docks["Holds & budgets"].windowTitle() == "Holds && budgets"
    for action_id in ACTIONS:
        action = window.actions_by_id[action_id]
        assert action in window.menus[next(m for m in window.menus if action in window.menus[m].actions())].actions()
    toolbar_texts = [a.text() for a in window.toolbar.actions() if a.text()]
    assert {"&Publish", "&Run…", "&Live", "&Validate"} <= set(toolbar_texts)
    assert window.actions_by_id["save"].shortcut().toString() == "Ctrl+S"
    assert window.actions_by_id["validate"].shortcut().toString() == "F7"
    assert [s.toString() for s in window.actions_by_id["redo"].shortcuts()] == ["Ctrl+Shift+Z", "Ctrl+Y"]
    assert window.recent_menu.title() == "Open &Recent"


def test_shortcuts_trigger_actions(qtbot, window: MainWindow, tmp_path: Path) -> None:
    qtbot.keyClick(window, Qt.Key.Key_N, Qt.KeyboardModifier.ControlModifier)
    assert window.tabs.count() == 1
    document = window.document
    assert document is not None
    document.add_node("trigger.manual", (0, 0))
    assert window.tabs.tabText(0).endswith(" *")
    qtbot.keyClick(window, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
    assert document.flow_ref().nodes == []
    qtbot.keyClick(window, Qt.Key.Key_Y, Qt.KeyboardModifier.ControlModifier)
    assert len(document.flow_ref().nodes) == 1
    qtbot.keyClick(window, Qt.Key.Key_F7)
    assert window.statusBar().currentMessage().startswith(("Valid", "1 error", "0 error"))
    target = tmp_path / "new.flow.json"
    window.choose_save_path = lambda _document: target
    qtbot.keyClick(window, Qt.Key.Key_S, Qt.KeyboardModifier.ControlModifier)
    assert target.exists() and not window.tabs.tabText(0).endswith(" *")
    window.show_shortcuts()
    table = window.shortcuts_dialog.findChild(QTableWidget, "shortcutsTable")
    assert table is not None
    keys = [cell(table, r, 1).text() for r in range(table.rowCount())]
    commands = [cell(table, r, 0).text() for r in range(table.rowCount())]
    assert "F7" in keys and "Ctrl+Shift+P" in keys
    assert "Add node (canvas)" in commands


def test_ctrl_z_and_ctrl_shift_z_from_the_canvas_undo_redo_and_a_new_edit_drops_the_redo(
        qtbot, window: MainWindow, triage_path: Path) -> None:
    document = window.open_file(triage_path)
    editor = window.tabs.current_editor()
    assert document is not None and editor is not None
    editor.view.setFocus()
    qtbot.waitUntil(editor.view.hasFocus)
    states = [document.text()]
    document.rename_node("classify", "Label it")
    states.append(document.text())
    document.move_nodes({"classify": (10, 20)})
    states.append(document.text())
    undo = Qt.KeyboardModifier.ControlModifier
    redo = Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier

    def press(modifiers: Qt.KeyboardModifier) -> str:
        qtbot.keyClick(QApplication.focusWidget(), Qt.Key.Key_Z, modifiers)
        return document.text()

    assert [press(undo), press(undo)] == [states[1], states[0]]
    assert not window.actions_by_id["undo"].isEnabled() and press(undo) == states[0]  # nothing left to undo
    assert [press(redo), press(redo)] == [states[1], states[2]]
    assert press(undo) == states[1]
    document.set_config_field("followup", "delay", "2h")  # a new edit after an undo: the move cannot come back
    edited = document.text()
    assert edited not in states
    assert not window.actions_by_id["redo"].isEnabled() and press(redo) == edited
    assert document.undo_stack.count() == 2
    assert [press(undo), press(undo)] == [states[1], states[0]]
    assert [press(redo), press(redo)] == [states[1], edited]


def test_open_save_and_save_as_round_trip(window: MainWindow, triage_path: Path, tmp_path: Path,
                                          app_settings: AppSettings) -> None:
    original = triage_path.read_bytes()
    document = window.open_file(triage_path)
    assert document is not None
    assert window.tabs.tabText(0) == "Ticket triage"
    assert window.tabs.tabToolTip(0) == str(triage_path)
    assert window.open_file(triage_path) is document and window.tabs.count() == 1
    assert window.save()
    assert triage_path.read_bytes() == original

    document.rename_node("classify", "Classify ticket")
    assert window.tabs.tabText(0) == "Ticket triage *"
    copy = tmp_path / "copy.flow.json"
    window.choose_save_path = lambda _document: copy
    assert window.save_as()
    assert window.tabs.tabText(0) == "Ticket triage"
    assert window.tabs.tabToolTip(0) == str(copy)
    assert b"Classify ticket" in copy.read_bytes()
    assert triage_path.read_bytes() == original
    assert app_settings.recent_files()[0] == str(copy.resolve())
    assert window.recent_menu.actions()[0].text() == "copy.flow.json"


def test_closing_asks_to_save_unsaved_changes(window: MainWindow, triage_path: Path) -> None:
    document = window.open_file(triage_path)
    assert document is not None
    document.rename_node("route", "Route it")
    asked: list[str] = []

    def cancel(doc):
        asked.append(doc.flow_ref().id)
        return QMessageBox.StandardButton.Cancel

    window.ask_to_save = cancel
    assert not window.close_tab(0)
    assert window.tabs.count() == 1 and asked == ["ticket-triage"]
    window.ask_to_save = lambda _doc: QMessageBox.StandardButton.Save
    assert window.close_tab(0)
    assert window.tabs.count() == 0
    assert b"Route it" in triage_path.read_bytes()


def test_problems_row_selects_and_centres_the_node(qtbot, window: MainWindow,
                                                   triage_path: Path) -> None:
    document = window.open_file(triage_path)
    assert document is not None
    document.set_config_field("followup", "delay", "80h")
    window.validate()
    codes = [cell(window.problems.table, r, 1).text() for r in range(window.problems.table.rowCount())]
    assert codes, "an 80h delay must be reported"
    row = next(r for r in range(len(codes)) if window.problems.diagnostics[r].node == "followup")
    window.problems.table.selectRow(row)
    editor = window.tabs.current_editor()
    assert editor is not None
    assert editor.view.selected_node_ids() == ["followup"]
    assert window.properties.node_id == "followup"
    assert "Problems (" in window.docks["Problems"].windowTitle()


def test_publish_refuses_a_flow_with_errors(window: MainWindow, triage_path: Path) -> None:
    document = window.open_file(triage_path)
    assert document is not None
    document.set_config_field("classify", "prompt", "{{ broken ")
    window.publish()
    assert window.statusBar().currentMessage().startswith("Publish refused")
    assert not window.docks["Problems"].isHidden()
    assert window.problems.table.rowCount() >= 1


def test_first_start_opens_the_example_with_a_hint(qtbot, app_settings: AppSettings,
                                                   no_engine_env: None) -> None:
    first = create_main_window(create_application(), app_settings, start_engine=False)
    qtbot.addWidget(first)
    assert first.tabs.count() == 1
    assert first.document is not None and first.document.flow_ref().id == "ticket-triage"
    assert first.hint_label.text() == FIRST_START_HINT
    assert app_settings.first_start_done
    second = create_main_window(create_application(), app_settings, start_engine=False)
    qtbot.addWidget(second)
    assert second.tabs.count() == 0


def test_layout_and_theme_persist(qtbot, window: MainWindow, app_settings: AppSettings) -> None:
    window.set_theme("dark")
    assert current_theme().name == "dark"
    window.docks["Log"].hide()
    # The height: the docks' minimum widths (a form never clips) already exceed the offscreen screen's 800 pixels,
    # which restoring a geometry keeps the window inside.
    window.resize(window.width(), 480)
    window.close()
    again = AppSettings(QSettings(app_settings.qsettings.fileName(), QSettings.Format.IniFormat))
    assert again.theme == "dark"
    reopened = create_main_window(create_application(), again, start_engine=False)
    qtbot.addWidget(reopened)
    assert reopened.docks["Log"].isHidden()
    assert reopened.actions_by_id["theme_dark"].isChecked()
    assert reopened.size().height() == 480
    reopened.set_theme("light")
    assert current_theme().name == "light"


def test_palette_double_click_adds_a_node(window: MainWindow) -> None:
    window.new_flow()
    window.palette_widget.activated.emit("queue")
    document = window.document
    assert document is not None
    assert [n.type for n in document.flow_ref().nodes] == ["queue"]
    assert window.properties.node_id == document.flow_ref().nodes[0].id


def test_cold_start_reaches_an_interactive_window(tmp_path: Path) -> None:
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", LOCKGATE_EXIT_WHEN_READY="1", LOCKGATE_NO_ENGINE="1",
               XDG_CONFIG_HOME=str(tmp_path / "config"), LOCKGATE_DATA_DIR=str(tmp_path / "data"))
    # The 2 s target is measured by tests/bench/app_cold_start.py; the timeout (10 times it) only guards a hang.
    done = subprocess.run([sys.executable, "-m", "app"], env=env, capture_output=True, text=True, timeout=20)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ready "), done.stdout + done.stderr
    assert float(done.stdout.split()[1]) > 0  # the app's own start-up figure, the bench's input


def test_no_shortcut_is_bound_twice_and_the_list_uses_key_names(window: MainWindow) -> None:
    from collections import Counter

    from PySide6.QtGui import QKeySequence

    from app import actions as action_specs
    from canvas.bindings import BINDINGS

    window.new_flow()
    editor = window.tabs.current_editor()
    assert editor is not None
    bound = Counter(
        key.toString(QKeySequence.SequenceFormat.PortableText)
        for action in [*window.actions_by_id.values(), *editor.view.actions_by_name.values()]
        for key in action.shortcuts()
    )
    # Spelled-out keys only: a platform's standard keys differ (KDE's Delete includes Ctrl+D).
    assert all(isinstance(key, str) for b in BINDINGS for key in b.keys)
    assert all(isinstance(key, str) for spec in action_specs.ACTIONS for key in spec.shortcuts)
    twice = {key: count for key, count in bound.items() if count > 1}
    assert twice == {}, f"bound more than once: {twice}"
    assert [k.toString() for k in editor.view.actions_by_name["delete"].shortcuts()] == ["Del", "Backspace"]
    assert [k.toString() for k in editor.view.actions_by_name["duplicate"].shortcuts()] == ["Ctrl+D"]
    assert len(bound) == sum(len(b.sequences()) for b in BINDINGS) + sum(
        len(a.shortcuts()) for a in window.actions_by_id.values())

    window.show_shortcuts()
    table = window.shortcuts_dialog.findChild(QTableWidget, "shortcutsTable")
    assert table is not None
    rows = {cell(table, r, 0).text(): cell(table, r, 1).text() for r in range(table.rowCount())}
    assert rows["Copy (canvas)"] == "Ctrl+C" and rows["Paste (canvas)"] == "Ctrl+V"
    assert rows["Delete (canvas)"] == "Del, Backspace" and rows["Duplicate (canvas)"] == "Ctrl+D"
    assert not [keys for keys in rows.values() if "F16" in keys or "Copy" in keys.split(", ")]


def test_ctrl_d_duplicates_and_delete_deletes_on_the_canvas(qtbot, window: MainWindow) -> None:
    document = window.new_flow()
    editor = window.tabs.current_editor()
    assert editor is not None
    node_id = document.add_node("queue", (0, 0))
    editor.view.select_node(node_id)
    editor.view.setFocus()
    qtbot.keyClick(editor.view, Qt.Key.Key_D, Qt.KeyboardModifier.ControlModifier)
    assert len(document.flow_ref().nodes) == 2
    qtbot.keyClick(editor.view, Qt.Key.Key_Delete)
    assert len(document.flow_ref().nodes) == 1
