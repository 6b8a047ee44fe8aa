"""A template field's live preview, typed into with real keys: its value in the engine's sandbox against the
inputs' defaults (no run selected), a syntax error inline instead of a value, and a value that cannot be
worked out yet (state nobody wrote) said as such. Against a selected run: tests/app/test_run_outcomes.py."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QMessageBox

from app.gui import create_application, create_main_window
from app.panels.field_editors import TemplateEditor
from app.panels.template_preview import context_for, preview_text
from app.settings import AppSettings
from canvas.document import FlowDocument
from engine.flow import flow_from_data
from engine.read_models import Run

FLOW = {
    "format": "lockgate.flow/1", "id": "greets", "name": "Greets",
    "inputs": {"name": {"type": "string", "default": "Ada"}, "count": {"type": "integer", "default": 3}},
    "nodes": [
        {"id": "start", "type": "trigger.manual", "title": "Start", "position": [0, 0], "config": {}},
        {"id": "note", "type": "set", "title": "Note", "position": [220, 0],
         "config": {"values": {"greeting": "Hello {{ inputs.name }}"}}},
        {"id": "done", "type": "terminal", "title": "Done", "position": [440, 0],
         "config": {"output": "{{ inputs.name | upper }}"}},
    ],
    "edges": [{"from": "start", "to": "note"}, {"from": "note", "to": "done"}],
}


def test_preview_follows_typing_with_the_input_defaults(qtbot, app_settings: AppSettings,
                                                        no_engine_env: None) -> None:
    app_settings.first_start_done = True
    window = create_main_window(create_application(), app_settings, start_engine=False)
    qtbot.addWidget(window)
    window.ask_to_save = lambda _document: QMessageBox.StandardButton.Discard
    window.show()
    window.add_document(FlowDocument.from_flow(flow_from_data(FLOW)))
    window.reveal_node("done")
    editor = window.properties.editors["output"]
    assert isinstance(editor, TemplateEditor)
    assert editor.preview.isVisible()
    assert editor.preview.text() == "= 'ADA' with input defaults"

    editor.text.setFocus()
    editor.text.selectAll()
    qtbot.keyClick(editor.text, Qt.Key.Key_Delete)
    qtbot.keyClicks(editor.text, "{{ inputs.count * 2 +")
    assert editor.note.isVisible() and editor.note.property("problem")  # the syntax error, inline
    assert not editor.preview.isVisible()
    qtbot.keyClicks(editor.text, " 1 }}")
    assert editor.preview.text() == "= 7 with input defaults"
    assert not editor.preview.property("problem")

    editor.text.selectAll()
    qtbot.keyClick(editor.text, Qt.Key.Key_Delete)
    qtbot.keyClicks(editor.text, "{{ state.greeting }}")
    assert editor.preview.isVisible() and editor.preview.property("problem")
    assert editor.preview.text().startswith("cannot be worked out with input defaults:")
    assert "greeting" in editor.preview.text()


def test_the_preview_runs_in_the_engines_sandbox() -> None:
    flow = flow_from_data(FLOW)
    context = context_for(flow, None)
    text, problem = preview_text("{{ ''.__class__.__mro__ }}", context)
    assert problem and "cannot be worked out" in text  # the sandbox refuses, as it would in a run
    run = Run(id="9876543201234567", flow_id="greets", version=1, status="succeeded", inputs={"name": "Bo"},
              state={"greeting": "Hi Bo"}, errors={})
    assert preview_text("{{ state.greeting }} / {{ inputs.name }}", context_for(flow, run)) == (
        "= 'Hi Bo / Bo' with run 01234567", False)
    other = run.model_copy(update={"flow_id": "another-flow"})
    assert context_for(flow, other).source == "input defaults"  # a run of another flow is not this one's


def test_an_input_without_a_default_is_no_error_and_a_missing_name_is_said_plainly() -> None:
    flow = flow_from_data({**FLOW, "inputs": {**FLOW["inputs"], "ticket": {"type": "object", "required": True}}})
    defaults = context_for(flow, None)
    for source in ("Refund {{ inputs.ticket.body }}?", "Refund {{ inputs.ticket }}?"):
        assert preview_text(source, defaults) == (
            "no preview: inputs.ticket has no default; select a run of this flow to see it with that run's values",
            False)  # a neutral note, not red: nothing is wrong with the template
    assert preview_text("{{ inputs.tickt.body }}", defaults) == (
        'cannot be worked out with input defaults: nothing named "tickt" there', True)
    run = Run(id="9876543201234567", flow_id="greets", version=1, status="succeeded", inputs={"ticket": None}, state={})
    assert preview_text("{{ inputs.ticket }}", context_for(flow, run)) == ("= null with run 01234567", False)


def test_a_webhook_dedupe_key_is_no_error_before_a_delivery() -> None:
    context = context_for(flow_from_data(FLOW), None)
    text, problem = preview_text("{{ request.headers['X-Delivery-Id'] }}", context)
    assert not problem and text.startswith("worked out for each webhook delivery from request.headers")
    # A name nothing provides is still an error.
    assert preview_text("{{ requst.headers['X-Delivery-Id'] }}", context)[1]
