"""A fit and a palette add leave nodes readable and uncovered: fitting stops where titles show, nodes land in the
part of the view the minimap and zoom bar leave free, and titles fit their node when zoomed out."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QFontMetricsF
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from canvas.document import FlowDocument, empty_flow
from canvas.editor import FlowEditor
from canvas.items import DETAIL_ZOOM, MIN_TITLE_FIT_PX, TITLE_FONT, TITLE_ROOM, NodeItem
from canvas.view import FlowView

from .conftest import item_of

SMALL_CANVAS = (524, 344)
"""The canvas of the app's 1100×700 window (palette, properties and bottom docks open)."""


def _shown(qtbot: QtBot, document: FlowDocument, size: tuple[int, int]) -> FlowEditor:
    editor = FlowEditor(document)
    qtbot.addWidget(editor)
    editor.resize(*size)
    editor.show()
    qtbot.waitExposed(editor)
    qtbot.waitUntil(lambda: editor.view.viewport().size().toTuple() == size)
    return editor


@pytest.fixture
def small(qtbot: QtBot, triage: FlowDocument) -> Iterator[FlowEditor]:
    yield _shown(qtbot, triage, SMALL_CANVAS)


def _box(view: FlowView, item: NodeItem) -> QRectF:
    """The node's box (without ports and overlays) in viewport pixels."""
    return QRectF(view.mapFromScene(item.mapRectToScene(item.node_rect())).boundingRect())


def _move_to(view: FlowView, item: NodeItem, point: QPointF) -> None:
    """Scroll so the node's box is centred on `point` (viewport pixels)."""
    shift = _box(view, item).center() - point
    view.centerOn(view.mapToScene(view.viewport().rect().center()) + shift / view.zoom())


def _covered(view: FlowView, box: QRectF) -> bool:
    corners = [QRectF(view.zoom_bar.geometry())]
    if view.minimap_shown():
        corners.append(QRectF(view.minimap.geometry()))
    return any(box.intersects(corner) for corner in corners)


def test_fitting_a_flow_too_big_for_the_view_stops_where_titles_show_at_its_start(small: FlowEditor) -> None:
    view = small.view
    view.fit_selection_or_all()
    assert view.zoom() >= DETAIL_ZOOM
    area = view.free_area()
    assert area.contains(_box(view, item_of(view, "hook")))  # the trigger, where the flow starts
    assert area.contains(_box(view, item_of(view, "classify")))  # the first-start hint says "click Classify"
    assert not [n for n, item in view.flow_scene.node_items.items() if _covered(view, _box(view, item))]


def test_fitting_again_shows_the_whole_flow_and_a_third_time_readable_again(small: FlowEditor) -> None:
    view = small.view
    view.setFocus()
    QTest.keyClick(view, Qt.Key.Key_F)
    readable = view.zoom()
    messages: list[str] = []
    view.status.connect(messages.append)
    QTest.keyClick(view, Qt.Key.Key_F)
    assert view.zoom() < DETAIL_ZOOM
    boxes = [_box(view, item) for item in view.flow_scene.node_items.values()]
    assert all(view.free_area().contains(box) for box in boxes)
    assert messages and "whole flow" in messages[-1]
    QTest.keyClick(view, Qt.Key.Key_F)
    assert view.zoom() == readable
    view.zoom_by(1.1)  # the user moved: the next fit is the readable one again, not the whole flow
    view.fit_selection_or_all()
    assert view.zoom() == readable


def test_a_flow_that_fits_readably_is_framed_whole_as_before(qtbot: QtBot, triage: FlowDocument) -> None:
    editor = _shown(qtbot, triage, (864, 477))  # the 1440×900 window's canvas
    view = editor.view
    view.fit_selection_or_all()
    assert DETAIL_ZOOM <= view.zoom() < 0.6
    area = view.free_area()
    assert all(area.contains(_box(view, item)) for item in view.flow_scene.node_items.values())


@pytest.fixture
def untitled(qapp: QApplication) -> FlowDocument:
    return FlowDocument.from_flow(empty_flow("untitled", "Untitled"))


def test_palette_adds_land_in_the_free_area_of_a_small_view(qtbot: QtBot, untitled: FlowDocument) -> None:
    editor = _shown(qtbot, untitled, SMALL_CANVAS)
    view = editor.view
    added = []
    for type_name in ("trigger.manual", "approval", "http.request", "terminal"):
        node_id = editor.add_node_at_centre(type_name)  # what a palette double-click calls
        view.select_node(node_id)  # and then the app selects it
        added.append(node_id)
        box = _box(view, item_of(view, node_id))
        assert view.free_area().contains(box), (type_name, box, view.free_area())
    boxes = [item_of(view, n).sceneBoundingRect() for n in added]
    assert not [(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1:] if a.intersects(b)]


def test_a_palette_add_on_a_crowded_view_scrolls_to_the_new_node(small: FlowEditor) -> None:
    view = small.view
    view.set_zoom(1.0)
    view.centerOn(item_of(view, "route").sceneBoundingRect().center())
    node_id = small.add_node_at_centre("queue")
    assert view.free_area().contains(_box(view, item_of(view, node_id)))


def test_select_node_leaves_the_view_when_the_node_is_in_the_free_area_and_else_uncovers_it(
        small: FlowEditor) -> None:
    view = small.view
    view.set_zoom(1.0)
    _move_to(view, item_of(view, "classify"), view.free_area().center())
    before = view.mapToScene(view.viewport().rect().center())
    view.select_node("classify")
    assert view.mapToScene(view.viewport().rect().center()) == before
    # Put "route" under the minimap, then reveal it as a diagnostic does.
    route = item_of(view, "route")
    _move_to(view, route, QRectF(view.minimap.geometry()).center())
    assert _covered(view, _box(view, route))
    view.select_node("route")
    assert view.free_area().contains(_box(view, route)) and not _covered(view, _box(view, route))


@pytest.mark.parametrize("zoom", [0.5, 0.54, 0.6, 0.75, 1.0])
def test_titles_fit_their_node_when_zoomed_out(triage: FlowDocument, small: FlowEditor, zoom: float) -> None:
    view = small.view
    for node_id, item in view.flow_scene.node_items.items():
        font, text = item.title_at(zoom)
        assert QFontMetricsF(font).horizontalAdvance(text) <= TITLE_ROOM + 0.5, node_id
        assert font.pixelSize() >= TITLE_FONT.pixelSize()
        assert font.pixelSize() * zoom >= min(MIN_TITLE_FIT_PX, TITLE_FONT.pixelSize() * zoom) - 0.5, node_id
    # The titles the new-user pass saw cut at 54% ("Ticket web…", "Reserve $0.…", "Follow-up n…") are whole.
    for node_id in ("hook", "reserve", "note", "refund", "classify"):
        title = triage.node(node_id).title  # type: ignore[union-attr]
        assert item_of(view, node_id).title_at(0.54)[1] == title
