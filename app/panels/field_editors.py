"""One small editor widget per config field kind.

Every editor shows a value with `show_value()` (never emitting) and reports a
user's finished edit with `committed(value)`; `None` means "remove the key".
The properties panel turns that into a document command; editors never touch
the flow.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QFocusEvent, QKeyEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QSpinBox,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.field_kinds import FieldSpec
from app.panels.fit_width import narrow_combo
from app.panels.template_completion import TemplateCompleter
from app.panels.template_preview import PreviewContext, preview_text
from engine.durations import DurationError, format_duration, parse_duration
from engine.templates import TemplateProblem, check_template

NOT_SET = "(not set)"
MAX_MONEY_USD = 1_000_000.0
MAX_INT = 2_000_000_000


def duration_problem(text: str) -> tuple[str | None, str]:
    """(problem, parsed value shown to the user) for a duration the user typed."""
    try:
        seconds = parse_duration(text)
    except DurationError as exc:
        return str(exc), ""
    if seconds < 0:
        return f"{text!r} is negative; durations are zero or more", ""
    return None, f"= {format_duration(seconds)}"


def template_problem(text: str) -> str | None:
    try:
        check_template(text)
    except TemplateProblem as exc:
        return f"template does not parse: {exc}"
    return None


def show_note(note: QLabel, text: str, problem: bool) -> None:
    """Show `text` under a field (hidden when empty), styled as a problem or as a hint."""
    note.setText(text)
    note.setProperty("problem", problem)
    note.style().unpolish(note)
    note.style().polish(note)
    note.setVisible(bool(text))


def shown_problem(note: QLabel) -> str | None:
    """The problem a note shows, if any."""
    return note.text() if note.property("problem") and not note.isHidden() else None


class FieldEditor(QWidget):
    """Base of the editors: a value widget above a one-line note (parsed value or problem)."""

    committed = Signal(object)

    def __init__(self, spec: FieldSpec, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.spec = spec
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(0, 0, 0, 0)
        self._layout.setSpacing(2)
        self.note = QLabel(self)
        self.note.setObjectName("fieldNote")
        self.note.setWordWrap(True)
        self.note.hide()
        self._shown: Any = None
        self._showing = False

    def _finish_layout(self, main: QWidget) -> None:
        self._layout.addWidget(main)
        self._layout.addWidget(self.note)

    def show_value(self, value: Any) -> None:
        """Display `value` (None: the key is absent) without committing."""
        self._showing = True
        try:
            self._shown = value
            self._display(value)
        finally:
            self._showing = False

    def _display(self, value: Any) -> None:
        raise NotImplementedError

    def _emit(self, value: Any) -> None:
        """Commit a user edit, unless it changes nothing."""
        if self._showing:
            return
        if not self.spec.required and value is not None and value == self.spec.default:
            value = None if self._shown is None else value
        if value == self._shown:
            return
        self._shown = value
        self.committed.emit(value)

    def set_note(self, text: str, problem: bool) -> None:
        show_note(self.note, text, problem)

    @property
    def problem(self) -> str | None:
        """The problem the note shows, if any (for tests and tooltips)."""
        return shown_problem(self.note)


class TextEditor(FieldEditor):
    def __init__(self, spec: FieldSpec, parent: QWidget | None = None) -> None:
        super().__init__(spec, parent)
        self.line = QLineEdit(self)
        self.line.setPlaceholderText(str(spec.default) if spec.default not in (None, "") else "")
        self.line.editingFinished.connect(self.commit)
        self._finish_layout(self.line)

    def _display(self, value: Any) -> None:
        self.line.setText("" if value is None else str(value))
        self._check(self.line.text())

    def _check(self, text: str) -> None:
        if self.spec.required and not text:
            self.set_note(f"{self.spec.label} is required", True)
        else:
            self.set_note("", False)

    def _value(self, text: str) -> Any:
        return text if text else None

    def commit(self) -> None:
        text = self.line.text().strip()
        self._check(text)
        self._emit(self._value(text))


class DurationEditor(TextEditor):
    """A duration such as `24h` or `1d 2h`, parsed as the user types."""

    def __init__(self, spec: FieldSpec, parent: QWidget | None = None) -> None:
        super().__init__(spec, parent)
        self.line.setPlaceholderText(str(spec.default) if spec.default is not None else "e.g. 30s, 15m, 24h")
        self.line.textEdited.connect(self._check)

    def _check(self, text: str) -> None:
        if not text:
            super()._check(text)
            return
        problem, parsed = duration_problem(text)
        self.set_note(problem or parsed, problem is not None)

    def _value(self, text: str) -> Any:
        if not text:
            return None
        # Plain numbers stay numbers (seconds), as the file format allows.
        try:
            number = float(text)
        except ValueError:
            return text
        return int(number) if number.is_integer() else number


class TemplateEditor(FieldEditor):
    """Template text with a live syntax check; commits when focus leaves or on Ctrl+Enter."""

    def __init__(self, spec: FieldSpec, parent: QWidget | None = None) -> None:
        super().__init__(spec, parent)
        self.text = CommitOnLeaveTextEdit(self)
        self.text.setTabChangesFocus(True)
        self.text.setPlaceholderText("{{ state.key }} and {{ inputs.name }} are available")
        self.text.setFixedHeight(64)
        self.text.textChanged.connect(self._check)
        self.text.left.connect(self.commit)
        self.completion = TemplateCompleter(self.text)
        self.text.completer = self.completion
        self.preview_context: PreviewContext | None = None
        self.preview = QLabel(self)
        self.preview.setObjectName("templatePreview")
        self.preview.setWordWrap(True)
        self.preview.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.preview.hide()
        self._finish_layout(self.text)
        self._layout.addWidget(self.preview)

    def set_completions(self, words: list[str]) -> None:
        """The `inputs.*` and `state.*` names offered while typing inside `{{ }}`."""
        self.completion.set_words(words)

    def set_preview_context(self, context: PreviewContext | None) -> None:
        """What the live preview evaluates against (None: no preview)."""
        self.preview_context = context
        self._show_preview()

    def _show_preview(self) -> None:
        source = self.text.toPlainText()
        if self.preview_context is None or template_problem(source):
            self.preview.hide()
            return
        text, problem = preview_text(source, self.preview_context)
        self.preview.setText(text)
        self.preview.setProperty("problem", problem)
        self.preview.style().unpolish(self.preview)
        self.preview.style().polish(self.preview)
        self.preview.setVisible(bool(text))

    def _display(self, value: Any) -> None:
        text = "" if value is None else str(value)
        if self.text.toPlainText() != text:
            self.text.setPlainText(text)
        self._check()

    def _check(self) -> None:
        source = self.text.toPlainText()
        if self.spec.required and not source:
            self.set_note(f"{self.spec.label} is required", True)
            return
        problem = template_problem(source)
        self.set_note(problem or "", problem is not None)
        self._show_preview()

    def commit(self) -> None:
        source = self.text.toPlainText()
        if not source and not self.spec.required:
            self._emit(None if self.spec.default in (None, "") else "")
            return
        self._emit(source)


class CommitOnLeaveTextEdit(QPlainTextEdit):
    """Plain text that says `left` when focus leaves it or on Ctrl+Enter (the moment to commit)."""

    left = Signal()
    completer: TemplateCompleter | None = None

    def focusOutEvent(self, event: QFocusEvent) -> None:
        super().focusOutEvent(event)
        if event.reason() != Qt.FocusReason.PopupFocusReason:  # the completion list is not leaving
            self.left.emit()

    def keyPressEvent(self, event: QKeyEvent) -> None:
        choosing = (Qt.Key.Key_Return, Qt.Key.Key_Enter, Qt.Key.Key_Escape, Qt.Key.Key_Tab, Qt.Key.Key_Backtab)
        if self.completer is not None and self.completer.popup_visible() and event.key() in choosing:
            event.ignore()  # the completion list takes it
            return
        control = event.modifiers() & Qt.KeyboardModifier.ControlModifier
        if event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter) and control:
            self.left.emit()
            return
        super().keyPressEvent(event)


class ChoiceEditor(FieldEditor):
    def __init__(self, spec: FieldSpec, parent: QWidget | None = None) -> None:
        super().__init__(spec, parent)
        self.combo = narrow_combo(QComboBox(self))
        if spec.required:
            self.combo.addItem(NOT_SET, None)
        for choice in spec.choices:
            self.combo.addItem(choice, choice)
        self.combo.activated.connect(lambda _index: self._emit(self.combo.currentData()))
        self._finish_layout(self.combo)

    def _display(self, value: Any) -> None:
        shown = value if value is not None else self.spec.default
        index = self.combo.findData(shown)
        if index < 0 and shown is not None:
            self.combo.addItem(f"{shown} (unknown)", shown)
            index = self.combo.count() - 1
        self.combo.setCurrentIndex(max(index, 0))


class BoolEditor(FieldEditor):
    def __init__(self, spec: FieldSpec, parent: QWidget | None = None) -> None:
        super().__init__(spec, parent)
        self.check = QCheckBox(spec.label, self)
        self.check.clicked.connect(lambda checked: self._emit(bool(checked)))
        self._finish_layout(self.check)

    def _display(self, value: Any) -> None:
        self.check.setChecked(bool(value if value is not None else self.spec.default))


class IntEditor(FieldEditor):
    """An integer; optional ones without a default have a "(not set)" value below the minimum."""

    def __init__(self, spec: FieldSpec, parent: QWidget | None = None) -> None:
        super().__init__(spec, parent)
        self.spin = QSpinBox(self)
        self.spin.setKeyboardTracking(False)
        low = int(spec.minimum) if spec.minimum is not None else -MAX_INT
        high = int(spec.maximum) if spec.maximum is not None else MAX_INT
        self.unset_allowed = not spec.required and spec.default is None
        if self.unset_allowed:
            low -= 1
            self.spin.setSpecialValueText(NOT_SET)
        self.spin.setRange(low, high)
        self.spin.setMinimumWidth(80)
        self.spin.setMaximumWidth(160)
        self.spin.valueChanged.connect(self._changed)
        self._finish_layout(self.spin)

    def _display(self, value: Any) -> None:
        shown = value if value is not None else self.spec.default
        self.spin.setValue(int(shown) if isinstance(shown, int | float) else self.spin.minimum())

    def _changed(self, value: int) -> None:
        self._emit(None if self.unset_allowed and value == self.spin.minimum() else value)


class MoneyEditor(FieldEditor):
    """US dollars with a cent-fraction precision (model calls cost fractions of a cent)."""

    def __init__(self, spec: FieldSpec, parent: QWidget | None = None) -> None:
        super().__init__(spec, parent)
        self.spin = QDoubleSpinBox(self)
        self.spin.setKeyboardTracking(False)
        self.spin.setPrefix("$ ")
        self.spin.setDecimals(4)
        self.spin.setSingleStep(0.05)
        self.spin.setRange(spec.minimum or 0.0, MAX_MONEY_USD)
        self.spin.setMaximumWidth(160)
        self.spin.valueChanged.connect(self._changed)
        self._finish_layout(self.spin)

    def _display(self, value: Any) -> None:
        ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        self.spin.setValue(float(value) if ok else 0.0)
        self.set_note("" if ok or value is None else f"{value!r} is not an amount in USD", not ok and value is not None)

    def _changed(self, value: float) -> None:
        rounded = round(value, 4)
        self._emit(int(rounded) if rounded.is_integer() else rounded)


class ApproversEditor(TextEditor):
    """`any`, or a comma-separated list of approver names."""

    def __init__(self, spec: FieldSpec, parent: QWidget | None = None) -> None:
        super().__init__(spec, parent)
        self.line.setPlaceholderText("any (or: alice, bob)")

    def _display(self, value: Any) -> None:
        if isinstance(value, list):
            self.line.setText(", ".join(value))
        else:
            self.line.setText("" if value in (None, "any") else str(value))

    def _value(self, text: str) -> Any:
        names = [name.strip() for name in text.split(",") if name.strip()]
        return names if names and names != ["any"] else "any"


class NodeRefEditor(FieldEditor):
    """The id of another node of one type, picked from the flow's nodes of that type."""

    def __init__(self, spec: FieldSpec, parent: QWidget | None = None) -> None:
        super().__init__(spec, parent)
        self.combo = narrow_combo(QComboBox(self))
        self.combo.activated.connect(lambda _index: self._emit(self.combo.currentData()))
        self._finish_layout(self.combo)

    def set_candidates(self, candidates: list[tuple[str, str]]) -> None:
        """(node id, title) pairs the user may pick."""
        self._candidates = candidates

    def _display(self, value: Any) -> None:
        self.combo.clear()
        self.combo.addItem(NOT_SET, None)
        for node_id, title in getattr(self, "_candidates", []):
            self.combo.addItem(f"{title} ({node_id})" if title and title != node_id else node_id, node_id)
        index = self.combo.findData(value)
        if index < 0 and value is not None:
            self.combo.addItem(f"{value} (missing)", value)
            index = self.combo.count() - 1
            self.set_note(f"no {self.spec.ref_type} node {value!r} in this flow; pick one", True)
        else:
            self.set_note("" if value is not None or not self.spec.required else f"pick the {self.spec.ref_type} node",
                          value is None and self.spec.required)
        self.combo.setCurrentIndex(max(index, 0))


