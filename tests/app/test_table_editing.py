"""Key/value tables in the properties panel edited with real clicks and keys: every edit lands as one undo
step and Qt says nothing on stderr (no "commitData called with an editor that does not belong to this view")."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QPoint, Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QLineEdit, QTableWidget

from app.panels.field_editors import MappingEditor
from app.panels.properties import PropertiesPanel
from canvas.document import FlowDocument


def _cell_centre(table: QTableWidget, row: int, column: int) -> QPoint:
    item = table.item(row, column)
    assert item is not None, f"no cell {row},{column}"
    return table.visualItemRect(item).center()


def _edit_cell(qtbot, table: QTableWidget, row: int, column: int, text: str, finish: Qt.Key) -> None:
    at = _cell_centre(table, row, column)
    QTest.mouseClick(table.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, at)
    QTest.mouseDClick(table.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, at)
    qtbot.waitUntil(lambda: table.state() == QTableWidget.State.EditingState)
    editors = [w for w in table.viewport().findChildren(QLineEdit) if w.isVisible()]
    assert len(editors) == 1, editors
    editor = editors[0]
    QTest.keyClick(editor, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)
    QTest.keyClick(editor, Qt.Key.Key_Backspace)
    QTest.keyClicks(editor, text)
    QTest.keyClick(editor, finish)


def test_editing_set_values_in_the_table_is_undoable_and_quiet(qtbot, qtlog, triage_path: Path) -> None:
    document = FlowDocument.open(triage_path)
    panel = PropertiesPanel()
    qtbot.addWidget(panel)
    panel.resize(420, 800)
    panel.show()
    # Active, so the cell editor gets and loses focus as on a desktop (focus-out commits once more).
    panel.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is panel)
    panel.set_document(document)
    panel.show_node("note")
    values = panel.editors["values"]
    assert isinstance(values, MappingEditor)
    table = values.table
    before = document.text()

    _edit_cell(qtbot, table, 0, 1, "Called back {{ inputs.ticket.id }}", Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: document.node("note") is not None
                    and document.node("note").config["values"]["note"] == "Called back {{ inputs.ticket.id }}")
    _edit_cell(qtbot, table, 0, 0, "summary", Qt.Key.Key_Tab)  # Tab commits and moves on to the value cell
    qtbot.waitUntil(lambda: "summary" in document.node("note").config["values"])
    qtbot.mouseClick(values.add_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: len(document.node("note").config["values"]) == 2)
    _edit_cell(qtbot, table, 1, 1, "{{ inputs.ticket.body }}", Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: "{{ inputs.ticket.body }}" in document.node("note").config["values"].values())
    table.setFocus()  # leaving the table commits nothing more
    QApplication.processEvents()

    assert document.node("note").config["values"] == {
        "summary": "Called back {{ inputs.ticket.id }}", "key1": "{{ inputs.ticket.body }}"}
    steps = document.undo_stack.count()
    assert steps == 4, [document.undo_stack.text(i) for i in range(steps)]
    for _ in range(steps):
        document.undo_stack.undo()
    assert document.text() == before
    assert table.item(0, 1) is not None and table.item(0, 1).text() == "Followed up on {{ inputs.ticket.id }}"
    warnings = [r.message for r in qtlog.records if r.type != 0]  # 0: QtDebugMsg
    assert not [w for w in warnings if "commitData" in w or "editor" in w], warnings


def test_clearing_a_key_drops_its_row_after_the_cell_editor_closes(qtbot, qtlog, triage_path: Path) -> None:
    document = FlowDocument.open(triage_path)
    panel = PropertiesPanel()
    qtbot.addWidget(panel)
    panel.resize(420, 800)
    panel.show()
    # Active, so the cell editor gets and loses focus as on a desktop (focus-out commits once more).
    panel.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is panel)
    panel.set_document(document)
    panel.show_node("note")
    values = panel.editors["values"]
    assert isinstance(values, MappingEditor)
    qtbot.mouseClick(values.add_button, Qt.MouseButton.LeftButton)
    assert values.table.rowCount() == 2 and len(document.node("note").config["values"]) == 2
    _edit_cell(qtbot, values.table, 1, 0, "", Qt.Key.Key_Return)  # a row without a key is no entry
    qtbot.waitUntil(lambda: values.table.rowCount() == 1)
    assert list(document.node("note").config["values"]) == ["note"]
    assert document.undo_stack.count() == 2
    warnings = [r.message for r in qtlog.records if "commitData" in r.message]
    assert warnings == []
