"""Flow ▸ Compare with version… on the real embedded engine: the draft against a published version, the
Changes panel filled, F8 stepping through the changes on the canvas."""

from __future__ import annotations

from PySide6.QtCore import Qt

from app.window import MainWindow


def test_compare_draft_with_a_published_version(qtbot, engine_window: MainWindow) -> None:
    window = engine_window
    document = window.new_flow()
    start = document.add_node("trigger.manual", (0, 0))
    greet = document.add_node("set", (260, 0))
    end = document.add_node("terminal", (520, 0))
    document.connect(start, None, greet)
    document.connect(greet, None, end)
    window.publish()
    qtbot.waitUntil(lambda: window.statusBar().currentMessage() == "untitled v1 published", timeout=10_000)

    document.rename_node(greet, "Greet everyone")
    document.delete_nodes([end])
    asked: list[list[int]] = []

    def choose(_flow_id: str, numbers: list[int]) -> int:
        asked.append(numbers)
        return 1

    window.ask_compare_version = choose
    window.actions_by_id["compare"].trigger()
    qtbot.waitUntil(lambda: window.comparisons.current() is not None, timeout=10_000)
    assert asked == [[1]]
    panel = window.changes
    assert panel.summary.text().startswith("Draft compared with v1: 1 removed, 1 changed")
    assert window.docks["Changes"].isVisible()

    editor = window.tabs.current_editor()
    assert editor is not None
    editor.view.setFocus()
    qtbot.keyClick(editor.view, Qt.Key.Key_F8)
    first = panel.current_node()
    qtbot.keyClick(editor.view, Qt.Key.Key_F8)
    second = panel.current_node()
    assert {first, second} == {greet, end}
    qtbot.keyClick(editor.view, Qt.Key.Key_F8, Qt.KeyboardModifier.ShiftModifier)
    assert panel.current_node() == first
    if first == greet:
        assert editor.view.flow_scene.selected_node_ids() == [greet]
        assert 'now: "Greet everyone"' in panel.detail.toPlainText()

    panel.stop_button.click()
    assert window.comparisons.current() is None
    assert panel.list.count() == 0


def test_two_published_versions_compared_through_an_opened_version(qtbot, engine_window: MainWindow) -> None:
    window = engine_window
    document = window.new_flow()
    start = document.add_node("trigger.manual", (0, 0))
    end = document.add_node("terminal", (300, 0))
    document.connect(start, None, end)
    window.publish()
    qtbot.waitUntil(lambda: window.statusBar().currentMessage() == "untitled v1 published", timeout=10_000)
    document.set_config_field(end, "output", "{{ inputs }}")
    window.publish()
    qtbot.waitUntil(lambda: window.statusBar().currentMessage() == "untitled v2 published", timeout=10_000)

    window.open_version("untitled", 1)
    qtbot.waitUntil(lambda: window.tabs.count() == 2, timeout=10_000)
    opened = window.document
    assert opened is not None and opened is not document and opened.node(end) is not None
    assert "output" not in opened.node(end).config  # type: ignore[union-attr]
    window.ask_compare_version = lambda _flow_id, numbers: max(numbers)
    window.compare_with_version()
    qtbot.waitUntil(lambda: window.comparisons.current() is not None, timeout=10_000)
    change = window.comparisons.current().diff.node(end)  # type: ignore[union-attr]
    assert change is not None and [(f.path, f.kind) for f in change.fields] == [("config.output", "removed")]
    assert window.changes.summary.text() == "Draft compared with v2: 1 changed"
    window.tabs.setCurrentIndex(0)  # the other tab has no comparison: the panel says so
    assert window.changes.list.count() == 0 and not window.changes.stop_button.isEnabled()
