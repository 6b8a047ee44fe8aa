"""The flow panel: a new flow's name, id, description, enabled flag, inputs and limits, typed and clicked on
real widgets; every change undoable and saved byte-stably; declared inputs reach the Run form, validation and
template completion."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QLineEdit

from app.panels.field_editors import TemplateEditor
from app.panels.flow_panel import FlowPanel
from app.panels.inputs_editor import InputCard
from app.run_dialog import RunInputsDialog
from app.window import MainWindow
from canvas.document import FlowDocument
from engine.flow import load_flow


def type_into(qtbot, line: QLineEdit, text: str) -> None:
    """Select all, type `text`, press Enter: what a user does to replace a field's value."""
    line.setFocus()
    line.selectAll()
    qtbot.keyClick(line, Qt.Key.Key_Backspace)
    qtbot.keyClicks(line, text)
    qtbot.keyClick(line, Qt.Key.Key_Return)


def card_at(panel: FlowPanel, index: int) -> InputCard:
    return panel.inputs.cards[index]


def test_new_flows_get_unique_ids_and_the_name_gives_the_id_and_titles(qtbot, window: MainWindow) -> None:
    first = window.new_flow()
    second = window.new_flow()
    assert (first.flow_ref().id, second.flow_ref().id) == ("untitled", "untitled-2")
    assert second.flow_ref().name == "Untitled 2"
    assert window.windowTitle() == "Untitled 2 — Lockgate"
    window.show_flow_properties()
    panel = window.properties.flow_panel
    assert window.properties.showing_flow() and panel.name_edit.hasFocus()
    qtbot.keyClicks(panel.name_edit, "Refund approvals")
    qtbot.keyClick(panel.name_edit, Qt.Key.Key_Return)
    flow = second.flow_ref()
    assert (flow.name, flow.id) == ("Refund approvals", "refund-approvals")
    assert panel.id_edit.text() == "refund-approvals" and "Made from the name" in panel.id_note.text()
    assert window.windowTitle() == "Refund approvals — Lockgate"
    assert window.tabs.tabText(window.tabs.currentIndex()) == "Refund approvals *"

    # A name whose slug the other open flow has gets a numbered id.
    window.tabs.setCurrentIndex(0)
    window.show_flow_properties()
    type_into(qtbot, panel.name_edit, "Refund approvals")
    assert first.flow_ref().id == "refund-approvals-2"
    first.undo_stack.undo()
    assert (first.flow_ref().name, first.flow_ref().id) == ("Untitled", "untitled")


def test_the_id_is_checked_and_stops_following_the_name_once_set(qtbot, window: MainWindow) -> None:
    other = window.new_flow()
    document = window.new_flow()
    window.show_flow_properties()
    panel = window.properties.flow_panel
    type_into(qtbot, panel.id_edit, "Bad Id!")
    assert document.flow_ref().id == "untitled-2"
    assert panel.id_problem is not None and "not a flow id" in panel.id_problem
    type_into(qtbot, panel.id_edit, other.flow_ref().id)
    assert document.flow_ref().id == "untitled-2" and "open flow" in (panel.id_problem or "")
    type_into(qtbot, panel.id_edit, "refunds")
    assert document.flow_ref().id == "refunds" and panel.id_problem is None
    type_into(qtbot, panel.name_edit, "Customer refunds")
    assert (document.flow_ref().id, document.flow_ref().name) == ("refunds", "Customer refunds")
    document.undo_stack.undo()
    document.undo_stack.undo()
    assert document.flow_ref().id == "untitled-2" and document.id_follows_name
    window.published_ids = frozenset({"billing"})
    type_into(qtbot, panel.id_edit, "billing")
    assert document.flow_ref().id == "billing" and "Publish asks" in panel.id_note.text()


