"""`wait.callback` in the app: found in the palette and dropped on the canvas, its properties (timeout, output
key, how to send its URL) edited with real keys, badges for a bad timeout and for callback_url() naming no such
node, and live mode saying "waiting for callback"."""

from __future__ import annotations

from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtGui import QDragEnterEvent, QDragMoveEvent, QDropEvent
from PySide6.QtWidgets import QApplication, QLabel
from pytestqt.qtbot import QtBot

from app.live import LiveState, waiting_text
from app.panels.field_editors import DurationEditor, TextEditor
from app.panels.properties import PropertiesPanel
from app.waiting import waiting_of
from canvas.document import FlowDocument
from canvas.editor import FlowEditor
from canvas.palette import NodePalette
from canvas.summary import config_summary
from engine.runtime.live_change import LiveChange
from tests.canvas.conftest import item_of

NOW = 1_800_000_000.0


def _drop_from_palette(qtbot: QtBot, editor: FlowEditor, type_name: str) -> str:
    palette = NodePalette()
    qtbot.addWidget(palette)
    palette.filter.setText("callb")
    assert palette.visible_types() == [type_name]
    item = palette.item_for(type_name)
    assert item is not None
    data = palette.tree.mimeData([item])
    viewport, at, actions = editor.view.viewport(), QPoint(300, 560), Qt.DropAction.CopyAction
    buttons, keys = Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier
    QApplication.sendEvent(viewport, QDragEnterEvent(at, actions, data, buttons, keys))
    QApplication.sendEvent(viewport, QDragMoveEvent(at, actions, data, buttons, keys))
    drop = QDropEvent(QPointF(at), actions, data, buttons, keys)
    QApplication.sendEvent(viewport, drop)
    assert drop.isAccepted()
    added = editor.document.flow().nodes[-1]
    assert added.type == type_name
    return added.id


def _panel(qtbot: QtBot, document: FlowDocument, node_id: str) -> PropertiesPanel:
    panel = PropertiesPanel()
    qtbot.addWidget(panel)
    panel.resize(420, 700)
    panel.set_document(document)
    panel.show_node(node_id)
    panel.show()
    return panel


def _type_into(qtbot: QtBot, editor: TextEditor, text: str) -> None:
    editor.line.setFocus()
    editor.line.selectAll()
    qtbot.keyClicks(editor.line, text)
    qtbot.keyClick(editor.line, Qt.Key.Key_Return)


def test_dropped_from_the_palette_edited_in_properties_with_badges(qtbot: QtBot, editor: FlowEditor) -> None:
    node_id = _drop_from_palette(qtbot, editor, "wait.callback")
    document = editor.document
    assert document.node(node_id).config == {"timeout": "24h", "output_key": "callback"}  # type: ignore[union-attr]
    item = item_of(editor.view, node_id)
    assert item.badge_severity() != "error"
    assert config_summary(document.node(node_id)) == "24h · into callback"  # type: ignore[arg-type]

    panel = _panel(qtbot, document, node_id)
    assert set(panel.editors) == {"timeout", "output_key"}
    timeout = panel.editors["timeout"]
    assert isinstance(timeout, DurationEditor)
    hint = panel.findChild(QLabel, "nodeHint")
    assert hint is not None and f'callback_url("{node_id}")' in hint.text()

    with qtbot.waitSignal(document.diagnostics_changed, timeout=10_000):
        _type_into(qtbot, timeout, "80h")
    assert document.node(node_id).config["timeout"] == "80h"  # type: ignore[union-attr]
    assert item.badge_severity() == "error" and "71h limit" in item.toolTip()
    with qtbot.waitSignal(document.diagnostics_changed, timeout=10_000):
        _type_into(qtbot, timeout, "2h")
    assert item.badge_severity() != "error" and "71h" not in item.toolTip()
    output_key = panel.editors["output_key"]
    assert isinstance(output_key, TextEditor)
    _type_into(qtbot, output_key, "reply")
    assert document.node(node_id).config == {"timeout": "2h", "output_key": "reply"}  # type: ignore[union-attr]


def test_callback_url_naming_no_such_node_badges_the_node_using_it(qtbot: QtBot, editor: FlowEditor) -> None:
    document = editor.document
    wait_id = _drop_from_palette(qtbot, editor, "wait.callback")
    user = next(n for n in document.flow_ref().nodes if n.type == "ai.model")
    with qtbot.waitSignal(document.diagnostics_changed, timeout=10_000):
        document.set_config_field(user.id, "prompt", "Reply to {{ callback_url('nowhere') }}")
    item = item_of(editor.view, user.id)
    assert item.badge_severity() == "error" and 'callback_url("nowhere")' in item.toolTip()
    with qtbot.waitSignal(document.diagnostics_changed, timeout=10_000):
        document.set_config_field(user.id, "prompt", f"Reply to {{{{ callback_url('{wait_id}') }}}}")
    assert "callback_url" not in item.toolTip()


def test_live_mode_says_waiting_for_callback(qtbot: QtBot, editor: FlowEditor) -> None:
    waiting = {"node": "approve", "reason": "callback", "due_at": NOW + 3600}
    assert waiting_text(waiting_of(waiting), NOW) == "waiting for callback · 1h left"
    live = LiveState()
    live.apply_change(LiveChange("r1", "ticket-triage", 1, "waiting", 3, "run_parked", waiting_on=waiting))
    counts = live.node_counts("ticket-triage", NOW)
    assert counts["approve"] == (0, 1, "waiting for callback · 1h left")
    view = editor.view
    flushes = view.live_flushes
    view.set_live_counts(counts)
    qtbot.waitUntil(lambda: view.live_flushes > flushes, timeout=10_000)
    assert item_of(view, "approve").live.waiting_text == "waiting for callback · 1h left"
