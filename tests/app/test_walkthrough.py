"""The issue's walk-through from an empty window, with real mouse and keyboard events only: New flow, name it,
declare a required input, drag five nodes from the palette, wire them, set a 2 s delay and an approval,
publish, run with the input, approve in the panel, see `succeeded`; then a second New flow publishes as its
own v1. The engine runs in this process on a manual clock, so the delay passes when the test moves time."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from PySide6.QtCore import QEvent, QMimeData, QPoint, QPointF, Qt
from PySide6.QtGui import QDragEnterEvent, QDragMoveEvent, QDropEvent
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QDialog, QDialogButtonBox, QLineEdit

from app.panels.field_editors import DurationEditor, TemplateEditor
from app.readable import counted
from app.run_dialog import RunInputsDialog
from app.window import MainWindow
from canvas.view import FlowView
from engine.clock import ManualClock
from engine.flow import Flow
from tests.canvas.conftest import drag, send_mouse

WAIT_MS = 30_000
FIVE_NODES = ("trigger.manual", "set", "queue", "approval", "terminal")


def _type_line(qtbot, line: QLineEdit, text: str) -> None:
    qtbot.mouseClick(line, Qt.MouseButton.LeftButton)
    line.selectAll()
    qtbot.keyClick(line, Qt.Key.Key_Backspace)
    qtbot.keyClicks(line, text)
    qtbot.keyClick(line, Qt.Key.Key_Return)


def _drop_from_palette(window: MainWindow, view: FlowView, type_name: str, at: QPoint) -> None:
    """What releasing a palette drag over the canvas delivers: enter, move and drop with the palette's data."""
    item = window.palette_widget.item_for(type_name)
    assert item is not None, type_name
    data: QMimeData = window.palette_widget.tree.mimeData([item])
    viewport = view.viewport()
    copy, left, none = Qt.DropAction.CopyAction, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier
    enter = QDragEnterEvent(at, copy, data, left, none)
    QApplication.sendEvent(viewport, enter)
    assert enter.isAccepted()
    QApplication.sendEvent(viewport, QDragMoveEvent(at, copy, data, left, none))
    QApplication.sendEvent(viewport, QDropEvent(QPointF(at), copy, data, left, none))


def _node_at_drop(window: MainWindow, view: FlowView, type_name: str, at: QPoint) -> str:
    before = {n.id for n in view.document.flow_ref().nodes}
    _drop_from_palette(window, view, type_name, at)
    added = [n for n in view.document.flow_ref().nodes if n.id not in before]
    assert [n.type for n in added] == [type_name]
    return added[0].id


def _wire(view: FlowView, source: str, port: str | None, target: str) -> None:
    source_item, target_item = view.node_item(source), view.node_item(target)
    assert source_item is not None and target_item is not None
    drag(view.viewport(), view.mapFromScene(source_item.output_anchor(port)),
         view.mapFromScene(target_item.input_anchor()))


def _click_node(qtbot, window: MainWindow, view: FlowView, node_id: str) -> None:
    item = view.node_item(node_id)
    assert item is not None
    body = view.mapFromScene(item.mapToScene(item.node_rect().center()))
    send_mouse(view.viewport(), QEvent.Type.MouseButtonPress, body)
    send_mouse(view.viewport(), QEvent.Type.MouseButtonRelease, body)
    qtbot.waitUntil(lambda: window.properties.node_id == node_id)


