"""The script node in the app: its palette entry and its code field (line numbers, highlighting, undo)."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from app.field_kinds import config_fields
from app.panels.code_editor import CodeEditor
from app.panels.field_editors import ChoiceEditor
from app.panels.properties import PropertiesPanel
from canvas.document import FlowDocument, empty_flow
from canvas.palette import NodePalette
from engine.validation import validate


def _panel_with_script(qtbot: QtBot) -> tuple[FlowDocument, PropertiesPanel, str]:
    document = FlowDocument.from_flow(empty_flow("scripted"))
    node_id = document.add_node("script", (0.0, 0.0))
    panel = PropertiesPanel()
    qtbot.addWidget(panel)
    panel.resize(420, 700)
    panel.set_document(document)
    panel.show_node(node_id)
    return document, panel, node_id


def test_the_palette_offers_script_and_a_fresh_one_is_valid(qtbot: QtBot) -> None:
    palette = NodePalette()
    qtbot.addWidget(palette)
    palette.filter.setText("scri")
    assert palette.visible_types() == ["script"]
    document = FlowDocument.from_flow(empty_flow("fresh"))
    node_id = document.add_node("script", (0.0, 0.0))
    problems = [d for d in validate(document.flow()) if d.node == node_id and d.severity == "error"]
    assert problems == []


def test_the_code_field_is_a_code_editor_with_line_numbers(qtbot: QtBot) -> None:
    kinds = {f.key: f for f in config_fields("script")}
    assert kinds["code"].kind == "code" and kinds["code"].language_key == "language"
    assert kinds["env"].kind == "mapping" and kinds["env"].value_kind == "template"
    document, panel, node_id = _panel_with_script(qtbot)
    editor = panel.editors["code"]
    assert isinstance(editor, CodeEditor)
    assert editor.text.toPlainText() == document.node(node_id).config["code"]  # type: ignore[union-attr]
    narrow = editor.text.line_number_width()
    assert narrow > 0 and editor.text.viewportMargins().left() == narrow
    editor.text.setPlainText("\n".join(f"print({i})" for i in range(1200)))
    assert editor.text.line_number_width() > narrow  # four digits need a wider gutter


def test_highlighting_follows_the_language_field(qtbot: QtBot) -> None:
    document, panel, node_id = _panel_with_script(qtbot)
    editor = panel.editors["code"]
    assert isinstance(editor, CodeEditor)
    line = "if [ -n \"$NAME\" ]; then echo hi; fi  # done"
    assert editor.highlighter.language == "python"
    python_view = editor.highlighter.format_names_at(line)
    assert python_view.get(line.index("fi ")) is None
    language = panel.editors["language"]
    assert isinstance(language, ChoiceEditor)
    language.combo.setCurrentIndex(language.combo.findData("shell"))
    language.combo.activated.emit(language.combo.currentIndex())
    assert document.node(node_id).config["language"] == "shell"  # type: ignore[union-attr]
    assert editor.highlighter.language == "shell"
    shell_view = editor.highlighter.format_names_at(line)
    assert shell_view[line.index("fi ")] == "keyword"
    assert shell_view[line.index("$NAME") + 1] == "variable"  # inside a string too
    assert shell_view[line.index("\"$NAME")] == "string"
    assert shell_view[line.index("# done")] == "comment"
    # and the formats are really applied to the document's layout
    editor.text.setPlainText("for x in 1 2; do echo $x; done  # comment")
    formats = editor.text.document().firstBlock().layout().formats()
    assert any(f.start == 0 and f.length == len("for") for f in formats)
    assert any(f.length == len("# comment") and f.format.fontItalic() for f in formats)


def test_editing_code_commits_on_ctrl_enter_and_undo_restores(qtbot: QtBot) -> None:
    document, panel, node_id = _panel_with_script(qtbot)
    editor = panel.editors["code"]
    assert isinstance(editor, CodeEditor)
    before = document.node(node_id).config["code"]  # type: ignore[union-attr]
    editor.text.setPlainText("print('changed')")
    qtbot.keyClick(editor.text, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    assert document.node(node_id).config["code"] == "print('changed')"  # type: ignore[union-attr]
    document.undo_stack.undo()
    assert document.node(node_id).config["code"] == before  # type: ignore[union-attr]
    assert isinstance(panel.editors["code"], CodeEditor)
    assert panel.editors["code"].text.toPlainText() == before


def test_tab_indents_with_spaces(qtbot: QtBot) -> None:
    _document, panel, _node_id = _panel_with_script(qtbot)
    editor = panel.editors["code"]
    assert isinstance(editor, CodeEditor)
    editor.text.setPlainText("")
    qtbot.keyClick(editor.text, Qt.Key.Key_Tab)
    assert editor.text.toPlainText() == "    "


def test_screenshot_of_the_code_field_renders(qtbot: QtBot, tmp_path: Path) -> None:
    _document, panel, _node_id = _panel_with_script(qtbot)
    panel.show()
    qtbot.waitExposed(panel)
    image = panel.grab()
    assert image.save(str(tmp_path / "script_properties.png"))
    assert image.width() >= 400
