"""The code field of a `script` node: a monospace editor with line numbers and python / shell highlighting.

Its text is code, never a template, so it is not template-checked; it commits when focus leaves or on
Ctrl+Enter, like the template editor.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Iterable
from typing import Any

from PySide6.QtCore import QRect, QSize, Qt, Signal
from PySide6.QtGui import (
    QColor,
    QFocusEvent,
    QFont,
    QFontDatabase,
    QKeyEvent,
    QPainter,
    QPaintEvent,
    QResizeEvent,
    QSyntaxHighlighter,
    QTextCharFormat,
    QTextDocument,
)
from PySide6.QtWidgets import QPlainTextEdit, QWidget

from app.field_kinds import FieldSpec
from app.panels.field_editors import FieldEditor

SHELL_KEYWORDS = ("if", "then", "else", "elif", "fi", "for", "while", "until", "do", "done", "case", "esac",
                  "in", "function", "return", "exit", "local", "export", "readonly", "set", "unset", "shift",
                  "break", "continue", "echo", "printf", "read", "test", "trap", "exec", "eval", "cd")
PYTHON_BUILTINS = ("print", "len", "range", "dict", "list", "str", "int", "float", "bool", "open", "sum",
                   "min", "max", "sorted", "enumerate", "zip", "isinstance", "json", "sys", "os")
INDENT = "    "
_Rule = tuple[re.Pattern[str], str]


def _format(color: str, bold: bool = False, italic: bool = False) -> QTextCharFormat:
    char_format = QTextCharFormat()
    char_format.setForeground(QColor(color))
    if bold:
        char_format.setFontWeight(QFont.Weight.Bold)
    char_format.setFontItalic(italic)
    return char_format


CODE_COLOURS: dict[str, dict[str, str]] = {
    "dark": {"keyword": "#c678dd", "builtin": "#56b6c2", "string": "#98c379", "number": "#d19a66",
             "comment": "#8b919b", "variable": "#e5c07b"},
    "light": {"keyword": "#8e24aa", "builtin": "#0b6b7d", "string": "#2f7a1f", "number": "#a34f00",
              "comment": "#5f6673", "variable": "#8a5a00"},
}
"""Syntax colours per theme, each legible (WCAG AA) on that theme's fields."""
_BOLD, _ITALIC = frozenset({"keyword"}), frozenset({"comment"})
FORMATS: dict[str, dict[str, QTextCharFormat]] = {
    theme: {name: _format(colour, bold=name in _BOLD, italic=name in _ITALIC) for name, colour in colours.items()}
    for theme, colours in CODE_COLOURS.items()
}


def _formats() -> dict[str, QTextCharFormat]:
    from canvas.theme import current_theme

    return FORMATS.get(current_theme().name, FORMATS["light"])


def _words(words: Iterable[str]) -> re.Pattern[str]:
    return re.compile(r"\b(?:" + "|".join(re.escape(w) for w in words) + r")\b")


_STRING = re.compile(r"'[^'\n]*'?|\"(?:[^\"\\\n]|\\.)*\"?")
_NUMBER = re.compile(r"\b\d+(?:\.\d+)?\b")
RULES: dict[str, list[_Rule]] = {
    "python": [(_words(keyword.kwlist), "keyword"), (_words(PYTHON_BUILTINS), "builtin"), (_NUMBER, "number"),
               (_STRING, "string"), (re.compile(r"#.*$"), "comment")],
    "shell": [(_words(SHELL_KEYWORDS), "keyword"), (_NUMBER, "number"), (_STRING, "string"),
              (re.compile(r"\$\{?[A-Za-z_][A-Za-z0-9_]*\}?|\$[0-9#?@*$!]"), "variable"),
              (re.compile(r"(?:^|(?<=\s))#.*$"), "comment")],
}


class CodeHighlighter(QSyntaxHighlighter):
    """Keywords, strings, numbers and comments of one language; later rules paint over earlier ones."""

    def __init__(self, document: QTextDocument, language: str = "python") -> None:
        super().__init__(document)
        self.language = language
        from canvas.theme import theme_notifier

        theme_notifier().changed.connect(self._theme_changed)

    def _theme_changed(self, _theme: object) -> None:
        self.rehighlight()

    def set_language(self, language: str) -> None:
        if language != self.language:
            self.language = language
            self.rehighlight()

    def highlightBlock(self, text: str) -> None:
        formats = _formats()
        for pattern, name in RULES.get(self.language, []):
            for match in pattern.finditer(text):
                self.setFormat(match.start(), match.end() - match.start(), formats[name])

    def format_names_at(self, text: str) -> dict[int, str]:
        """Position -> format name this highlighter gives `text` (what a test checks without pixels)."""
        found: dict[int, str] = {}
        for pattern, name in RULES.get(self.language, []):
            for match in pattern.finditer(text):
                for position in range(match.start(), match.end()):
                    found[position] = name
        return found


