"""The Generate API key dialog: the key's name and the rights it gets (`engine.approvals.keys.RIGHTS`)."""

from __future__ import annotations

from collections.abc import Iterable

from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QGroupBox,
    QLabel,
    QLineEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from engine.approvals.keys import RIGHTS, rights_named

RIGHT_DESCRIPTIONS: dict[str, str] = {
    "read": "see runs, flows, approvals and live streams",
    "start": "start, cancel and rerun runs",
    "publish": "publish flows",
    "decide": "decide approvals",
}
"""What a key with the right may do through the HTTP API, one line each (the routes: docs/api.md)."""


def rights_text(scopes: Iterable[str]) -> str:
    """A key's rights by their short names, in the API's order: `read, decide`."""
    return ", ".join(rights_named(scopes)) or "none"


class NewKeyDialog(QDialog):
    """Name a new key and check its rights; OK only with a name and at least one right."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("newKeyDialog")
        self.setWindowTitle("New API key")
        self.setMinimumWidth(440)
        self.name_edit = QLineEdit(self)
        self.name_edit.setObjectName("keyNameEdit")
        self.name_edit.setPlaceholderText("who or what uses it, e.g. approvals-bot")
        rights = QGroupBox("Rights", self)
        rights_layout = QVBoxLayout(rights)
        self.right_boxes: dict[str, QCheckBox] = {}
        for right, scope in RIGHTS.items():
            box = QCheckBox(f"{right} — {RIGHT_DESCRIPTIONS.get(right, scope)}", rights)
            box.setObjectName(f"right_{right}")
            box.setToolTip(f"Stored with the key as {scope}")
            box.setChecked(True)
            box.toggled.connect(self._update_ok)
            rights_layout.addWidget(box)
            self.right_boxes[right] = box
        self.problem = QLabel(self)
        self.problem.setObjectName("fieldNote")
        self.problem.setProperty("problem", True)
        self.problem.setWordWrap(True)
        self.problem.setMinimumHeight(self.problem.fontMetrics().height())  # the rights stay put as it empties
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel, self)
        ok = buttons.button(QDialogButtonBox.StandardButton.Ok)
        assert isinstance(ok, QPushButton)
        ok.setText("Create key")
        self.ok_button = ok
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        form = QFormLayout()
        form.addRow("Name", self.name_edit)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(rights)
        layout.addWidget(QLabel("The key works for the HTTP API and the CLI's --key; it is shown in full once."))
        layout.addWidget(self.problem)
        layout.addWidget(buttons)
        self.name_edit.textChanged.connect(self._update_ok)
        self._update_ok()

    def key_name(self) -> str:
        return self.name_edit.text().strip()

    def scopes(self) -> tuple[str, ...]:
        """The scopes of the checked rights, in the API's order."""
        return tuple(RIGHTS[right] for right, box in self.right_boxes.items() if box.isChecked())

    def _update_ok(self) -> None:
        problem = ("Name the key." if not self.key_name() else
                   "Check at least one right." if not self.scopes() else "")
        self.ok_button.setEnabled(not problem)
        self.problem.setText(problem)