class FlowRefEditor(FieldEditor):
    """The id of a published flow: typed, or picked from the flows the engine has published."""

    def __init__(self, spec: FieldSpec, parent: QWidget | None = None) -> None:
        super().__init__(spec, parent)
        self.combo = narrow_combo(QComboBox(self))
        self.combo.setEditable(True)
        self.combo.setInsertPolicy(QComboBox.InsertPolicy.NoInsert)
        line = self.combo.lineEdit()
        assert line is not None
        line.setPlaceholderText("id of a published flow")
        line.editingFinished.connect(self.commit)
        self.combo.activated.connect(lambda _index: self.commit())
        self._candidates: list[str] = []
        self._finish_layout(self.combo)

    def set_candidates(self, flow_ids: list[str]) -> None:
        """The published flow ids the user may pick."""
        self._candidates = list(flow_ids)

    def _display(self, value: Any) -> None:
        self.combo.clear()
        self.combo.addItems(self._candidates)
        self.combo.setEditText("" if value is None else str(value))
        self._check(self.combo.currentText().strip())

    def _check(self, text: str) -> None:
        if not text:
            self.set_note(f"{self.spec.label} is required: type or pick a published flow", self.spec.required)
        elif self._candidates and text not in self._candidates:
            self.set_note(f'no published flow "{text}" yet: publishing refuses the call until it is', False)
        else:
            self.set_note("", False)

    def commit(self) -> None:
        text = self.combo.currentText().strip()
        self._check(text)
        self._emit(text or None)