class _LineNumbers(QWidget):
    def __init__(self, editor: CodeTextEdit) -> None:
        super().__init__(editor)
        self.editor = editor

    def sizeHint(self) -> QSize:
        return QSize(self.editor.line_number_width(), 0)

    def paintEvent(self, event: QPaintEvent) -> None:
        self.editor.paint_line_numbers(event)


class CodeTextEdit(QPlainTextEdit):
    """A plain text editor with a line-number gutter; Tab indents with spaces, Ctrl+Enter commits."""

    left = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        font = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
        self.setFont(font)
        self.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.setTabStopDistance(self.fontMetrics().horizontalAdvance(" ") * len(INDENT))
        self.gutter = _LineNumbers(self)
        self.blockCountChanged.connect(self._update_margin)
        self.updateRequest.connect(self._scroll_gutter)
        self._update_margin()

    def line_number_width(self) -> int:
        digits = max(2, len(str(max(1, self.blockCount()))))
        return 10 + self.fontMetrics().horizontalAdvance("9") * digits

    def _update_margin(self, _count: int = 0) -> None:
        self.setViewportMargins(self.line_number_width(), 0, 0, 0)

    def _scroll_gutter(self, rect: QRect, dy: int) -> None:
        if dy:
            self.gutter.scroll(0, dy)
        else:
            self.gutter.update(0, rect.y(), self.gutter.width(), rect.height())

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        area = self.contentsRect()
        self.gutter.setGeometry(QRect(area.left(), area.top(), self.line_number_width(), area.height()))

    def paint_line_numbers(self, event: QPaintEvent) -> None:
        painter = QPainter(self.gutter)
        painter.fillRect(event.rect(), self.palette().alternateBase())
        painter.setPen(self.palette().placeholderText().color())
        block = self.firstVisibleBlock()
        number = block.blockNumber()
        top = round(self.blockBoundingGeometry(block).translated(self.contentOffset()).top())
        height = self.fontMetrics().height()
        while block.isValid() and top <= event.rect().bottom():
            bottom = top + round(self.blockBoundingRect(block).height())
            if block.isVisible() and bottom >= event.rect().top():
                painter.drawText(0, top, self.gutter.width() - 5, height, Qt.AlignmentFlag.AlignRight,
                                 str(number + 1))
            block = block.next()
            top = bottom
            number += 1
        painter.end()

    def focusOutEvent(self, event: QFocusEvent) -> None:
        super().focusOutEvent(event)
        self.left.emit()

    def keyPressEvent(self, event: QKeyEvent) -> None:
        control = event.modifiers() & Qt.KeyboardModifier.ControlModifier
        if event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter) and control:
            self.left.emit()
            return
        if event.key() == Qt.Key.Key_Tab and not event.modifiers():
            self.insertPlainText(INDENT)
            return
        super().keyPressEvent(event)


class CodeEditor(FieldEditor):
    """The `code` field: code in the language its node's `language` key names."""

    def __init__(self, spec: FieldSpec, parent: QWidget | None = None) -> None:
        super().__init__(spec, parent)
        self.text = CodeTextEdit(self)
        self.text.setObjectName("codeText")
        self.text.setPlaceholderText("import json, sys\nbox = json.load(sys.stdin)\nprint(json.dumps(box['inputs']))")
        self.text.setMinimumHeight(180)
        self.highlighter = CodeHighlighter(self.text.document())
        self.text.textChanged.connect(self._check)
        self.text.left.connect(self.commit)
        self._finish_layout(self.text)

    def set_language(self, language: Any) -> None:
        """Highlight as `language` (`python` or `shell`; anything else: python)."""
        self.highlighter.set_language(language if language in RULES else "python")

    def _display(self, value: Any) -> None:
        text = "" if value is None else str(value)
        if self.text.toPlainText() != text:
            self.text.setPlainText(text)
        self._check()

    def _check(self) -> None:
        missing = self.spec.required and not self.text.toPlainText().strip()
        self.set_note(f"{self.spec.label} is required" if missing else "", missing)

    def commit(self) -> None:
        source = self.text.toPlainText()
        self._emit(source if source else None)
