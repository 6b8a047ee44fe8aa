"""A flow made in the app is its own flow in the engine: a second New flow publishes as its own v1, and
publishing onto another flow's history asks first (real embedded engine, machine Redis, SQLite file)."""

from __future__ import annotations

from PySide6.QtCore import Qt

from app.window import MainWindow
from canvas.document import FlowDocument


def status_of(window: MainWindow) -> str:
    return window.statusBar().currentMessage()


def minimal_flow(document: FlowDocument) -> None:
    start = document.add_node("trigger.manual", (0, 0))
    end = document.add_node("terminal", (300, 0))
    document.connect(start, None, end)


def test_new_flows_publish_as_their_own_flows_and_reusing_an_id_asks(qtbot, engine_window: MainWindow) -> None:
    window = engine_window
    first = window.new_flow()
    minimal_flow(first)
    window.show_flow_properties()
    panel = window.properties.flow_panel
    qtbot.keyClicks(panel.name_edit, "Refunds")
    qtbot.keyClick(panel.name_edit, Qt.Key.Key_Return)
    window.publish()
    qtbot.waitUntil(lambda: status_of(window) == "refunds v1 published", timeout=10_000)
    assert window.published_ids == frozenset({"refunds"}) and not first.id_follows_name

    second = window.new_flow()
    assert second.flow_ref().id == "untitled"
    minimal_flow(second)
    window.publish()
    qtbot.waitUntil(lambda: status_of(window) == "untitled v1 published", timeout=10_000)

    # A third flow renamed to the published one's name gets a fresh id; set by hand to it, Publish asks.
    third = window.new_flow()
    minimal_flow(third)
    third.rename_node(third.flow_ref().nodes[1].id, "Finish")
    window.show_flow_properties()
    qtbot.keyClicks(panel.name_edit, "Refunds")
    qtbot.keyClick(panel.name_edit, Qt.Key.Key_Return)
    assert third.flow_ref().id == "refunds-2"
    panel.id_edit.setFocus()
    panel.id_edit.selectAll()
    qtbot.keyClicks(panel.id_edit, "refunds")
    qtbot.keyClick(panel.id_edit, Qt.Key.Key_Return)
    assert "open flow" in (panel.id_problem or "")  # the first tab is still open
    window.tabs.setCurrentIndex(0)
    window.close_tab(0)
    window.tabs.setCurrentIndex(window.tabs.index_of(third))
    panel.id_edit.setFocus()
    panel.id_edit.selectAll()
    qtbot.keyClicks(panel.id_edit, "refunds")
    qtbot.keyClick(panel.id_edit, Qt.Key.Key_Return)
    assert third.flow_ref().id == "refunds" and "Publish asks" in panel.id_note.text()

    asked: list[int] = []
    answers = [False, True]

    def answer(_document: FlowDocument, versions: int) -> bool:
        asked.append(versions)
        return answers.pop(0)

    window.ask_publish_onto_history = answer
    window.publish()
    qtbot.waitUntil(lambda: status_of(window).startswith("Not published: refunds is another flow's id"),
                    timeout=10_000)
    window.publish()
    qtbot.waitUntil(lambda: status_of(window) == "refunds v2 published", timeout=10_000)
    assert asked == [1, 1]
    third.rename_node(third.flow_ref().nodes[0].id, "Start by hand")
    window.publish()  # the draft now continues that history: no question
    qtbot.waitUntil(lambda: status_of(window) == "refunds v3 published", timeout=10_000)
    assert asked == [1, 1]