class TableEditor(FieldEditor):
    """Rows of two columns with Add/Remove; subclasses say how rows map to the JSON value."""

    headers: tuple[str, str] = ("Key", "Value")

    def __init__(self, spec: FieldSpec, parent: QWidget | None = None) -> None:
        super().__init__(spec, parent)
        box = QWidget(self)
        column = QVBoxLayout(box)
        column.setContentsMargins(0, 0, 0, 0)
        self.table = QTableWidget(0, 2, box)
        self.table.setHorizontalHeaderLabels(list(self.headers))
        self.table.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        self.table.horizontalHeader().setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        self.table.verticalHeader().hide()
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setMinimumHeight(90)
        self.table.setMaximumHeight(160)
        self.table.itemChanged.connect(self._item_changed)
        self._committing_cell = False
        self._pending_display: tuple[Any] | None = None
        buttons = QHBoxLayout()
        self.add_button = QPushButton("Add", box)
        self.remove_button = QPushButton("Remove", box)
        self.add_button.setToolTip(f"Add a row to {spec.label}")
        self.remove_button.setToolTip("Remove the selected row")
        self.add_button.clicked.connect(self.add_row)
        self.remove_button.clicked.connect(self.remove_selected_row)
        buttons.addWidget(self.add_button)
        buttons.addWidget(self.remove_button)
        buttons.addStretch(1)
        column.addWidget(self.table)
        column.addLayout(buttons)
        self._finish_layout(box)

    # rows <-> value
    def rows_of(self, value: Any) -> list[tuple[str, str]]:
        raise NotImplementedError

    def value_of(self, rows: list[tuple[str, str]]) -> Any:
        raise NotImplementedError

    def new_row(self) -> tuple[str, str]:
        return (self._unique_key("key"), "")

    def cell_problem(self, column: int, text: str) -> str | None:
        return None

    def _display(self, value: Any) -> None:
        if self.rows() == self.rows_of(value):
            # The table shows this already (the model echoing the table's own edit).
            self._check_all()
            return
        if self._committing_cell:
            # Rebuilding inside a cell's commit would delete the editor Qt is still committing from.
            self._pending_display = (value,)
            QTimer.singleShot(0, self._display_pending)
            return
        self.table.blockSignals(True)
        try:
            self.table.setRowCount(0)
            for key, cell in self.rows_of(value):
                self._append(key, cell)
        finally:
            self.table.blockSignals(False)
        self._check_all()

    def _append(self, key: str, cell: str) -> None:
        row = self.table.rowCount()
        self.table.insertRow(row)
        self.table.setItem(row, 0, QTableWidgetItem(key))
        self._set_value_cell(row, cell)

    def _set_value_cell(self, row: int, cell: str) -> None:
        self.table.setItem(row, 1, QTableWidgetItem(cell))

    def rows(self) -> list[tuple[str, str]]:
        found = []
        for row in range(self.table.rowCount()):
            key_item = self.table.item(row, 0)
            found.append((key_item.text().strip() if key_item else "", self._cell_text(row)))
        return found

    def _cell_text(self, row: int) -> str:
        item = self.table.item(row, 1)
        return item.text() if item else ""

    def _unique_key(self, stem: str) -> str:
        taken = {key for key, _ in self.rows()}
        index = 1
        while f"{stem}{index}" in taken:
            index += 1
        return f"{stem}{index}"

    def add_row(self) -> None:
        key, cell = self.new_row()
        self.table.blockSignals(True)
        self._append(key, cell)
        self.table.blockSignals(False)
        self.commit()

    def remove_selected_row(self) -> None:
        row = self.table.currentRow()
        if row < 0:
            row = self.table.rowCount() - 1
        if row < 0:
            return
        self.table.removeRow(row)
        self.commit()

    def _item_changed(self, _item: QTableWidgetItem) -> None:
        self._committing_cell = True
        try:
            self.commit()
        finally:
            self._committing_cell = False

    def _display_pending(self) -> None:
        pending, self._pending_display = self._pending_display, None
        if pending is not None:
            self._display(pending[0])

    def _check_all(self) -> None:
        problems = []
        self.table.blockSignals(True)
        keys_seen: set[str] = set()
        for row, (key, cell) in enumerate(self.rows()):
            for column, text in ((0, key), (1, cell)):
                problem = self.cell_problem(column, text)
                if column == 0 and not problem and key in keys_seen:
                    problem = f"{key!r} appears twice; each {self.headers[0].lower()} must be unique"
                item = self.table.item(row, column)
                if item is not None:
                    item.setToolTip(problem or "")
                    item.setForeground(Qt.GlobalColor.red if problem else self.palette().text())
                if problem:
                    problems.append(f"row {row + 1}: {problem}")
            keys_seen.add(key)
        self.table.blockSignals(False)
        self.set_note("; ".join(problems), bool(problems))

    def commit(self) -> None:
        self._check_all()
        self._emit(self.value_of(self.rows()))


