"""The Run dialog: a form generated from the flow's declared inputs (secret ones masked)."""

from __future__ import annotations

import json
from typing import Any

from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFormLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from engine.flow import Flow, InputSpec


class InputError(ValueError):
    """An input the user gave that does not fit its declared type."""


class RunInputsDialog(QDialog):
    def __init__(self, flow: Flow, version: int | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.flow = flow
        self.setWindowTitle(f"Run {flow.name or flow.id}" + (f" v{version}" if version else ""))
        self.setMinimumWidth(440)
        self.widgets: dict[str, QWidget] = {}
        form = QFormLayout()
        for name, spec in flow.inputs.items():
            widget = self._widget_for(name, spec)
            widget.setObjectName(f"input_{name}")
            self.widgets[name] = widget
            form.addRow(name + (" *" if spec.required else ""), widget)
            if spec.description:
                widget.setToolTip(spec.description)
                note = QLabel(spec.description, self)
                note.setObjectName("fieldNote")
                note.setWordWrap(True)
                form.addRow("", note)
        self.problem = QLabel(self)
        self.problem.setObjectName("fieldNote")
        self.problem.setProperty("problem", True)
        self.problem.setWordWrap(True)
        self.problem.hide()
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel, self)
        start = buttons.button(QDialogButtonBox.StandardButton.Ok)
        start.setText("Start run")
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        if not flow.inputs:
            layout.addWidget(QLabel("This flow declares no inputs (declare them in Flow ▸ Properties)."))
        layout.addLayout(form)
        layout.addWidget(self.problem)
        layout.addWidget(buttons)

    def _widget_for(self, name: str, spec: InputSpec) -> QWidget:
        default = spec.default
        if spec.type == "boolean":
            check = QCheckBox()
            check.setChecked(bool(default))
            return check
        if spec.type == "integer":
            spin = QSpinBox()
            spin.setRange(-2_000_000_000, 2_000_000_000)
            spin.setValue(int(default) if isinstance(default, int) else 0)
            return spin
        if spec.type == "number":
            number = QDoubleSpinBox()
            number.setRange(-1e12, 1e12)
            number.setDecimals(6)
            number.setValue(float(default) if isinstance(default, int | float) else 0.0)
            return number
        if spec.type in ("object", "array", "any"):
            text = QPlainTextEdit()
            text.setFixedHeight(80)
            text.setPlaceholderText("JSON, e.g. {\"id\": 42, \"body\": \"…\"}" if spec.type != "array" else "JSON list")
            if default is not None:
                text.setPlainText(json.dumps(default, indent=2))
            return text
        line = QLineEdit()
        if spec.secret:
            line.setEchoMode(QLineEdit.EchoMode.Password)
            line.setPlaceholderText("secret: kept out of logs and run history")
        if isinstance(default, str) and not spec.secret:
            line.setText(default)
        return line

    def values(self) -> dict[str, object]:
        """The inputs as typed JSON values; raises InputError naming the input and the fix."""
        values: dict[str, object] = {}
        for name, spec in self.flow.inputs.items():
            widget = self.widgets[name]
            value: Any
            if isinstance(widget, QCheckBox):
                value = widget.isChecked()
            elif isinstance(widget, QSpinBox | QDoubleSpinBox):
                value = widget.value()
            elif isinstance(widget, QPlainTextEdit):
                text = widget.toPlainText().strip()
                if not text:
                    value = None
                else:
                    try:
                        value = json.loads(text)
                    except ValueError as exc:
                        raise InputError(f"input {name!r} is not JSON ({exc.args[0]}); write e.g. "
                                         '{"id": 1}') from None
                    if spec.type == "object" and not isinstance(value, dict):
                        raise InputError(f"input {name!r} must be a JSON object {{…}}")
                    if spec.type == "array" and not isinstance(value, list):
                        raise InputError(f"input {name!r} must be a JSON list […]")
            else:
                assert isinstance(widget, QLineEdit)
                value = widget.text() or None
            if value is None:
                if spec.required:
                    raise InputError(f"input {name!r} is required; fill it in")
                continue
            values[name] = value
        return values

    def accept(self) -> None:
        try:
            self.values()
        except InputError as exc:
            self.problem.setText(str(exc))
            self.problem.show()
            return
        super().accept()
