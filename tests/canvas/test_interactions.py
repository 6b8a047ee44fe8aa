"""Real widgets, real events: palette drops, wiring by mouse, keys, quick-add, drags, badges, live mode."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QEvent, QMimeData, QPoint, QPointF, Qt
from PySide6.QtGui import QDragEnterEvent, QDragMoveEvent, QDropEvent, QGuiApplication, QWheelEvent
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from canvas.document import FlowDocument
from canvas.editor import FlowEditor
from canvas.geometry import HEADER_HEIGHT, NODE_WIDTH
from canvas.items import NodeItem, WireItem
from canvas.palette import NODE_TYPE_MIME, NodePalette, node_type_mime
from canvas.view import FlowView
from engine.catalog import categories

from .conftest import TRIAGE, drag, item_of, node_of, send_mouse, view_point


def _port_point(view: FlowView, node_id: str, port: str | None) -> QPoint:
    item = view.node_item(node_id)
    assert item is not None
    return view_point(view, item.output_anchor(port))


def _input_point(view: FlowView, node_id: str) -> QPoint:
    item = view.node_item(node_id)
    assert item is not None
    return view_point(view, item.input_anchor())


def _drop(view: FlowView, data: QMimeData, at: QPoint) -> QDropEvent:
    viewport = view.viewport()
    actions = Qt.DropAction.CopyAction
    enter = QDragEnterEvent(at, actions, data, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(viewport, enter)
    assert enter.isAccepted()
    move = QDragMoveEvent(at, actions, data, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(viewport, move)
    drop = QDropEvent(QPointF(at), actions, data, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(viewport, drop)
    return drop


def test_palette_lists_categories_filters_and_drops_a_node_where_it_lands(qtbot: QtBot, editor: FlowEditor) -> None:
    palette = NodePalette()
    qtbot.addWidget(palette)
    assert palette.tree.topLevelItemCount() == len(categories())
    palette.filter.setText("appro")
    assert palette.visible_types() == ["approval"]
    palette.filter.setText("")
    item = palette.item_for("queue")
    assert item is not None
    data = palette.tree.mimeData([item])
    assert bytes(data.data(NODE_TYPE_MIME).data()) == b"queue"
    view = editor.view
    drop_at = QPoint(300, 560)
    drop = _drop(view, data, drop_at)
    assert drop.isAccepted()
    added = editor.document.flow().nodes[-1]
    assert added.type == "queue"
    scene_point = view.mapToScene(drop_at)
    assert abs(added.position[0] + NODE_WIDTH / 2 - scene_point.x()) <= 1
    assert abs(added.position[1] + HEADER_HEIGHT / 2 - scene_point.y()) <= 1
    assert view.selected_node_ids() == [added.id]


def test_palette_double_click_emits_activated(qtbot: QtBot) -> None:
    palette = NodePalette()
    qtbot.addWidget(palette)
    with qtbot.waitSignal(palette.activated) as blocker:
        palette.tree.itemActivated.emit(palette.item_for("router"), 0)
    assert blocker.args == ["router"]


def test_dropping_a_palette_node_on_an_edge_inserts_it(editor: FlowEditor) -> None:
    view = editor.view
    edge_item = next(i for i in view.flow_scene.edge_items.values() if i.edge.to == "followup")
    point = view_point(view, edge_item.path().pointAtPercent(0.45))
    _drop(view, node_type_mime("set"), point)
    new_id = editor.document.flow().nodes[-1].id
    routes = {(e.from_, e.port, e.to) for e in editor.document.flow().edges}
    assert ("route", "default", new_id) in routes and (new_id, None, "followup") in routes
    assert editor.document.undo_stack.count() == 1
    editor.document.undo_stack.undo()
    assert editor.document.text() == TRIAGE.read_text()


def test_wiring_by_mouse_from_port_to_node(editor: FlowEditor) -> None:
    view = editor.view
    document = editor.document
    drag(view.viewport(), _port_point(view, "refund", None), _input_point(view, "note"))
    assert [(e.from_, e.to) for e in document.flow().edges[-1:]] == [("refund", "note")]
    assert view.flow_scene.items_of_type(WireItem) == []
    drag(view.viewport(), _port_point(view, "approve", "rejected"), _input_point(view, "followup"))
    last = document.flow().edges[-1]
    assert (last.from_, last.port, last.to) == ("approve", "rejected", "followup")
    assert document.undo_stack.count() == 2


def test_refused_wires_show_the_reason_while_dragging(editor: FlowEditor) -> None:
    view = editor.view
    viewport = view.viewport()
    hints: list[str] = []
    view.status.connect(hints.append)
    cases = [
        ("classify", "hook", "trigger"),
        ("classify", "classify", "itself"),
        ("note", "reserve", "cycle"),
        ("refund", "done", "already connected"),
    ]
    before = editor.document.text()
    for source, target, reason in cases:
        start = _port_point(view, source, None)
        target_item = view.node_item(target)
        assert target_item is not None
        over = view_point(view, target_item.sceneBoundingRect().center())
        send_mouse(viewport, QEvent.Type.MouseButtonPress, start)
        send_mouse(viewport, QEvent.Type.MouseMove, (start + over) / 2, buttons=Qt.MouseButton.LeftButton)
        send_mouse(viewport, QEvent.Type.MouseMove, over, buttons=Qt.MouseButton.LeftButton)
        wires = view.flow_scene.items_of_type(WireItem)
        assert len(wires) == 1
        wire = wires[0]
        assert isinstance(wire, WireItem) and wire.refusal is not None and reason in wire.refusal
        assert reason in hints[-1]
        send_mouse(viewport, QEvent.Type.MouseButtonRelease, over)
        assert view.flow_scene.items_of_type(WireItem) == []
    assert editor.document.text() == before


def test_dragging_selected_nodes_is_one_undo_step(editor: FlowEditor) -> None:
    view = editor.view
    document = editor.document
    view.flow_scene.select_nodes(["approve", "refund", "declined"])
    grab = view_point(view, item_of(view, "approve").sceneBoundingRect().center() + QPointF(0, -20))
    drag(view.viewport(), grab, grab + QPoint(40, 60))
    moved = {n.id: n.position for n in document.flow().nodes}
    assert moved["approve"] == (920, 100) and moved["refund"] == (1140, 60) and moved["declined"] == (1140, 160)
    assert document.undo_stack.count() == 1
    edge = next(i for i in view.flow_scene.edge_items.values() if i.edge.to == "refund")
    assert edge.ends[1] == item_of(view, "refund").input_anchor()
    arrival = edge.path().elementAt(3)
    assert edge.mapToScene(QPointF(arrival.x, arrival.y)) == item_of(view, "refund").input_anchor()
    document.undo_stack.undo()
    assert item_of(view, "approve").pos() == QPointF(880, 40)
    assert document.text() == TRIAGE.read_text()


def test_dragging_a_loose_node_onto_an_edge_inserts_it(editor: FlowEditor) -> None:
    view = editor.view
    document = editor.document
    node_id = document.add_node("queue", (400, 380))
    item = item_of(view, node_id)
    edge_item = next(i for i in view.flow_scene.edge_items.values() if i.edge.from_ == "classify")
    target = edge_item.path().pointAtPercent(0.5)
    start = view_point(view, item.sceneBoundingRect().center())
    end = start + view_point(view, target) - view_point(view, item.sceneBoundingRect().center())
    send_mouse(view.viewport(), QEvent.Type.MouseButtonPress, start)
    send_mouse(view.viewport(), QEvent.Type.MouseMove, (start + end) / 2, buttons=Qt.MouseButton.LeftButton)
    send_mouse(view.viewport(), QEvent.Type.MouseMove, end, buttons=Qt.MouseButton.LeftButton)
    assert view.flow_scene.insert_hint is edge_item and edge_item.insert_hint
    send_mouse(view.viewport(), QEvent.Type.MouseButtonRelease, end)
    assert view.flow_scene.insert_hint is None
    routes = {(e.from_, e.to) for e in document.flow().edges}
    assert ("classify", node_id) in routes and (node_id, "route") in routes and ("classify", "route") not in routes
    assert document.undo_stack.count() == 2
    document.undo_stack.undo()
    assert {(e.from_, e.to) for e in document.flow().edges} >= {("classify", "route")}


def test_keys_select_all_copy_paste_duplicate_delete(qtbot: QtBot, editor: FlowEditor) -> None:
    view = editor.view
    document = editor.document
    view.setFocus()
    selections: list[list[str]] = []
    view.selection_changed.connect(selections.append)
    QTest.keyClick(view, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)
    assert len(view.selected_node_ids()) == 10
    assert len(selections[-1]) == 10
    view.flow_scene.select_nodes(["followup", "note"])
    QTest.keyClick(view, Qt.Key.Key_C, Qt.KeyboardModifier.ControlModifier)
    assert "followup" in QGuiApplication.clipboard().text()
    paste_at = QPoint(200, 520)
    send_mouse(view.viewport(), QEvent.Type.MouseMove, paste_at, Qt.MouseButton.NoButton)
    QTest.keyClick(view, Qt.Key.Key_V, Qt.KeyboardModifier.ControlModifier)
    assert view.selected_node_ids() == ["followup_2", "note_2"]
    landed = view.mapToScene(paste_at)
    assert node_of(document, "followup_2").position == (landed.x(), landed.y())  # the copies' top-left
    QTest.keyClick(view, Qt.Key.Key_V, Qt.KeyboardModifier.ControlModifier)  # the same spot again: a step aside
    assert node_of(document, "followup_3").position == (landed.x() + 40, landed.y() + 40)
    document.undo_stack.undo()
    view.flow_scene.select_nodes(["followup_2", "note_2"])
    duplicate_at = QPoint(900, 560)
    send_mouse(view.viewport(), QEvent.Type.MouseMove, duplicate_at, Qt.MouseButton.NoButton)
    QTest.keyClick(view, Qt.Key.Key_D, Qt.KeyboardModifier.ControlModifier)
    assert view.selected_node_ids() == ["followup_3", "note_3"]
    landed = view.mapToScene(duplicate_at)
    assert node_of(document, "followup_3").position == (landed.x(), landed.y())
    assert ("followup_3", "note_3") in {(e.from_, e.to) for e in document.flow().edges}
    QTest.keyClick(view, Qt.Key.Key_Delete)
    assert document.node("followup_3") is None and document.node("note_3") is None
    assert document.undo_stack.count() == 3
    view.flow_scene.clearSelection()
    edge_item = next(i for i in view.flow_scene.edge_items.values() if i.edge.from_ == "hook")
    edge_item.setSelected(True)
    QTest.keyClick(view, Qt.Key.Key_Backspace)
    assert all(e.from_ != "hook" for e in document.flow().edges)
    for _ in range(4):
        document.undo_stack.undo()
    assert document.text() == TRIAGE.read_text()


def test_tab_opens_quick_add_and_enter_creates_the_node_there(qtbot: QtBot, editor: FlowEditor) -> None:
    view = editor.view
    view.setFocus()
    QTest.keyClick(view, Qt.Key.Key_Tab)
    box = view.quick_add
    assert box.isVisible()
    QTest.keyClicks(box.search, "hour")
    assert box.visible_types() == []
    box.search.clear()
    QTest.keyClicks(box.search, "delay")
    assert box.visible_types() == ["queue"]
    QTest.keyClick(box.search, Qt.Key.Key_Return)
    assert not box.isVisible()
    added = editor.document.flow().nodes[-1]
    assert added.type == "queue"
    point = view.flow_scene.node_items[added.id].sceneBoundingRect()
    assert point.contains(view._quick_add_point)
    QTest.keyClick(view, Qt.Key.Key_A, Qt.KeyboardModifier.ShiftModifier)
    assert box.isVisible()
    QTest.keyClick(box.search, Qt.Key.Key_Escape)
    assert not box.isVisible()
    assert len(editor.document.flow().nodes) == 11


def test_releasing_a_wire_on_empty_canvas_quick_adds_a_wired_node(editor: FlowEditor) -> None:
    view = editor.view
    document = editor.document
    start = _port_point(view, "refund", None)
    empty = view_point(view, QPointF(1250, 420))
    drag(view.viewport(), start, empty)
    box = view.quick_add
    assert box.isVisible()
    QTest.keyClicks(box.search, "approval")
    QTest.keyClick(box.search, Qt.Key.Key_Enter)
    added = document.flow().nodes[-1]
    assert added.type == "approval"
    assert (document.flow().edges[-1].from_, document.flow().edges[-1].to) == ("refund", added.id)
    assert document.undo_stack.count() == 1
    document.undo_stack.undo()
    assert document.text() == TRIAGE.read_text()


def test_badges_appear_and_clear_as_the_user_fixes_the_flow(qtbot: QtBot, editor: FlowEditor) -> None:
    document = editor.document
    view = editor.view
    item = item_of(view, "followup")
    assert item.badge_severity() is None
    with qtbot.waitSignal(document.diagnostics_changed, timeout=10_000):
        document.set_config_field("followup", "delay", "80h")
    assert item.badge_severity() == "error"
    assert "71h limit" in item.toolTip()
    with qtbot.waitSignal(document.diagnostics_changed, timeout=10_000):
        document.disconnect(next(e for e in document.flow_ref().edges if e.from_ == "note"))
    assert item_of(view, "note").badge_severity() == "warning"
    with qtbot.waitSignal(document.diagnostics_changed, timeout=10_000):
        document.set_config_field("followup", "delay", "48h")
        document.connect("note", None, "done")
    assert item.badge_severity() is None and item_of(view, "note").badge_severity() is None
    assert "71h" not in item.toolTip()


def test_select_node_from_a_diagnostic_selects_and_centres_it(editor: FlowEditor) -> None:
    view = editor.view
    view.centerOn(-3000, -3000)
    view.select_node("done")
    assert view.selected_node_ids() == ["done"]
    centre = view.mapToScene(view.viewport().rect().center())
    assert item_of(view, "done").sceneBoundingRect().adjusted(-30, -30, 30, 30).contains(centre)


def test_wheel_zooms_around_the_cursor_and_f_fits(editor: FlowEditor) -> None:
    view = editor.view
    anchor = _input_point(view, "route")
    before = view.mapToScene(anchor)
    zooms: list[float] = []
    view.zoom_changed.connect(zooms.append)
    wheel = QWheelEvent(
        QPointF(anchor),
        QPointF(view.viewport().mapToGlobal(anchor)),
        QPoint(),
        QPoint(0, 240),
        Qt.MouseButton.NoButton,
        Qt.KeyboardModifier.NoModifier,
        Qt.ScrollPhase.NoScrollPhase,
        False,
    )
    QApplication.sendEvent(view.viewport(), wheel)
    assert view.zoom() > 1.3 and zooms == [view.zoom()]
    after = view.mapToScene(anchor)
    assert abs(after.x() - before.x()) < 2 and abs(after.y() - before.y()) < 2
    view.setFocus()
    QTest.keyClick(view, Qt.Key.Key_F)
    visible = view.mapToScene(view.viewport().rect()).boundingRect()
    assert visible.contains(view.flow_scene.nodes_bounding_rect())
    view.flow_scene.select_nodes(["route"])
    QTest.keyClick(view, Qt.Key.Key_F)
    assert view.zoom() == 1.25


def test_middle_drag_and_space_drag_pan(editor: FlowEditor) -> None:
    view = editor.view
    viewport = view.viewport()
    origin = view.mapToScene(viewport.rect().center())
    drag(viewport, QPoint(600, 300), QPoint(500, 250), button=Qt.MouseButton.MiddleButton)
    moved = view.mapToScene(viewport.rect().center())
    assert round(moved.x() - origin.x()) == 100 and round(moved.y() - origin.y()) == 50
    view.setFocus()
    QTest.keyPress(view, Qt.Key.Key_Space)
    drag(viewport, QPoint(600, 300), QPoint(700, 300))
    QTest.keyRelease(view, Qt.Key.Key_Space)
    assert round(view.mapToScene(viewport.rect().center()).x() - moved.x()) == -100
    assert editor.document.undo_stack.count() == 0
    assert view.selected_node_ids() == []


def test_snap_to_grid_rounds_dragged_positions(editor: FlowEditor) -> None:
    view = editor.view
    view.set_snap_to_grid(True)
    view.flow_scene.select_nodes(["hook"])
    start = view_point(view, item_of(view, "hook").sceneBoundingRect().center())
    drag(view.viewport(), start, start + QPoint(33, 7))
    x, y = node_of(editor.document, "hook").position
    assert x % 20 == 0 and y % 20 == 0 and (x, y) != (0, 120)


def test_rubber_band_selects_nodes_inside(editor: FlowEditor) -> None:
    view = editor.view
    top_left = view_point(view, QPointF(850, -40))
    bottom_right = view_point(view, QPointF(1300, 140))
    drag(view.viewport(), top_left, bottom_right)
    assert set(view.selected_node_ids()) == {"approve", "refund", "declined"}


def test_live_overlay_updates_items_in_place_once_per_frame(qtbot: QtBot, editor: FlowEditor) -> None:
    view = editor.view
    items_before = set(map(id, view.flow_scene.items()))
    flushes = view.live_flushes
    for count in range(1, 30):
        view.set_live_counts({"approve": (0, count, "approval"), "classify": (count, 0, "")})
    view.set_run_path(["hook", "reserve", "classify", "route", "approve"], "approve", "waiting for a decision")
    qtbot.waitUntil(lambda: view.live_flushes > flushes, timeout=1000)
    assert view.live_flushes == flushes + 1
    approve = item_of(view, "approve")
    assert (approve.live.waiting, approve.live.current, approve.live.waiting_text) == (
        29,
        True,
        "waiting for a decision",
    )
    assert item_of(view, "classify").live.running == 29 and item_of(view, "classify").live.on_path
    on_path = {(i.edge.from_, i.edge.to) for i in view.flow_scene.edge_items.values() if i.on_run_path}
    assert on_path == {("hook", "reserve"), ("reserve", "classify"), ("classify", "route"), ("route", "approve")}
    assert set(map(id, view.flow_scene.items())) == items_before
    view.clear_live()
    view.flush_live()
    assert all(i.live.is_empty() for i in view.flow_scene.node_items.values())
    assert not any(i.on_run_path for i in view.flow_scene.edge_items.values())


def test_minimap_click_moves_the_view(editor: FlowEditor) -> None:
    view = editor.view
    minimap = view.minimap
    assert minimap.isVisible()
    target = minimap.scene_point(QPointF(minimap.width() - 20, minimap.height() / 2))
    send_mouse(minimap, QEvent.Type.MouseButtonPress, QPoint(minimap.width() - 20, minimap.height() // 2))
    centre = view.mapToScene(view.viewport().rect().center())
    assert abs(centre.x() - target.x()) < 30


def test_theme_switch_repaints_with_new_colours(qapp: QApplication, editor: FlowEditor) -> None:
    from canvas.theme import DARK, LIGHT, apply_theme, current_theme

    apply_theme(qapp, "dark")
    try:
        assert current_theme() is DARK
        image = editor.view.viewport().grab().toImage()
        assert image.pixelColor(5, 5).lightness() < 80
    finally:
        apply_theme(qapp, "light")
    assert current_theme() is LIGHT
    assert editor.view.viewport().grab().toImage().pixelColor(5, 5).lightness() > 200


def test_everything_interactive_has_a_tooltip(qtbot: QtBot, editor: FlowEditor) -> None:
    palette = NodePalette()
    qtbot.addWidget(palette)
    view = editor.view
    assert palette.filter.toolTip() and palette.tree.toolTip() and view.minimap.toolTip()
    item = item_of(view, "approve")
    assert isinstance(item, NodeItem) and "approval" in item.toolTip().lower()
    assert {p.toolTip() for p in item.port_items} == {
        'Output "approved": drag to a node to connect',
        'Output "rejected": drag to a node to connect',
    }
    assert all(action.toolTip() for action in view.actions_by_name.values())
    assert view.focusPolicy() == Qt.FocusPolicy.StrongFocus


def test_open_save_through_the_editor_round_trip(qapp: QApplication, tmp_path: Path) -> None:
    document = FlowDocument.open(TRIAGE)
    editor = FlowEditor(document)
    editor.view.flow_scene.select_nodes(["note"])
    editor.view.duplicate_selection()
    document.undo_stack.undo()
    target = tmp_path / "again.flow.json"
    document.save(target)
    assert target.read_bytes() == TRIAGE.read_bytes()
    editor.deleteLater()


def test_arrow_keys_nudge_the_selection_and_enter_opens_it(qtbot: QtBot, editor: FlowEditor) -> None:
    view = editor.view
    document = editor.document
    view.setFocus()
    view.flow_scene.select_nodes(["followup", "note"])
    QTest.keyClick(view, Qt.Key.Key_Right)
    QTest.keyClick(view, Qt.Key.Key_Down, Qt.KeyboardModifier.ShiftModifier)
    assert node_of(document, "followup").position == (900, 221)
    assert node_of(document, "note").position == (1120, 221)
    assert item_of(view, "note").pos() == QPointF(1120, 221)
    assert document.undo_stack.count() == 2
    view.flow_scene.select_nodes(["note"])
    with qtbot.waitSignal(view.node_activated) as blocker:
        QTest.keyClick(view, Qt.Key.Key_Return)
    assert blocker.args == ["note"]
    QTest.keyClick(view, Qt.Key.Key_Escape)
    assert view.selected_node_ids() == []


def test_shift_click_adds_to_the_selection_and_ports_show_a_cross_cursor(editor: FlowEditor) -> None:
    view = editor.view
    viewport = view.viewport()
    for node_id, modifiers in (("hook", Qt.KeyboardModifier.NoModifier), ("done", Qt.KeyboardModifier.ShiftModifier)):
        point = view_point(view, item_of(view, node_id).node_rect().center() + item_of(view, node_id).pos())
        send_mouse(viewport, QEvent.Type.MouseButtonPress, point, modifiers=modifiers)
        send_mouse(viewport, QEvent.Type.MouseButtonRelease, point, modifiers=modifiers)
    assert view.selected_node_ids() == ["hook", "done"]
    send_mouse(
        viewport, QEvent.Type.MouseMove, _port_point(view, "approve", "rejected"), buttons=Qt.MouseButton.NoButton
    )
    assert viewport.cursor().shape() == Qt.CursorShape.CrossCursor
    send_mouse(viewport, QEvent.Type.MouseMove, QPoint(5, 5), buttons=Qt.MouseButton.NoButton)
    assert viewport.cursor().shape() != Qt.CursorShape.CrossCursor


def test_system_theme_follows_the_platform_and_bad_names_are_refused(qapp: QApplication) -> None:
    import pytest

    from canvas.theme import DARK, LIGHT, apply_theme, system_prefers_dark

    try:
        chosen = apply_theme(qapp, "system")
        assert chosen is (DARK if system_prefers_dark() else LIGHT)
        with pytest.raises(ValueError, match="use light, dark or system"):
            apply_theme(qapp, "sepia")
    finally:
        apply_theme(qapp, "light")


def test_long_edges_from_many_output_nodes_name_their_port(editor: FlowEditor) -> None:
    scene = editor.view.flow_scene
    rejected = next(i for i in scene.edge_items.values() if i.edge.port == "rejected")
    assert rejected.label is None or not rejected.label.isVisible()
    editor.document.move_nodes({"declined": (1700, 400), "refund": (1700, 0)})
    assert rejected.label is not None and rejected.label.isVisible() and rejected.label.text() == "rejected"
    assert all(i.label is None for i in scene.edge_items.values() if i.edge.from_ == "refund")
    editor.document.undo_stack.undo()
    assert not rejected.label.isVisible()


def test_dragging_from_an_input_moves_its_edge_or_removes_it(editor: FlowEditor) -> None:
    view = editor.view
    document = editor.document
    viewport = view.viewport()
    hints: list[str] = []
    view.status.connect(hints.append)
    target = item_of(view, "done")
    drag(viewport, _input_point(view, "note"), view_point(view, target.pos() + target.node_rect().center()))
    routes = [(e.from_, e.to) for e in document.flow().edges]
    assert ("followup", "done") in routes and ("followup", "note") not in routes
    assert document.undo_stack.count() == 1
    assert item_of(view, "done").input_item is not None
    start = _input_point(view, "declined")
    empty = view_point(view, QPointF(1250, 420))
    send_mouse(viewport, QEvent.Type.MouseButtonPress, start)
    send_mouse(viewport, QEvent.Type.MouseMove, empty, buttons=Qt.MouseButton.LeftButton)
    assert hints[-1] == "release here to remove this edge"
    rejected = next(i for i in view.flow_scene.edge_items.values() if i.edge.to == "declined")
    assert not rejected.isVisible()
    send_mouse(viewport, QEvent.Type.MouseButtonRelease, empty)
    assert all(e.to != "declined" for e in document.flow().edges)
    assert not view.quick_add.isVisible()
    document.undo_stack.undo()
    document.undo_stack.undo()
    assert document.text() == TRIAGE.read_text()
    drag(viewport, _input_point(view, "note"), _input_point(view, "note") + QPoint(3, 3))
    assert document.undo_stack.index() == 0
    assert all(i.isVisible() for i in view.flow_scene.edge_items.values())


def test_selection_changes_are_reported_once_per_gesture(qtbot: QtBot, editor: FlowEditor) -> None:
    view = editor.view
    reports: list[list[str]] = []
    view.selection_changed.connect(reports.append)
    with qtbot.waitSignal(view.selection_changed, timeout=1000):
        drag(view.viewport(), view_point(view, QPointF(850, -40)), view_point(view, QPointF(1300, 140)))
    assert reports == [["approve", "refund", "declined"]]
    view.setFocus()
    QTest.keyClick(view, Qt.Key.Key_Delete)
    qtbot.wait(50)
    assert reports == [["approve", "refund", "declined"], []]


def test_changing_router_branches_rebuilds_ports_and_reanchors_edges(editor: FlowEditor) -> None:
    view = editor.view
    route = item_of(view, "route")
    default_edge = next(i for i in view.flow_scene.edge_items.values() if i.edge.port == "default")
    before = default_edge.ends[0]
    branches = [{"port": "refund", "when": "{{ true }}"}, {"port": "bug", "when": "{{ true }}"}]
    editor.document.set_config_field("route", "branches", branches)
    assert route.ports == ("refund", "bug", "default")
    assert [p.port for p in route.port_items] == ["refund", "bug", "default"]
    assert default_edge.ends[0] == route.output_anchor("default") and default_edge.ends[0].y() > before.y()
    assert route.node_rect().height() > 72
    editor.document.undo_stack.undo()
    assert route.ports == ("refund", "default") and default_edge.ends[0] == before
