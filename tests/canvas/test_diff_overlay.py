"""The version comparison on the canvas: halos for added/changed/moved nodes, red ghosts for removed ones,
wires coloured, all kept current as the draft is edited and undone; the Changes panel steps through them."""

from __future__ import annotations

from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from app.panels.changes import ChangesPanel
from canvas.diff_overlay import DIFF_COLORS, DiffOverlay
from canvas.editor import FlowEditor
from engine.flow import load_flow
from tests.canvas.conftest import TRIAGE


def test_overlay_marks_each_kind_of_change_and_follows_edits(qtbot: QtBot, editor: FlowEditor) -> None:
    document = editor.document
    before = load_flow(TRIAGE)
    overlay = DiffOverlay(editor.view.flow_scene, before, "v1")
    assert overlay.diff.empty and overlay.ghost_ids() == [] and overlay.edge_items() == []

    ids = [node.id for node in document.flow_ref().nodes]
    renamed, moved, deleted = ids[1], ids[2], ids[-1]
    document.rename_node(renamed, "Renamed in the draft")
    document.move_nodes({moved: (document.node(moved).position[0] + 40, 500.0)})  # type: ignore[union-attr]
    document.delete_nodes([deleted])
    added = document.add_node("set", (900, 600))

    assert overlay.halo_status(renamed) == "changed"
    assert overlay.halo_status(moved) == "moved"
    assert overlay.halo_status(added) == "added"
    assert overlay.halo_status(ids[0]) is None
    assert overlay.ghost_ids() == [deleted]
    removed_wires = [item for item in overlay.edge_items() if item.pen().color() == DIFF_COLORS.removed]
    assert removed_wires and all(item.pen().style() == Qt.PenStyle.DashLine for item in removed_wires)

    document.undo_stack.undo()  # the added node goes: its halo with it
    assert overlay.halo_status(added) is None and overlay.diff.node(added) is None
    for _ in range(3):
        document.undo_stack.undo()
    assert overlay.diff.empty and overlay.ghost_ids() == []

    overlay.clear()
    document.rename_node(renamed, "After clearing")
    assert overlay.diff.empty and overlay.halo_status(renamed) is None


def test_changes_panel_lists_fields_and_steps_with_the_keyboard(qtbot: QtBot, editor: FlowEditor) -> None:
    document = editor.document
    before = load_flow(TRIAGE)
    ids = [node.id for node in document.flow_ref().nodes]
    first, second = ids[1], ids[3]
    document.rename_node(first, "First change")
    document.set_config_field(second, "note", "hello")
    overlay = DiffOverlay(editor.view.flow_scene, before, "v4")
    panel = ChangesPanel()
    qtbot.addWidget(panel)
    panel.show()
    chosen: list[str] = []
    panel.node_chosen.connect(chosen.append)
    panel.show_diff(overlay.label, overlay.diff, overlay.navigable())
    assert panel.summary.text() == "Draft compared with v4: 2 changed"
    assert panel.list.count() == 2

    panel.list.setFocus()
    qtbot.keyClick(panel.list, Qt.Key.Key_Down)
    qtbot.keyClick(panel.list, Qt.Key.Key_Down)
    assert chosen[-1] in (first, second) and len(set(chosen)) == 2
    text = panel.detail.toPlainText()
    if chosen[-1] == second:
        assert "config.note  (added)" in text and 'now: "hello"' in text
    else:
        assert "title" in text and 'now: "First change"' in text
    panel.step(1)  # wraps round to the first row
    assert panel.list.currentRow() == 0
    panel.show_diff(None, overlay.diff, [])
    assert not panel.next_button.isEnabled() and panel.list.count() == 0
