"""The confirmation of Rerun from here: which version (the original run's, or the current published one when
nothing upstream of the node differs), what is reused, and which non-idempotent nodes that already had
their effect run again. A refused version names the differing nodes and offers the original instead."""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtWidgets import (
    QButtonGroup,
    QDialog,
    QDialogButtonBox,
    QLabel,
    QPushButton,
    QRadioButton,
    QVBoxLayout,
    QWidget,
)

from app.engine_messages import without_cli_hints
from app.readable import short_run_id
from app.theme import status_colour
from engine.read_models import ErrorDetail, RerunStarted


@dataclass(frozen=True)
class RerunOption:
    """One version a rerun may use: its dry run, or why it is refused."""

    choice: str
    """`original` or `current`: what the engine is asked for."""
    label: str
    preview: RerunStarted | None = None
    refusal: ErrorDetail | None = None


def _html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


class RerunDialog(QDialog):
    """`chosen()` is the option to rerun with once the dialog is accepted."""

    def __init__(self, run_id: str, node: str, options: list[RerunOption], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("rerunDialog")
        self.setWindowTitle("Rerun from here")
        self.options = options
        heading = QLabel(f"Rerun run <b>{short_run_id(run_id)}</b> from node <b>{_html(node)}</b>: the steps before "
                         "it are reused as recorded, never executed again; it and what follows run again.")
        heading.setToolTip(f"Run {run_id}")
        heading.setWordWrap(True)
        self.group = QButtonGroup(self)
        layout = QVBoxLayout(self)
        layout.addWidget(heading)
        self.radios: list[QRadioButton] = []
        for index, option in enumerate(options):
            radio = QRadioButton(option.label, self)
            radio.setObjectName(f"rerunVersion_{option.choice}")
            radio.setEnabled(option.preview is not None)
            self.group.addButton(radio, index)
            self.radios.append(radio)
            layout.addWidget(radio)
            if option.refusal is not None:
                why = QLabel(f"<span style='color:{status_colour('failed')}'>"
                             f"{_html(without_cli_hints(option.refusal.message))}</span>", self)
                why.setObjectName(f"rerunRefusal_{option.choice}")
                why.setWordWrap(True)
                layout.addWidget(why)
        self.reused = QLabel(self)
        self.reused.setObjectName("rerunReused")
        self.reused.setWordWrap(True)
        self.effects = QLabel(self)
        self.effects.setObjectName("rerunEffects")
        self.effects.setWordWrap(True)
        layout.addWidget(self.reused)
        layout.addWidget(self.effects)
        buttons = QDialogButtonBox(self)
        self.confirm: QPushButton = buttons.addButton("Rerun", QDialogButtonBox.ButtonRole.AcceptRole)
        self.confirm.setObjectName("rerunConfirmButton")
        buttons.addButton(QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout.addWidget(buttons)
        self.group.idToggled.connect(lambda _id, on: self._show_chosen() if on else None)
        first = next((radio for radio in self.radios if radio.isEnabled()), None)
        if first is not None:
            first.setChecked(True)
        self._show_chosen()
        self.resize(560, self.sizeHint().height())

    def chosen(self) -> RerunOption | None:
        index = self.group.checkedId()
        return self.options[index] if 0 <= index < len(self.options) else None

    def _show_chosen(self) -> None:
        option = self.chosen()
        preview = option.preview if option is not None else None
        self.confirm.setEnabled(preview is not None)
        if preview is None:
            self.reused.setText("No version can be rerun from this node.")
            self.effects.setText("")
            return
        reused = ", ".join(preview.reused_steps) or "nothing (it starts at the trigger)"
        self.reused.setText(f"Reused, not executed again: {_html(reused)}.")
        if preview.repeated_effects:
            names = ", ".join(f"<b>{_html(node)}</b>" for node in preview.repeated_effects)
            self.effects.setText(f"<span style='color:{status_colour('failed')}'>⚠ Not idempotent and already had "
                                 f"their effect in the original run — the rerun executes them again: {names}.</span>")
        else:
            self.effects.setText("Nothing that runs again had a non-idempotent effect in the original run.")