def test_inputs_are_added_renamed_typed_reordered_and_removed_undoably(qtbot, window: MainWindow,
                                                                        tmp_path: Path) -> None:
    document = window.new_flow()
    window.show_flow_properties()
    panel = window.properties.flow_panel
    start = document.text()

    qtbot.mouseClick(panel.inputs.add_button, Qt.MouseButton.LeftButton)
    assert list(document.flow_ref().inputs) == ["input1"]
    card = card_at(panel, 0)
    assert card.name_edit.hasFocus()
    qtbot.keyClicks(card.name_edit, "amount")
    qtbot.keyClick(card.name_edit, Qt.Key.Key_Return)
    card.type_combo.setFocus()
    while card.type_combo.currentText() != "number":
        qtbot.keyClick(card.type_combo, Qt.Key.Key_Down)
    qtbot.mouseClick(card.required_check, Qt.MouseButton.LeftButton)
    type_into(qtbot, card.default_edit, "12.5")
    type_into(qtbot, card.description_edit, "Refund in USD")
    spec = document.flow_ref().inputs["amount"]
    assert (spec.type, spec.required, spec.default, spec.description) == ("number", True, 12.5, "Refund in USD")

    type_into(qtbot, card.default_edit, "lots")
    assert document.flow_ref().inputs["amount"].default == 12.5 and "not a number" in (card.problem or "")

    qtbot.mouseClick(panel.inputs.add_button, Qt.MouseButton.LeftButton)
    second = card_at(panel, 1)
    qtbot.keyClicks(second.name_edit, "api_token")
    qtbot.keyClick(second.name_edit, Qt.Key.Key_Return)
    qtbot.mouseClick(second.secret_check, Qt.MouseButton.LeftButton)
    assert second.default_edit.echoMode() == QLineEdit.EchoMode.Password
    qtbot.mouseClick(second.up_button, Qt.MouseButton.LeftButton)
    assert list(document.flow_ref().inputs) == ["api_token", "amount"]
    assert document.flow_ref().inputs["api_token"].secret
    type_into(qtbot, card_at(panel, 0).name_edit, "amount")
    assert list(document.flow_ref().inputs) == ["api_token", "amount"]
    assert "exists already" in (card_at(panel, 0).problem or "")

    target = tmp_path / "refunds.flow.json"
    document.save(target)
    saved = target.read_bytes()
    assert FlowDocument.open(target).text().encode() == saved
    assert list(load_flow(target).inputs) == ["api_token", "amount"]

    qtbot.mouseClick(card_at(panel, 1).remove_button, Qt.MouseButton.LeftButton)
    assert list(document.flow_ref().inputs) == ["api_token"] and len(panel.inputs.cards) == 1
    while document.undo_stack.canUndo():
        document.undo_stack.undo()
    assert document.text() == start and panel.inputs.cards == []
    while document.undo_stack.canRedo():
        document.undo_stack.redo()
    assert list(document.flow_ref().inputs) == ["api_token"]


def test_description_enabled_and_limits_save_and_undo(qtbot, window: MainWindow, triage_path: Path) -> None:
    document = window.open_file(triage_path)
    assert document is not None
    original = triage_path.read_bytes()
    window.show_flow_properties()
    panel = window.properties.flow_panel
    assert [card.input_name for card in panel.inputs.cards] == list(document.flow_ref().inputs)

    qtbot.mouseClick(panel.enabled_check, Qt.MouseButton.LeftButton)
    assert document.flow_ref().enabled is False
    wait = panel.settings_editors["max_wait"]
    type_into(qtbot, wait.line, "2h")
    assert document.flow_ref().settings.max_wait == "2h" and wait.note.text() == "= 2h"
    type_into(qtbot, panel.settings_editors["max_delay"].line, "soon")
    assert panel.settings_editors["max_delay"].problem is not None
    assert any(d.code == "bad_duration" and "settings.max_delay" in d.message for d in document.validate_now())
    type_into(qtbot, panel.settings_editors["max_delay"].line, "")
    assert document.flow_ref().settings.max_delay is None
    panel.description_edit.setFocus()
    panel.description_edit.selectAll()
    qtbot.keyClicks(panel.description_edit, "Refunds, asked first")
    panel.name_edit.setFocus()
    QApplication.processEvents()
    assert document.flow_ref().description == "Refunds, asked first"

    window.save()
    saved = load_flow(triage_path)
    assert (saved.enabled, saved.settings.max_wait, saved.description) == (False, "2h", "Refunds, asked first")
    for _ in range(5):
        window.undo()
    assert panel.enabled_check.isChecked() and wait.line.text() == "" and not document.undo_stack.canUndo()
    window.save()
    assert triage_path.read_bytes() == original


def test_declared_inputs_reach_validation_the_run_form_and_completion(qtbot, window: MainWindow) -> None:
    document = window.new_flow()
    trigger = document.add_node("trigger.manual", (0, 0))
    model = document.add_node("ai.model", (300, 0))
    document.connect(trigger, None, model)
    document.set_config_field(model, "prompt", "Refund {{ inputs.amount }}?")
    assert any(d.code == "template_unknown_reference" and "inputs.amount" in d.message
               for d in document.validate_now())
    window.show_flow_properties()
    panel = window.properties.flow_panel
    qtbot.mouseClick(panel.inputs.add_button, Qt.MouseButton.LeftButton)
    type_into(qtbot, card_at(panel, 0).name_edit, "amount")
    assert not [d for d in document.validate_now() if "inputs.amount" in d.message]
    window.problems.set_diagnostics(document.diagnostics())

    dialog = RunInputsDialog(document.flow())
    qtbot.addWidget(dialog)
    assert "input_amount" in [w.objectName() for w in dialog.widgets.values()]

    window.reveal_node(model)
    prompt = window.properties.editors["prompt"]
    assert isinstance(prompt, TemplateEditor)
    prompt.text.setFocus()
    prompt.text.moveCursor(prompt.text.textCursor().MoveOperation.End)
    qtbot.keyClicks(prompt.text, " {{ inp")
    assert not prompt.completion.popup_visible()
    qtbot.keyClicks(prompt.text, "uts.")
    assert prompt.completion.popup_visible()
    assert prompt.completion.completer.currentCompletion() == "inputs.amount"
    qtbot.keyClick(prompt.completion.popup(), Qt.Key.Key_Return)
    assert prompt.text.toPlainText().endswith("{{ inputs.amount")