class MappingEditor(TableEditor):
    """dict[str, X]: set values, HTTP headers, join reduce rules."""

    def __init__(self, spec: FieldSpec, parent: QWidget | None = None) -> None:
        self.headers = ("Key", "Value" if spec.value_kind != "choice" else "Reduce")
        super().__init__(spec, parent)

    def rows_of(self, value: Any) -> list[tuple[str, str]]:
        if not isinstance(value, dict):
            return []
        return [(str(k), v if isinstance(v, str) else json.dumps(v)) for k, v in value.items()]

    def value_of(self, rows: list[tuple[str, str]]) -> Any:
        value = {key: cell for key, cell in rows if key}
        if not value and not self.spec.required:
            return None
        return value

    def new_row(self) -> tuple[str, str]:
        return (self._unique_key("key"), self.spec.choices[0] if self.spec.choices else "")

    def _set_value_cell(self, row: int, cell: str) -> None:
        if self.spec.value_kind != "choice":
            super()._set_value_cell(row, cell)
            return
        combo = QComboBox(self.table)
        combo.addItems(list(self.spec.choices))
        if cell not in self.spec.choices:
            combo.addItem(cell)
        combo.setCurrentText(cell)
        combo.activated.connect(lambda _index: self.commit())
        self.table.setCellWidget(row, 1, combo)

    def _cell_text(self, row: int) -> str:
        combo = self.table.cellWidget(row, 1)
        if isinstance(combo, QComboBox):
            return combo.currentText()
        return super()._cell_text(row)

    def cell_problem(self, column: int, text: str) -> str | None:
        if column == 0 and not text:
            return "empty key"
        if column == 1 and self.spec.value_kind == "template":
            return template_problem(text)
        return None


