"""The properties panel: generated editors, edits through undoable commands, refresh on undo."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from app.field_kinds import config_fields
from app.panels.field_editors import (
    BranchesEditor,
    ChoiceEditor,
    DurationEditor,
    MappingEditor,
    MoneyEditor,
    NodeRefEditor,
    TemplateEditor,
)
from app.panels.properties import PropertiesPanel
from canvas.document import FlowDocument
from engine.catalog import CATALOG
from tests.app.cells import cell


@pytest.fixture
def panel_on(qtbot, triage_path: Path):
    document = FlowDocument.open(triage_path)
    panel = PropertiesPanel()
    qtbot.addWidget(panel)
    panel.set_document(document)

    def show(node_id: str) -> PropertiesPanel:
        panel.show_node(node_id)
        return panel

    return document, show


def test_every_catalog_field_gets_an_editor_kind() -> None:
    kinds = {(t, f.key): f.kind for t in CATALOG for f in config_fields(t)}
    assert kinds[("queue", "delay")] == "duration"
    assert kinds[("ai.model", "prompt")] == "template"
    assert kinds[("ai.model", "overspend")] == "choice"
    assert kinds[("budget.reserve", "for")] == "node_ref"
    assert kinds[("budget.reserve", "amount")] == "money"
    assert kinds[("ai.model", "pool_wait")] == "bool"
    assert kinds[("foreach", "concurrency")] == "int"
    assert kinds[("router", "branches")] == "branches"
    assert kinds[("set", "values")] == "mapping"
    assert kinds[("join", "reduce")] == "mapping"
    assert kinds[("trigger.event", "event_type")] == "choice"


def test_edit_then_undo_restores_field_and_file(panel_on, triage_path: Path) -> None:
    document, show = panel_on
    original = triage_path.read_bytes()
    panel = show("classify")
    prompt = panel.editors["prompt"]
    assert isinstance(prompt, TemplateEditor)
    old_text = prompt.text.toPlainText()
    prompt.text.setPlainText("Label: {{ inputs.ticket.body }} (short)")
    prompt.commit()
    assert document.node("classify").config["prompt"] == "Label: {{ inputs.ticket.body }} (short)"
    assert document.is_dirty()

    document.undo_stack.undo()
    assert prompt.text.toPlainText() == old_text
    document.save()
    assert triage_path.read_bytes() == original

    document.undo_stack.redo()
    assert prompt.text.toPlainText() == "Label: {{ inputs.ticket.body }} (short)"


def test_title_goes_through_rename(panel_on) -> None:
    document, show = panel_on
    panel = show("followup")
    panel.title_edit.setText("Wait one day")
    panel.title_edit.editingFinished.emit()
    assert document.node("followup").title == "Wait one day"
    assert document.undo_stack.count() == 1
    document.undo_stack.undo()
    assert panel.title_edit.text() == "Wait a day"


def test_duration_shows_parsed_value_and_errors(qtbot, panel_on) -> None:
    document, show = panel_on
    panel = show("followup")
    delay = panel.editors["delay"]
    assert isinstance(delay, DurationEditor)
    assert delay.problem is None and delay.note.text().startswith("= ")
    delay.line.clear()
    qtbot.keyClicks(delay.line, "2 fortnights")
    assert delay.problem is not None
    delay.line.setText("90m")
    delay.line.textEdited.emit("90m")
    assert delay.problem is None and "1h" in delay.note.text()
    delay.commit()
    assert document.node("followup").config["delay"] == "90m"


def test_template_syntax_error_is_shown(panel_on) -> None:
    _document, show = panel_on
    panel = show("classify")
    prompt = panel.editors["prompt"]
    prompt.text.setPlainText("Label {{ inputs.ticket.body ")
    assert prompt.problem is not None and "does not parse" in prompt.problem
    prompt.text.setPlainText("Label {{ inputs.ticket.body }}")
    assert prompt.problem is None


def test_enum_is_a_combo_and_commits(panel_on) -> None:
    document, show = panel_on
    panel = show("classify")
    overspend = panel.editors["overspend"]
    assert isinstance(overspend, ChoiceEditor)
    assert [overspend.combo.itemText(i) for i in range(overspend.combo.count())] == ["fail", "approve", "allow"]
    assert overspend.combo.currentText() == "approve"
    overspend.combo.setCurrentIndex(2)
    overspend.combo.activated.emit(2)
    assert document.node("classify").config["overspend"] == "allow"
    document.undo_stack.undo()
    assert overspend.combo.currentText() == "approve"


def test_node_picker_lists_only_model_nodes(panel_on) -> None:
    document, show = panel_on
    document.add_node("ai.model", (600, 400), "Summarise")
    panel = show("reserve")
    picker = panel.editors["for"]
    assert isinstance(picker, NodeRefEditor)
    picked = [picker.combo.itemData(i) for i in range(picker.combo.count())]
    model_ids = [n.id for n in document.flow_ref().nodes if n.type == "ai.model"]
    assert picked == [None, *model_ids] and len(model_ids) == 2
    assert picker.combo.currentData() == "classify"


def test_money_edit_is_one_undo_step(panel_on) -> None:
    document, show = panel_on
    panel = show("reserve")
    amount = panel.editors["amount"]
    assert isinstance(amount, MoneyEditor)
    assert amount.spin.value() == pytest.approx(0.2)
    amount.spin.setValue(0.35)
    assert document.node("reserve").config["amount"] == 0.35
    assert document.undo_stack.count() == 1


def test_tables_add_and_remove_rows(panel_on) -> None:
    document, show = panel_on
    panel = show("route")
    branches = panel.editors["branches"]
    assert isinstance(branches, BranchesEditor)
    assert branches.rows() == [("refund", "{{ state.label == 'refund' }}")]
    branches.add_row()
    assert len(document.node("route").config["branches"]) == 2
    cell(branches.table, 1, 1).setText("{{ state.label == ")
    assert branches.problem is not None
    document.undo_stack.undo()
    document.undo_stack.undo()
    assert branches.rows() == [("refund", "{{ state.label == 'refund' }}")]

    panel = show("note")
    values = panel.editors["values"]
    assert isinstance(values, MappingEditor)
    values.add_row()
    assert set(document.node("note").config["values"]) == {"note", "key1"}
    values.table.selectRow(1)
    values.remove_selected_row()
    assert set(document.node("note").config["values"]) == {"note"}


def test_retry_and_flags_are_node_fields(panel_on) -> None:
    document, show = panel_on
    panel = show("refund")
    panel.retry_check.click()
    assert document.node("refund").retry is not None
    panel.retry_attempts.setValue(5)
    assert document.node("refund").retry.max_attempts == 5
    panel.continue_check.click()
    assert document.node("refund").continue_on_fail is True
    panel.idempotent_combo.setCurrentIndex(2)
    panel.idempotent_combo.activated.emit(2)
    assert document.node("refund").idempotent is False
    for _ in range(4):
        document.undo_stack.undo()
    assert document.node("refund").retry is None
    assert not panel.retry_check.isChecked()
    assert not document.is_dirty()


def test_selection_of_many_shows_the_flow_panel(panel_on) -> None:
    _document, show = panel_on
    panel = show("classify")
    assert not panel.showing_flow()
    panel.show_selection(["classify", "route"])
    assert panel.node_id is None and panel.showing_flow()
    assert panel.flow_panel.name_edit.text() == "Ticket triage"
    panel.show_selection(["route"])
    assert panel.node_id == "route"
    assert cell(panel.editors["branches"].table, 0, 0).flags() & Qt.ItemFlag.ItemIsEditable


def test_retry_longest_wait_is_written_only_when_not_the_default(panel_on) -> None:
    document, show = panel_on
    panel = show("refund")
    panel.retry_check.click()
    assert panel.retry_max_interval.isEnabled()
    panel.retry_max_interval.line.setText("1h")
    panel.retry_max_interval.commit()
    assert document.node("refund").retry.max_interval == "1h"
    assert document.node("refund").retry.model_dump(exclude_unset=True) == {"max_interval": "1h"}
    panel.retry_max_interval.line.setText("5m")
    panel.retry_max_interval.commit()
    assert document.node("refund").retry.model_dump(exclude_unset=True) == {}


def test_approval_v2_fields_edit_the_node_and_validation_says_when_a_quorum_cannot_be_reached(qtbot, panel_on) -> None:
    document, show = panel_on
    panel = show("approve")
    for key in ("required", "forbid_self", "remind_every", "notify_url", "escalate_after", "escalate_to"):
        assert key in panel.editors, key
    kinds = {f.key: f.kind for f in config_fields("approval")}
    assert (kinds["required"], kinds["forbid_self"], kinds["remind_every"], kinds["notify_url"],
            kinds["escalate_to"]) == ("int", "bool", "duration", "template", "approvers")
    approvers = panel.editors["approvers"]
    approvers.line.setText("ada, bob")  # type: ignore[attr-defined]
    approvers.commit()
    required = panel.editors["required"]
    required.spin.setValue(3)  # type: ignore[attr-defined]
    assert document.node("approve").config["required"] == 3
    codes = [d.code for d in document.validate_now()]
    assert "quorum_unreachable" in codes
    required.spin.setValue(2)  # type: ignore[attr-defined]
    assert "quorum_unreachable" not in [d.code for d in document.validate_now()]
    check = panel.editors["forbid_self"].check  # type: ignore[attr-defined]
    qtbot.mouseClick(check, Qt.MouseButton.LeftButton, pos=check.rect().center())
    assert document.node("approve").config["forbid_self"] is True
