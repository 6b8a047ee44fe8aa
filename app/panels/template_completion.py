"""Completion of `inputs.*` and `state.*` inside the `{{ }}` of template fields.

`inputs.*` come from the flow's declared inputs; `state.*` from the keys written by the nodes upstream of the
one being edited (what the validator accepts there).
"""

from __future__ import annotations

import re

from PySide6.QtCore import QObject, QStringListModel, Qt
from PySide6.QtGui import QTextCursor
from PySide6.QtWidgets import QAbstractItemView, QCompleter, QPlainTextEdit

from engine.catalog import written_keys
from engine.flow import Flow

# A dotted name being typed right before the cursor: `inputs.tic`, `state.`.
_TYPING = re.compile(r"\b((?:inputs|state)\.[A-Za-z0-9_]*)$")


def upstream_of(flow: Flow, node_id: str) -> list[str]:
    """Ids of the nodes with a path to `node_id`, nearest first."""
    sources: dict[str, list[str]] = {}
    for edge in flow.edges:
        sources.setdefault(edge.to, []).append(edge.from_)
    seen: list[str] = []
    frontier = [node_id]
    while frontier:
        following: list[str] = []
        for current in frontier:
            for source in sources.get(current, ()):
                if source not in seen and source != node_id:
                    seen.append(source)
                    following.append(source)
        frontier = following
    return seen


def completion_words(flow: Flow, node_id: str | None) -> list[str]:
    """`inputs.<name>` for each declared input, then `state.<key>` for each key written upstream of `node_id`."""
    words = [f"inputs.{name}" for name in flow.inputs]
    if node_id is not None:
        keys: dict[str, None] = {}
        for upstream in upstream_of(flow, node_id):
            node = flow.node(upstream)
            if node is not None:
                keys.update(dict.fromkeys(written_keys(node.type, node.id, node.config)))
        words += [f"state.{key}" for key in keys]
    return words


def inside_expression(text: str) -> bool:
    """True when the end of `text` is inside an unclosed `{{ }}` or `{% %}`."""
    opened = max(text.rfind("{{"), text.rfind("{%"))
    closed = max(text.rfind("}}"), text.rfind("%}"))
    return opened > closed


class TemplateCompleter(QObject):
    """Offers the words for the name before the cursor in `editor`; choosing one completes it in place."""

    def __init__(self, editor: QPlainTextEdit) -> None:
        super().__init__(editor)
        self.editor = editor
        self.model = QStringListModel(self)
        self.completer = QCompleter(self.model, self)
        self.completer.setWidget(editor)
        self.completer.setCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)
        self.completer.setCompletionMode(QCompleter.CompletionMode.PopupCompletion)
        self.completer.activated.connect(self._insert)
        editor.textChanged.connect(self._typed)

    def set_words(self, words: list[str]) -> None:
        self.model.setStringList(words)

    def words(self) -> list[str]:
        return self.model.stringList()

    def popup(self) -> QAbstractItemView:
        popup = self.completer.popup()
        assert popup is not None  # a QCompleter always makes its list
        return popup

    def popup_visible(self) -> bool:
        return self.popup().isVisible()

    def _typing(self) -> str | None:
        cursor = self.editor.textCursor()
        block = cursor.block().text()[: cursor.positionInBlock()]
        before = self.editor.toPlainText()[: cursor.position()]
        match = _TYPING.search(block)
        return match.group(1) if match and inside_expression(before) else None

    def _typed(self) -> None:
        if not self.editor.hasFocus():
            return
        prefix = self._typing()
        if prefix is None or not self.words():
            self.popup().hide()
            return
        self.completer.setCompletionPrefix(prefix)
        if self.completer.completionCount() == 0 or self.completer.currentCompletion() == prefix == self._only():
            self.popup().hide()
            return
        rect = self.editor.cursorRect()
        rect.setWidth(self.popup().sizeHintForColumn(0) + 24)
        self.completer.complete(rect)
        # The first match is chosen already, so Enter or Tab takes it (Esc closes the list).
        self.popup().setCurrentIndex(self.completer.completionModel().index(0, 0))

    def _only(self) -> str | None:
        return self.completer.currentCompletion() if self.completer.completionCount() == 1 else None

    def _insert(self, word: str) -> None:
        prefix = self._typing() or ""
        cursor = self.editor.textCursor()
        cursor.movePosition(QTextCursor.MoveOperation.Left, QTextCursor.MoveMode.KeepAnchor, len(prefix))
        cursor.insertText(word)
        self.editor.setTextCursor(cursor)
