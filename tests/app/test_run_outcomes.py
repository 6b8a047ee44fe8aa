"""How a finished run reads, on the real embedded engine: the run details window (inputs with secrets masked,
result, what each step was given and produced, local times instead of epoch seconds), a timed-out approval
labelled so in the details, the timeline and on the canvas path, and a failed step drawn red with its error."""

from __future__ import annotations

import re
from typing import Any

from app.panels.field_editors import TemplateEditor
from app.readable import short_run_id
from app.window import MainWindow
from canvas.document import FlowDocument
from canvas.theme import current_theme
from engine.flow import flow_from_data
from tests.app.cells import cell

RUN_MS = 20_000

TIMES_OUT = {
    "format": "lockgate.flow/1", "id": "times-out", "name": "Times out",
    "inputs": {"name": {"type": "string", "required": True},
               "token": {"type": "string", "required": True, "secret": True}},
    "nodes": [
        {"id": "start", "type": "trigger.manual", "title": "Start", "position": [0, 0], "config": {}},
        {"id": "note", "type": "set", "title": "Note", "position": [220, 0],
         "config": {"values": {"greeting": "Hello {{ inputs.name }}"}}},
        {"id": "ask", "type": "approval", "title": "Ask", "position": [440, 0],
         "config": {"timeout": "1s", "message": "Go on, {{ inputs.name }}?"}},
        {"id": "done", "type": "terminal", "title": "Done", "position": [660, -60],
         "config": {"output": "{{ state.greeting }}"}},
        {"id": "declined", "type": "terminal", "title": "Declined", "position": [660, 60], "config": {}},
    ],
    "edges": [
        {"from": "start", "to": "note"},
        {"from": "note", "to": "ask"},
        {"from": "ask", "to": "done", "port": "approved"},
        {"from": "ask", "to": "declined", "port": "rejected"},
    ],
}

FAILS = {
    "format": "lockgate.flow/1", "id": "fails", "name": "Fails",
    "nodes": [
        {"id": "start", "type": "trigger.manual", "title": "Start", "position": [0, 0], "config": {}},
        {"id": "call", "type": "http.request", "title": "Call", "position": [220, 0],
         "config": {"method": "GET", "url": "http://127.0.0.1:9/nothing-listens-here", "timeout": "5s"}},
        {"id": "done", "type": "terminal", "title": "Done", "position": [440, 0], "config": {}},
    ],
    "edges": [{"from": "start", "to": "call"}, {"from": "call", "to": "done"}],
}


def _run_to_end(qtbot, window: MainWindow, flow: dict[str, Any], inputs: dict[str, Any]) -> str:
    window.add_document(FlowDocument.from_flow(flow_from_data(flow)))
    window.actions_by_id["live"].trigger()
    assert window.engine is not None and window.engine.live_on
    window.publish()
    qtbot.waitUntil(lambda: f"{flow['id']} v1 published" in window.statusBar().currentMessage(), timeout=10_000)
    window.ask_run_inputs = lambda _flow: inputs
    window.run_flow()
    qtbot.waitUntil(lambda: any(r.flow_id == flow["id"] and r.status in ("succeeded", "failed")
                                for r in window.runs.rows.values()), timeout=RUN_MS)
    return next(r.run_id for r in window.runs.rows.values() if r.flow_id == flow["id"])