def _publish(qtbot, window: MainWindow, flow_id: str, warnings: int = 0) -> None:
    """Ctrl+Shift+P; the status bar says "<flow_id> v1 published" (with how many warnings it has) and the Log
    keeps the line.

    The message is caught as it is shown, not polled: a toolbar button under the resting pointer puts its status
    tip in the status bar whenever the pointer enters it again, e.g. when the template completion list's close
    reaches the window while publish is being answered."""
    said = f"{flow_id} v1 published" + (f" with {counted(warnings, 'warning')} (see Problems)" if warnings else "")
    with qtbot.waitSignal(window.statusBar().messageChanged, timeout=WAIT_MS,
                          check_params_cb=lambda text: text == said):
        qtbot.keyClick(window, Qt.Key.Key_P,
                       Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
    assert any(line.endswith(said) for line in window.log.lines())


def _fill_run_dialog(qtbot, ticket: str) -> Callable[[Flow], dict[str, Any] | None]:
    """The Run form, shown and filled with keys and a click on Start run (the app runs it modally)."""

    def ask(flow: Flow) -> dict[str, Any] | None:
        dialog = RunInputsDialog(flow)
        qtbot.addWidget(dialog)
        dialog.show()
        line = dialog.widgets["ticket"]
        assert isinstance(line, QLineEdit)
        qtbot.mouseClick(line, Qt.MouseButton.LeftButton)
        qtbot.keyClicks(line, ticket)
        buttons = dialog.findChild(QDialogButtonBox)
        assert buttons is not None
        qtbot.mouseClick(buttons.button(QDialogButtonBox.StandardButton.Ok), Qt.MouseButton.LeftButton)
        assert dialog.result() == QDialog.DialogCode.Accepted
        return dialog.values()

    return ask


def test_walk_through_from_an_empty_window_to_a_succeeded_run(
        qtbot, open_engine_window: Callable[..., MainWindow]) -> None:
    clock = ManualClock(start=time.time())
    window = open_engine_window(clock=clock)
    qtbot.waitExposed(window)
    window.settings.your_name = "Ada"
    window.approvals.set_decider("Ada")
    assert window.tabs.count() == 0

    # New flow, name it.
    qtbot.keyClick(window, Qt.Key.Key_N, Qt.KeyboardModifier.ControlModifier)
    document = window.document
    editor = window.tabs.current_editor()
    assert document is not None and editor is not None
    panel = window.properties.flow_panel
    assert window.properties.showing_flow()
    _type_line(qtbot, panel.name_edit, "Refund desk")
    assert (document.flow_ref().name, document.flow_ref().id) == ("Refund desk", "refund-desk")

    # A required input.
    qtbot.mouseClick(panel.inputs.add_button, Qt.MouseButton.LeftButton)
    card = panel.inputs.cards[0]
    qtbot.keyClicks(card.name_edit, "ticket")
    qtbot.keyClick(card.name_edit, Qt.Key.Key_Return)
    qtbot.mouseClick(panel.inputs.cards[0].required_check, Qt.MouseButton.LeftButton)
    assert document.flow_ref().inputs["ticket"].required

    # Five nodes from the palette, in a row across the canvas (zoomed out with the corner buttons to fit).
    view = editor.view
    width = view.viewport().width()
    step = (width - 200) // 4
    while view.zoom() * 240 > step:
        qtbot.mouseClick(view.zoom_bar.zoom_out, Qt.MouseButton.LeftButton)
    row_y = view.viewport().height() // 3
    ids = [_node_at_drop(window, view, type_name, QPoint(100 + index * step, row_y))
           for index, type_name in enumerate(FIVE_NODES)]
    trigger, values, wait, approval, end = ids

    # Wire them.
    for source, port, target in ((trigger, None, values), (values, None, wait), (wait, None, approval),
                                 (approval, "approved", end)):
        _wire(view, source, port, target)
    assert [(e.from_, e.port, e.to) for e in document.flow_ref().edges] == [
        (trigger, None, values), (values, None, wait), (wait, None, approval), (approval, "approved", end)]

    # A 2 s delay and the approval's question, in the properties panel.
    _click_node(qtbot, window, view, wait)
    delay = window.properties.editors["delay"]
    assert isinstance(delay, DurationEditor)
    _type_line(qtbot, delay.line, "2s")
    assert document.node(wait) is not None and document.node(wait).config["delay"] == "2s"
    _click_node(qtbot, window, view, approval)
    message = window.properties.editors["message"]
    assert isinstance(message, TemplateEditor)
    qtbot.mouseClick(message.text.viewport(), Qt.MouseButton.LeftButton)
    qtbot.keyClicks(message.text, "Refund ticket {{ inputs.ticket }}?")
    qtbot.keyClick(message.text, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    assert document.node(approval) is not None
    assert document.node(approval).config["message"] == "Refund ticket {{ inputs.ticket }}?"

    # Publish, then run with the input.
    view.setFocus()
    _publish(qtbot, window, "refund-desk", warnings=1)  # the approval's "rejected" way is left unwired: it ends there
    window.ask_run_inputs = _fill_run_dialog(qtbot, "T-42")
    qtbot.keyClick(window, Qt.Key.Key_F5)
    qtbot.waitUntil(lambda: bool(window.runs.rows), timeout=WAIT_MS)
    run_id = next(iter(window.runs.rows))

    # The run waits out the delay on the engine's clock: parked at the queue until time moves.
    def run_row() -> Any:
        return window.runs.rows[run_id]

    qtbot.waitUntil(lambda: run_row().current_node == wait and run_row().status == "waiting", timeout=WAIT_MS)
    parked = run_row()
    assert parked.waiting_reason == "delay" and parked.waiting_until is not None
    assert parked.waiting_until.timestamp() == pytest.approx(clock.now() + 2.0, abs=0.01)  # due on the engine's clock
    assert window.approvals.approvals == []
    clock.advance(2.5)

    # Approve in the panel with the mouse.
    qtbot.waitUntil(lambda: len(window.approvals.approvals) == 1, timeout=WAIT_MS)
    assert window.approvals.approvals[0].message == "Refund ticket T-42?"
    table = window.approvals.table
    first_cell = table.item(0, 0)
    assert first_cell is not None
    QTest.mouseClick(table.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier,
                     table.visualItemRect(first_cell).center())
    qtbot.waitUntil(window.approvals.approve_button.isEnabled)
    qtbot.mouseClick(window.approvals.approve_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: run_row().status in ("succeeded", "failed"), timeout=WAIT_MS)
    assert run_row().status == "succeeded"
    assert window.runs.row_count() == 1 and window.runs.cell_text(0, 0).endswith("succeeded")  # what the panel shows

    # A second New flow publishes as its own v1 (no question about the first flow's history).
    window.activateWindow()  # back from the Run form's window
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window)
    qtbot.keyClick(window, Qt.Key.Key_N, Qt.KeyboardModifier.ControlModifier)
    second = window.document
    second_editor = window.tabs.current_editor()
    assert second is not None and second is not document and second_editor is not None
    second_view = second_editor.view
    while second_view.zoom() * 240 > step:  # a new tab starts at 100%: apart, as in the first flow
        qtbot.mouseClick(second_view.zoom_bar.zoom_out, Qt.MouseButton.LeftButton)
    start = _node_at_drop(window, second_view, "trigger.manual", QPoint(120, row_y))
    finish = _node_at_drop(window, second_view, "terminal", QPoint(120 + step, row_y))
    _wire(second_view, start, None, finish)
    assert [(e.from_, e.to) for e in second.flow_ref().edges] == [(start, finish)]
    second_id = second.flow_ref().id
    assert second_id != "refund-desk"
    _publish(qtbot, window, second_id)
    versions: dict[str, list[int]] = {}
    assert window.bridge is not None
    for flow_id in ("refund-desk", second_id):
        window.bridge.list_versions(flow_id, lambda found, _error, f=flow_id: versions.__setitem__(
            f, [v.version for v in found or []]))
    qtbot.waitUntil(lambda: len(versions) == 2, timeout=WAIT_MS)
    assert versions == {"refund-desk": [1], second_id: [1]}
