"""The flow's declared run inputs, one card each: name, type, required, secret, default, description.

Every change goes through the document's edit methods (undoable commands). Cards are updated in place while
the inputs keep their count, so editing one field does not rebuild the editor under the user's cursor.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, get_args

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.panels.field_editors import show_note, shown_problem
from app.panels.fit_width import narrow_combo
from canvas.flow_header import has_default, input_name_problem, input_spec
from engine.flow import InputSpec, JsonType
from engine.runtime.inputs import json_type_of

if TYPE_CHECKING:
    from canvas.document import FlowDocument

INPUT_TYPES: tuple[str, ...] = get_args(JsonType)
NUMBER_TYPES = ("integer", "number")


def default_text(spec: InputSpec) -> str:
    """How a default is shown for editing: strings as they are, everything else as JSON."""
    if not has_default(spec):
        return ""
    value = spec.default
    return value if isinstance(value, str) and spec.type in ("string", "any") else json.dumps(value)


def parse_default(text: str, type_: str) -> tuple[bool, Any, str | None]:
    """(has a default, the value, problem) for the text typed into the Default field of an input of `type_`."""
    if not text:
        return False, None, None
    if type_ == "string":
        return True, text, None
    try:
        value = json.loads(text)
    except ValueError:
        if type_ == "any":
            return True, text, None
        hint = {"boolean": "true or false", "integer": "a whole number such as 3", "number": "a number such as 2.5",
                "object": 'JSON such as {"id": 1}', "array": "a JSON list such as [1, 2]", "null": "null"}[type_]
        return False, None, f"the default is not {hint}"
    return True, value, default_problem(value, type_)


def default_problem(value: Any, type_: str) -> str | None:
    """Why `value` cannot be the default of an input of `type_`, or None."""
    actual = json_type_of(value)
    fits = (type_ == "any" or actual == type_ or (type_ == "number" and actual == "integer")
            or (type_ == "integer" and actual == "number" and float(value).is_integer()))
    return None if fits else f"the default is {actual}, not {type_}"


class InputCard(QFrame):
    """One input. Signals carry the input's name as it was when the card last showed it."""

    renamed = Signal(str, str)
    changed = Signal(str, object)
    moved = Signal(str, int)
    removed = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("inputCard")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.input_name = ""
        self.spec = InputSpec()
        grid = QGridLayout(self)
        grid.setContentsMargins(6, 6, 6, 6)
        grid.setHorizontalSpacing(6)
        grid.setVerticalSpacing(4)

        self.name_edit = QLineEdit(self)
        self.name_edit.setObjectName("input_name")
        self.name_edit.setPlaceholderText("name")
        # Room for a typical name: a narrow dock squeezes the description, not the name to its last letters.
        self.name_edit.setMinimumWidth(self.name_edit.fontMetrics().horizontalAdvance("customer_id") + 12)
        self.name_edit.setToolTip("Templates read it as {{ inputs.<name> }}")
        self.name_edit.editingFinished.connect(self._commit_name)
        self.type_combo = narrow_combo(QComboBox(self), 5)
        self.type_combo.setObjectName("input_type")
        self.type_combo.addItems(list(INPUT_TYPES))
        self.type_combo.setToolTip("The JSON type a run's value must have")
        self.type_combo.activated.connect(lambda _index: self._commit_spec())
        self.up_button = self._tool("▲", "input_up", "Move this input up", lambda: self.moved.emit(self.input_name, -1))
        self.down_button = self._tool("▼", "input_down", "Move this input down",
                                      lambda: self.moved.emit(self.input_name, 1))
        self.remove_button = self._tool("✕", "input_remove", "Remove this input",
                                        lambda: self.removed.emit(self.input_name))
        top = QHBoxLayout()
        top.setSpacing(4)
        top.addWidget(self.name_edit, 1)
        for button in (self.up_button, self.down_button, self.remove_button):
            top.addWidget(button)
        grid.addLayout(top, 0, 0, 1, 2)

        self.required_check = QCheckBox("Required", self)
        self.required_check.setObjectName("input_required")
        self.required_check.setToolTip("A run cannot start without it (unless it has a default)")
        self.required_check.clicked.connect(lambda _checked: self._commit_spec())
        self.secret_check = QCheckBox("Secret", self)
        self.secret_check.setObjectName("input_secret")
        self.secret_check.setToolTip("Shown as *** in events, run history, logs and the app")
        self.secret_check.clicked.connect(lambda _checked: self._commit_spec())
        # The type sits with the checks, so the name keeps room beside the buttons in a narrow dock.
        checks = QHBoxLayout()
        checks.addWidget(self.type_combo)
        checks.addWidget(self.required_check)
        checks.addWidget(self.secret_check)
        checks.addStretch(1)
        grid.addLayout(checks, 1, 0, 1, 2)

        self.default_edit = QLineEdit(self)
        self.default_edit.setObjectName("input_default")
        self.default_edit.setPlaceholderText("no default")
        self.default_edit.editingFinished.connect(self._commit_spec)
        self.description_edit = QLineEdit(self)
        self.description_edit.setObjectName("input_description")
        self.description_edit.setPlaceholderText("shown in the Run form")
        self.description_edit.editingFinished.connect(self._commit_spec)
        grid.addWidget(QLabel("Default", self), 2, 0)
        grid.addWidget(self.default_edit, 2, 1)
        grid.addWidget(QLabel("Description", self), 3, 0)
        grid.addWidget(self.description_edit, 3, 1)
        self.note = QLabel(self)
        self.note.setObjectName("fieldNote")
        self.note.setWordWrap(True)
        self.note.hide()
        grid.addWidget(self.note, 4, 0, 1, 2)
        grid.setColumnStretch(1, 1)

    def _tool(self, text: str, name: str, tip: str, slot: Any) -> QToolButton:
        button = QToolButton(self)
        button.setObjectName(name)
        button.setText(text)
        button.setToolTip(tip)
        button.setAccessibleName(tip)
        button.setAutoRaise(True)
        button.clicked.connect(slot)
        return button

    def show_input(self, name: str, spec: InputSpec, first: bool, last: bool) -> None:
        """Display one input (never emits)."""
        self.input_name, self.spec = name, spec
        widgets = (self.name_edit, self.type_combo, self.required_check, self.secret_check, self.default_edit,
                   self.description_edit)
        for widget in widgets:
            widget.blockSignals(True)
        try:
            if self.name_edit.text() != name:
                self.name_edit.setText(name)
            self.type_combo.setCurrentText(spec.type)
            self.required_check.setChecked(spec.required)
            self.secret_check.setChecked(spec.secret)
            self.default_edit.setEchoMode(QLineEdit.EchoMode.Password if spec.secret else QLineEdit.EchoMode.Normal)
            if self.default_edit.text() != default_text(spec):
                self.default_edit.setText(default_text(spec))
            if self.description_edit.text() != (spec.description or ""):
                self.description_edit.setText(spec.description or "")
        finally:
            for widget in widgets:
                widget.blockSignals(False)
        self.up_button.setEnabled(not first)
        self.down_button.setEnabled(not last)
        problem = default_problem(spec.default, spec.type) if has_default(spec) else None
        self.set_note(problem or "", problem is not None)

    def set_note(self, text: str, problem: bool) -> None:
        show_note(self.note, text, problem)

    @property
    def problem(self) -> str | None:
        return shown_problem(self.note)

    def _commit_name(self) -> None:
        new = self.name_edit.text().strip()
        if new != self.input_name:
            self.renamed.emit(self.input_name, new)

    def _commit_spec(self) -> None:
        type_ = self.type_combo.currentText()
        typed = self.default_edit.text().strip()
        if typed == default_text(self.spec):  # untouched: keep the value exactly as the file has it
            given, value, problem = has_default(self.spec), self.spec.default, None
        else:
            given, value, problem = parse_default(typed, type_)
        if problem is not None:
            self.set_note(problem, True)
            return
        description_text = self.description_edit.text().strip()
        description = (self.spec.description if description_text == (self.spec.description or "")
                       else description_text or None)
        spec = input_spec(type_, self.required_check.isChecked(), self.secret_check.isChecked(), description,
                          value, given)
        self.changed.emit(self.input_name, spec)


