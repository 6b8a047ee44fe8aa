"""Editor conventions on real widgets with real mouse and key events: the canvas's right-click menus, in-place
rename, paste and duplicate at the cursor, palette adds where nothing overlaps, the corner zoom bar and minimap
toggle, Fit around the minimap, wire quick-add without triggers, and the palette's catalog tooltips."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QPoint, QPointF, QRectF, Qt
from PySide6.QtGui import QContextMenuEvent, QWheelEvent
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QMenu
from pytestqt.qtbot import QtBot

from canvas.editor import FlowEditor
from canvas.palette import NodePalette
from canvas.view import FlowView
from engine.catalog import CATALOG

from .conftest import TRIAGE, drag, item_of, node_of, send_mouse, view_point


def _right_click(qtbot: QtBot, view: FlowView, at: QPoint) -> QMenu:
    """Right-click the canvas at `at` (viewport pixels); the menu that opens."""
    send_mouse(view.viewport(), QEvent.Type.MouseMove, at, Qt.MouseButton.NoButton)
    QTest.mousePress(view.viewport(), Qt.MouseButton.RightButton, Qt.KeyboardModifier.NoModifier, at)
    QTest.mouseRelease(view.viewport(), Qt.MouseButton.RightButton, Qt.KeyboardModifier.NoModifier, at)
    if view.context_menu is None or not view.context_menu.isVisible():
        # Platforms that open context menus on release only, or not from synthetic presses: the event itself.
        event = QContextMenuEvent(QContextMenuEvent.Reason.Mouse, at, view.viewport().mapToGlobal(at))
        QApplication.sendEvent(view.viewport(), event)
    menu = view.context_menu
    assert menu is not None
    qtbot.waitUntil(menu.isVisible)
    return menu


def _entries(menu: QMenu) -> list[str]:
    return [a.text().split("\t")[0] for a in menu.actions() if not a.isSeparator()]


def _click_entry(qtbot: QtBot, menu: QMenu, text: str) -> None:
    action = next(a for a in menu.actions() if a.text().split("\t")[0] == text)
    assert action.isEnabled(), f"{text} is disabled"
    at = menu.actionGeometry(action).center()
    QTest.mouseMove(menu, at)
    QTest.mouseClick(menu, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, at)
    qtbot.waitUntil(lambda: not menu.isVisible())


def _empty_spot(view: FlowView) -> QPoint:
    point = view_point(view, QPointF(300, 520))
    assert view.flow_scene.node_at(view.mapToScene(point)) is None
    return point


def test_right_click_on_empty_canvas_offers_paste_here_add_fit_and_layout(qtbot: QtBot, editor: FlowEditor) -> None:
    view = editor.view
    document = editor.document
    view.setFocus()
    view.flow_scene.select_nodes(["followup", "note"])
    QTest.keyClick(view, Qt.Key.Key_C, Qt.KeyboardModifier.ControlModifier)
    spot = _empty_spot(view)
    menu = _right_click(qtbot, view, spot)
    assert _entries(menu) == ["Paste here", "Add node…", "Fit", "Auto-layout"]
    assert menu.actions()[0].text().endswith("\tCtrl+V")
    _click_entry(qtbot, menu, "Paste here")
    landed = view.mapToScene(spot)
    assert view.selected_node_ids() == ["followup_2", "note_2"]
    assert node_of(document, "followup_2").position == (landed.x(), landed.y())

    menu = _right_click(qtbot, view, _empty_spot(view))
    _click_entry(qtbot, menu, "Add node…")
    assert view.quick_add.isVisible() and "trigger.manual" in view.quick_add.visible_types()
    QTest.keyClick(view.quick_add.search, Qt.Key.Key_Escape)

    menu = _right_click(qtbot, view, _empty_spot(view))
    _click_entry(qtbot, menu, "Auto-layout")
    assert document.undo_stack.text(document.undo_stack.index() - 1) == "Auto-layout"
    menu = _right_click(qtbot, view, _empty_spot(view))
    _click_entry(qtbot, menu, "Fit")
    visible = view.mapToScene(view.viewport().rect()).boundingRect()
    assert visible.contains(view.flow_scene.nodes_bounding_rect())
    while document.undo_stack.canUndo():
        document.undo_stack.undo()
    assert document.text() == TRIAGE.read_text()


def test_a_nodes_menu_cuts_duplicates_there_and_renames(qtbot: QtBot, editor: FlowEditor) -> None:
    view = editor.view
    document = editor.document
    on_note = view_point(view, item_of(view, "note").sceneBoundingRect().center())
    menu = _right_click(qtbot, view, on_note)
    assert _entries(menu) == ["Cut", "Copy", "Duplicate here", "Rename…", "Delete", "Fit selection"]
    assert view.selected_node_ids() == ["note"]
    _click_entry(qtbot, menu, "Cut")
    assert document.node("note") is None and all("note" not in (e.from_, e.to) for e in document.flow_ref().edges)
    assert document.undo_stack.count() == 1  # copy + delete is one step
    document.undo_stack.undo()
    assert document.text() == TRIAGE.read_text()

    on_refund = view_point(view, item_of(view, "refund").sceneBoundingRect().center())
    menu = _right_click(qtbot, view, on_refund)
    _click_entry(qtbot, menu, "Duplicate here")
    landed = view.mapToScene(on_refund)
    assert node_of(document, "refund_2").position == (landed.x(), landed.y())
    document.undo_stack.undo()

    menu = _right_click(qtbot, view, on_refund)
    _click_entry(qtbot, menu, "Rename…")
    assert view.title_editor.isVisible() and view.title_editor.text() == node_of(document, "refund").title


def test_double_click_on_a_title_or_f2_renames_in_place(qtbot: QtBot, editor: FlowEditor) -> None:
    view = editor.view
    document = editor.document
    title = view.title_editor
    header = item_of(view, "classify").mapToScene(QPointF(60, 12))
    QTest.mouseDClick(view.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier,
                      view_point(view, header))
    assert title.isVisible() and title.node_id == "classify"
    assert title.selectedText() == node_of(document, "classify").title
    def over_classify() -> bool:
        header = view.mapFromScene(item_of(view, "classify").sceneBoundingRect()).boundingRect()
        return header.contains(title.geometry().center())

    assert over_classify()
    anchor = QPoint(40, 40)
    wheel = QWheelEvent(QPointF(anchor), QPointF(view.viewport().mapToGlobal(anchor)), QPoint(), QPoint(0, 240),
                        Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier, Qt.ScrollPhase.NoScrollPhase, False)
    QApplication.sendEvent(view.viewport(), wheel)  # zooming while typing keeps the editor on its node
    assert view.zoom() > 1.2 and title.isVisible() and over_classify()
    QTest.keyClicks(title, "Label the ticket")
    QTest.keyClick(title, Qt.Key.Key_Return)
    assert not title.isVisible()
    assert node_of(document, "classify").title == "Label the ticket"
    assert document.undo_stack.count() == 1

    view.flow_scene.select_nodes(["route"])
    view.setFocus()
    QTest.keyClick(view, Qt.Key.Key_F2)
    assert title.isVisible() and title.node_id == "route"
    QTest.keyClicks(title, "Never mind")
    QTest.keyClick(title, Qt.Key.Key_Escape)
    assert not title.isVisible() and node_of(document, "route").title != "Never mind"
    assert document.undo_stack.count() == 1
    QTest.keyClick(view, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)  # the view passes Ctrl+Z on
    document.undo_stack.undo()
    assert document.text() == TRIAGE.read_text()


def test_palette_double_clicks_place_nodes_where_they_overlap_nothing(qtbot: QtBot, editor: FlowEditor) -> None:
    palette = NodePalette()
    qtbot.addWidget(palette)
    palette.resize(240, 600)
    palette.show()
    qtbot.waitExposed(palette)
    palette.activated.connect(editor.add_node_at_centre)
    view = editor.view
    view.centerOn(item_of(view, "classify").sceneBoundingRect().center())  # the centre is on a node
    added: list[str] = []
    for type_name in ("queue", "queue", "set"):
        item = palette.item_for(type_name)
        assert item is not None
        palette.tree.scrollToItem(item)
        at = palette.tree.visualItemRect(item).center()
        QTest.mouseClick(palette.tree.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, at)
        QTest.mouseDClick(palette.tree.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, at)
        added.append(editor.document.flow_ref().nodes[-1].id)
    assert [node_of(editor.document, n).type for n in added] == ["queue", "queue", "set"]
    boxes = {n: item_of(view, n).sceneBoundingRect() for n in view.flow_scene.node_items}
    for node_id in added:
        others = [box for other, box in boxes.items() if other != node_id]
        assert not any(boxes[node_id].intersects(box) for box in others), node_id
        assert view.mapToScene(view.viewport().rect()).boundingRect().contains(boxes[node_id])
    assert editor.document.undo_stack.count() == 3


def test_corner_zoom_bar_and_the_minimap_toggle(qtbot: QtBot, editor: FlowEditor) -> None:
    view = editor.view
    bar = view.zoom_bar
    assert bar.isVisible() and bar.percent.text() == "100%"
    assert view.viewport().rect().contains(bar.geometry().translated(-view.viewport().pos()))
    qtbot.mouseClick(bar.zoom_in, Qt.MouseButton.LeftButton)
    assert bar.percent.text() == "125%" and abs(view.zoom() - 1.25) < 1e-6
    qtbot.mouseClick(bar.zoom_out, Qt.MouseButton.LeftButton)
    qtbot.mouseClick(bar.zoom_out, Qt.MouseButton.LeftButton)
    assert bar.percent.text() == "80%"
    qtbot.mouseClick(bar.percent, Qt.MouseButton.LeftButton)
    assert bar.percent.text() == "100%"
    assert view.minimap.isVisible()
    qtbot.mouseClick(bar.minimap, Qt.MouseButton.LeftButton)
    assert not view.minimap.isVisible() and not bar.minimap.isChecked()
    view.setFocus()
    QTest.keyClick(view, Qt.Key.Key_M, Qt.KeyboardModifier.ControlModifier)
    assert view.minimap.isVisible() and bar.minimap.isChecked()


def test_fit_frames_the_flow_clear_of_the_minimap_and_the_zoom_bar(qtbot: QtBot, editor: FlowEditor) -> None:
    view = editor.view
    editor.resize(900, 420)
    qtbot.waitUntil(lambda: view.viewport().height() < 430)
    covered = [QRectF(view.minimap.geometry()), QRectF(view.zoom_bar.geometry())]

    def node_boxes() -> list[QRectF]:
        return [QRectF(view.mapFromScene(i.sceneBoundingRect()).boundingRect())
                for i in view.flow_scene.node_items.values()]

    qtbot.mouseClick(view.zoom_bar.fit, Qt.MouseButton.LeftButton)
    boxes = node_boxes()
    inside = QRectF(view.viewport().rect())
    assert all(inside.contains(box) for box in boxes)
    assert not [box for box in boxes for corner in covered if box.intersects(corner)]
    zoom_with_map = view.zoom()
    QTest.keyClick(view, Qt.Key.Key_M, Qt.KeyboardModifier.ControlModifier)
    qtbot.mouseClick(view.zoom_bar.fit, Qt.MouseButton.LeftButton)
    assert view.zoom() >= zoom_with_map  # without the minimap the flow may take its corner
    assert view.zoom_bar.percent.text() == f"{round(view.zoom() * 100)}%"


def test_a_wire_dropped_on_empty_canvas_offers_only_types_that_take_an_input(editor: FlowEditor) -> None:
    view = editor.view
    item = item_of(view, "refund")
    drag(view.viewport(), view_point(view, item.output_anchor(None)), view_point(view, QPointF(1250, 420)))
    box = view.quick_add
    assert box.isVisible()
    offered = box.visible_types()
    assert offered and not [t for t in offered if not CATALOG[t].has_input]
    assert "queue" in offered and "trigger.webhook" not in offered
    QTest.keyClicks(box.search, "webhook")
    assert box.visible_types() == []
    QTest.keyClick(box.search, Qt.Key.Key_Escape)
    view.setFocus()
    QTest.keyClick(view, Qt.Key.Key_Tab)  # on its own, quick-add offers every type, triggers too
    assert "trigger.webhook" in view.quick_add.visible_types()
    QTest.keyClick(view.quick_add.search, Qt.Key.Key_Escape)


def test_palette_entries_say_in_one_sentence_what_the_node_does(qtbot: QtBot) -> None:
    palette = NodePalette()
    qtbot.addWidget(palette)
    for type_name, spec in CATALOG.items():
        item = palette.item_for(type_name)
        assert item is not None
        tip = item.toolTip(0)
        assert tip == spec.description, type_name
        assert tip[0].isupper() and tip.endswith(".") and tip.count(". ") == 0 and len(tip) < 120, tip