class BranchesEditor(TableEditor):
    """Router branches: an output port name and the condition that sends a run there."""

    headers = ("Port", "When")

    def rows_of(self, value: Any) -> list[tuple[str, str]]:
        if not isinstance(value, list):
            return []
        return [
            (str(b.get("port", "")), str(b.get("when", ""))) for b in value if isinstance(b, dict)
        ]

    def value_of(self, rows: list[tuple[str, str]]) -> Any:
        return [{"port": port, "when": when} for port, when in rows]

    def new_row(self) -> tuple[str, str]:
        return (self._unique_key("branch"), "{{ true }}")

    def cell_problem(self, column: int, text: str) -> str | None:
        if column == 0:
            if not text:
                return "empty port name"
            if text == "default":
                return "'default' is the port taken when no branch matches; name this branch differently"
            return None
        return template_problem(text)


EDITOR_CLASSES: dict[str, Callable[[FieldSpec, QWidget | None], FieldEditor]] = {
    "text": TextEditor,
    "duration": DurationEditor,
    "money": MoneyEditor,
    "template": TemplateEditor,
    "choice": ChoiceEditor,
    "bool": BoolEditor,
    "int": IntEditor,
    "mapping": MappingEditor,
    "branches": BranchesEditor,
    "approvers": ApproversEditor,
    "node_ref": NodeRefEditor,
    "flow_ref": FlowRefEditor,
}


def editor_for(spec: FieldSpec, parent: QWidget | None = None) -> FieldEditor:
    """The editor widget of a field's kind."""
    if spec.kind == "code":
        from app.panels.code_editor import CodeEditor  # it builds on FieldEditor, defined here

        editor: FieldEditor = CodeEditor(spec, parent)
    else:
        editor = EDITOR_CLASSES[spec.kind](spec, parent)
    editor.setObjectName(f"field_{spec.key}")
    return editor

