"""Approvals v2 on the canvas: the quorum badge ("2 of 3 approved") drawn above an approval node, its tooltip
line, and its removal; the node's summary says how many approvals it needs."""

from __future__ import annotations

from PySide6.QtGui import QColor, QImage, QPainter
from PySide6.QtWidgets import QStyleOptionGraphicsItem
from pytestqt.qtbot import QtBot

from canvas.editor import FlowEditor
from canvas.items import NodeItem
from canvas.summary import config_summary
from canvas.theme import current_theme
from tests.canvas.conftest import item_of


def _painted(item: NodeItem) -> QImage:
    area = item.boundingRect()
    image = QImage(int(area.width()) + 2, int(area.height()) + 2, QImage.Format.Format_ARGB32)
    image.fill(QColor(0, 0, 0, 0))
    painter = QPainter(image)
    painter.translate(-area.left(), -area.top())
    item.paint(painter, QStyleOptionGraphicsItem())
    painter.end()
    return image


def _has_colour(image: QImage, colour: QColor) -> bool:
    wanted = colour.rgb()
    return any(image.pixel(x, y) == wanted for x in range(image.width()) for y in range(image.height()))


def test_the_quorum_badge_is_drawn_told_in_the_tooltip_and_removed(qtbot: QtBot, editor: FlowEditor) -> None:
    item = item_of(editor.view, "approve")
    before = _painted(item)
    assert not _has_colour(before, current_theme().run_path)
    editor.view.set_quorum_badges({"approve": ("2 of 3 approved", "run 1a2b3c4d: 2 of 3 approved · escalated")})
    assert item.quorum[0] == "2 of 3 approved"
    assert "2 of 3 approved · escalated" in item.toolTip()
    assert _has_colour(_painted(item), current_theme().run_path)
    assert item_of(editor.view, "classify").quorum == ("", "")
    editor.view.set_quorum_badges({})
    assert item.quorum == ("", "") and "escalated" not in item.toolTip()
    assert _painted(item) == before


def test_the_summary_says_how_many_approvals_are_needed(editor: FlowEditor) -> None:
    document = editor.document
    node = document.node("approve")
    assert node is not None
    assert config_summary(node) == "24h"
    document.set_config_field("approve", "approvers", ["ada", "bob", "cy"])
    document.set_config_field("approve", "required", 2)
    assert config_summary(document.node("approve")) == "24h · 2 of 3"  # type: ignore[arg-type]