def test_details_of_a_run_whose_approval_timed_out(qtbot, engine_window: MainWindow) -> None:
    window = engine_window
    run_id = _run_to_end(qtbot, window, TIMES_OUT, {"name": "Ada", "token": "s3cr3t-value"})
    assert window.engine is not None
    window.engine.open_run(run_id)
    qtbot.waitUntil(lambda: window.engine is not None and window.engine.details is not None
                    and window.engine.details.isVisible(), timeout=20_000)
    details = window.engine.details
    assert details is not None
    assert details.isSizeGripEnabled()
    details.resize(1200, 800)
    assert details.size().width() == 1200

    inputs = details.inputs_text.toPlainText()
    assert '"name": "Ada"' in inputs and "s3cr3t-value" not in inputs and '"token": "***"' in inputs
    assert "tokens —" in details.header.text() and "finished" in details.header.text()

    rows = {cell(details.steps, r, 0).text(): r for r in range(details.steps.rowCount())}
    assert cell(details.steps, rows["ask"], 2).text() == "timed out"
    started = cell(details.steps, rows["ask"], 4).text()
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", started)

    details.steps.selectRow(rows["note"])
    assert "Hello Ada" in details.step_output.toPlainText()
    assert details.step_given.toPlainText() not in ("", "Nothing recorded.")
    details.steps.selectRow(rows["ask"])
    produced = details.step_output.toPlainText()
    assert '"decided_by": "timeout"' in produced
    # The decision's moment is a local time, not epoch seconds.
    decided = re.search(r'"decided_at": "([^"]+)"', produced)
    assert decided is not None and re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", decided.group(1))
    assert not re.search(r"\d{10}\.\d+", produced)
    assert "Go on, Ada?" in details.step_given.toPlainText()
    assert "timed out" in details.step_label.text()

    bars = {bar.node: bar for bar in details.timeline.bars}
    assert bars["ask"].timed_out and not bars["note"].timed_out
    assert not details.timeline.grab().isNull()
    assert not details.cancel_button.isEnabled()

    # On the canvas: the run's path labels the approval "timed out".
    window.engine.select_run(run_id)
    editor = window.tabs.current_editor()
    assert editor is not None

    def marked() -> bool:
        editor.view.flush_live()
        item = editor.view.node_item("ask")
        return item is not None and item.live.mark == "timed_out"

    qtbot.waitUntil(marked, timeout=20_000)
    ask = editor.view.node_item("ask")
    assert ask is not None and ask.live.label_below() == "timed out"
    assert "timed out in the selected run" in ask.toolTip()

    # A template field previews its value against the selected run's state.
    row = next(r for r in range(window.runs.row_count()) if window.runs.cell_text(r, 8) == run_id)
    window.runs.select_row(row)
    qtbot.waitUntil(lambda: window.properties.preview_run is not None and window.properties.preview_run.id == run_id,
                    timeout=20_000)
    window.reveal_node("done")
    output = window.properties.editors["output"]
    assert isinstance(output, TemplateEditor)
    assert output.preview.text() == f"= 'Hello Ada' with run {short_run_id(run_id)}"


def test_a_failed_step_is_red_on_the_path_with_its_error_on_hover(qtbot, engine_window: MainWindow) -> None:
    window = engine_window
    run_id = _run_to_end(qtbot, window, FAILS, {})
    assert window.runs.rows[run_id].status == "failed"
    assert window.engine is not None
    window.engine.select_run(run_id)
    editor = window.tabs.current_editor()
    assert editor is not None

    def marked() -> bool:
        editor.view.flush_live()
        item = editor.view.node_item("call")
        return item is not None and item.live.mark == "failed"

    qtbot.waitUntil(marked, timeout=20_000)
    call = editor.view.node_item("call")
    start = editor.view.node_item("start")
    assert call is not None and start is not None
    assert call.live.mark_text and call.live.label_below().startswith("failed: ")
    assert "failed in the selected run" in call.toolTip() and call.live.mark_text in call.toolTip()
    assert start.live.mark == "" and start.live.on_path
    # Drawn red: the ring around the node is the theme's error colour.
    editor.view.centerOn(call)
    image = editor.view.viewport().grab().toImage()
    error = current_theme().error
    centre = editor.view.mapFromScene(call.sceneBoundingRect().center())
    near = [image.pixelColor(x, y) for x in range(max(0, centre.x() - 160), min(image.width(), centre.x() + 160))
            for y in range(max(0, centre.y() - 60), min(image.height(), centre.y() + 60))]
    assert any(abs(c.red() - error.red()) < 12 and abs(c.green() - error.green()) < 12
               and abs(c.blue() - error.blue()) < 12 for c in near)

    window.engine.open_run(run_id)
    qtbot.waitUntil(lambda: window.engine is not None and window.engine.details is not None
                    and window.engine.details.isVisible(), timeout=20_000)
    details = window.engine.details
    assert details is not None
    # The failed step is the one shown first, with its error.
    assert "call" in details.step_label.text() and "failed" in details.step_label.text()
    assert "No result." in details.result_text.toPlainText()
    assert "call:" in details.errors_text.toPlainText()
