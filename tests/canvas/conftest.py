"""Canvas fixtures: documents over the shared examples, and real editors shown offscreen."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import QEvent, QPoint, QPointF, Qt
from PySide6.QtGui import QMouseEvent
from PySide6.QtWidgets import QApplication, QWidget
from pytestqt.qtbot import QtBot

from canvas.document import FlowDocument
from canvas.editor import FlowEditor
from canvas.items import NodeItem
from canvas.view import FlowView
from engine.flow import Flow, Node
from tests.conftest import EXAMPLES

TRIAGE = EXAMPLES / "ticket-triage.flow.json"


@pytest.fixture
def triage_path(tmp_path: Path) -> Path:
    """A private copy of the triage example, so saves do not touch the shared file."""
    copy = tmp_path / "ticket-triage.flow.json"
    copy.write_bytes(TRIAGE.read_bytes())
    return copy


@pytest.fixture
def triage(qapp: QApplication, triage_path: Path) -> FlowDocument:
    return FlowDocument.open(triage_path)


@pytest.fixture
def editor(qtbot: QtBot, triage: FlowDocument) -> Iterator[FlowEditor]:
    widget = FlowEditor(triage)
    qtbot.addWidget(widget)
    widget.resize(1400, 700)
    widget.show()
    qtbot.waitExposed(widget)
    widget.view.set_zoom(1.0)
    widget.view.centerOn(660, 130)
    yield widget
    widget.view.quick_add.hide()


def item_of(view: FlowView, node_id: str) -> NodeItem:
    """The view's item for `node_id` (fails the test when missing)."""
    found = view.node_item(node_id)
    assert found is not None, f"no item for node {node_id}"
    return found


def node_of(document: FlowDocument | Flow, node_id: str) -> Node:
    """The document's node `node_id` (fails the test when missing)."""
    found = document.node(node_id)
    assert found is not None, f"no node {node_id}"
    return found


def view_point(view: FlowView, scene_point: QPointF) -> QPoint:
    """Viewport pixel of a scene point."""
    return view.mapFromScene(scene_point)


def send_mouse(
    widget: QWidget,
    kind: QEvent.Type,
    pos: QPoint,
    button: Qt.MouseButton = Qt.MouseButton.LeftButton,
    buttons: Qt.MouseButton | None = None,
    modifiers: Qt.KeyboardModifier = Qt.KeyboardModifier.NoModifier,
) -> None:
    """Deliver a real QMouseEvent to `widget` (moves carry the held buttons, as a real drag does)."""
    if buttons is None:
        buttons = Qt.MouseButton.NoButton if kind == QEvent.Type.MouseButtonRelease else button
    event_button = Qt.MouseButton.NoButton if kind == QEvent.Type.MouseMove else button
    local = QPointF(pos)
    event = QMouseEvent(kind, local, QPointF(widget.mapToGlobal(pos)), event_button, buttons, modifiers)
    QApplication.sendEvent(widget, event)


def drag(
    widget: QWidget, start: QPoint, end: QPoint, steps: int = 6, button: Qt.MouseButton = Qt.MouseButton.LeftButton
) -> None:
    """Press at `start`, move in steps, release at `end`."""
    send_mouse(widget, QEvent.Type.MouseButtonPress, start, button)
    for step in range(1, steps + 1):
        point = start + (end - start) * step / steps
        send_mouse(widget, QEvent.Type.MouseMove, point, button, button)
    send_mouse(widget, QEvent.Type.MouseButtonRelease, end, button)