class InputsEditor(QWidget):
    """The cards and an Add button; problems a card cannot commit show on that card."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("inputsEditor")
        self.document: FlowDocument | None = None
        self.cards: list[InputCard] = []
        self._column = QVBoxLayout(self)
        self._column.setContentsMargins(0, 0, 0, 0)
        self._column.setSpacing(6)
        self.empty_label = QLabel("No inputs: runs start with nothing. Add one for each value a run is given.", self)
        self.empty_label.setObjectName("fieldNote")
        self.empty_label.setWordWrap(True)
        self._column.addWidget(self.empty_label)
        self.add_button = QPushButton("Add input", self)
        self.add_button.setObjectName("input_add")
        self.add_button.setToolTip("Declare a value every run is given (the Run form asks for it)")
        self.add_button.clicked.connect(self.add_input)
        row = QHBoxLayout()
        row.addWidget(self.add_button)
        row.addStretch(1)
        self._column.addLayout(row)

    def set_document(self, document: FlowDocument | None) -> None:
        self.document = document
        self.refresh()

    def card(self, name: str) -> InputCard:
        for card in self.cards:
            if card.input_name == name:
                return card
        raise KeyError(f"no input card {name!r}")

    def refresh(self) -> None:
        inputs = list(self.document.flow_ref().inputs.items()) if self.document is not None else []
        while len(self.cards) > len(inputs):
            card = self.cards.pop()
            card.setParent(None)
            card.deleteLater()
        while len(self.cards) < len(inputs):
            card = InputCard(self)
            card.renamed.connect(self._rename)
            card.changed.connect(self._change)
            card.moved.connect(self._move)
            card.removed.connect(self._remove)
            self._column.insertWidget(len(self.cards), card)
            self.cards.append(card)
        for index, (card, (name, spec)) in enumerate(zip(self.cards, inputs, strict=True)):
            card.show_input(name, spec, index == 0, index == len(inputs) - 1)
        self.empty_label.setVisible(not inputs)

    def add_input(self) -> None:
        if self.document is None:
            return
        name = self.document.add_input()
        self.card(name).name_edit.setFocus()
        self.card(name).name_edit.selectAll()

    def _rename(self, old: str, new: str) -> None:
        if self.document is None:
            return
        problem = input_name_problem(new, self.document.flow_ref().inputs, current=old)
        if problem is not None:
            self.card(old).set_note(f"Not renamed: {problem}", True)
            return
        self.document.rename_input(old, new)

    def _change(self, name: str, spec: InputSpec) -> None:
        if self.document is not None:
            self.document.set_input(name, spec)

    def _move(self, name: str, offset: int) -> None:
        if self.document is not None:
            self.document.move_input(name, offset)
            self.card(name).name_edit.setFocus()

    def _remove(self, name: str) -> None:
        if self.document is not None:
            self.document.remove_input(name)
