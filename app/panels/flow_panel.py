"""The flow panel: the flow's own properties, shown in the properties dock when no node is selected.

Name (the id follows it as a slug until set by hand), id, description, enabled, the declared inputs and the
limits. Every change is a document command, so it is undoable and the panel redraws from the document.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from PySide6.QtWidgets import (
    QCheckBox,
    QFormLayout,
    QGroupBox,
    QLabel,
    QLineEdit,
    QVBoxLayout,
    QWidget,
)

from app.field_kinds import FieldSpec
from app.panels.field_editors import CommitOnLeaveTextEdit, DurationEditor
from app.panels.fit_width import FitWidthScrollArea, fit_form
from app.panels.inputs_editor import InputsEditor
from canvas.flow_header import SETTING_KEYS, flow_id_problem
from engine.validation import DEFAULT_LIMITS

if TYPE_CHECKING:
    from canvas.document import FlowDocument

SETTING_LABELS = {"max_delay": "Longest delay", "max_wait": "Longest total wait",
                  "suspended_step_timeout": "Suspended step timeout"}
SETTING_TIPS = {
    "max_delay": "The longest queue delay or approval timeout one node may ask for",
    "max_wait": "How long one run may wait in all, counted from its start",
    "suspended_step_timeout": "A step suspended (a model call waiting on its provider) longer than this fails",
}


@dataclass(frozen=True)
class TakenIds:
    """Flow ids in use elsewhere: by other open drafts (id -> tab name) and by published flows."""

    open: Mapping[str, str] = field(default_factory=dict)
    published: frozenset[str] = frozenset()

    def all(self) -> set[str]:
        return set(self.open) | set(self.published)


class FlowPanel(FitWidthScrollArea):
    """Edits the current document's own properties."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("flowPanel")
        self.document: FlowDocument | None = None
        self.taken_ids: Callable[[], TakenIds] = TakenIds
        """Ids of other open and published flows; the window supplies it."""

        page = self.page = QWidget(self)
        page.setObjectName("flowPage")
        column = QVBoxLayout(page)
        column.setContentsMargins(8, 8, 8, 8)
        column.setSpacing(10)
        self.header = QLabel(page)
        self.header.setObjectName("propertiesHeader")
        self.header.setWordWrap(True)
        column.addWidget(self.header)
        hint = QLabel("The flow's own properties. Select a node to edit the node instead.", page)
        hint.setObjectName("fieldNote")
        hint.setWordWrap(True)
        column.addWidget(hint)

        basics = fit_form(QFormLayout())
        self.name_edit = QLineEdit(page)
        self.name_edit.setObjectName("flow_name")
        self.name_edit.setPlaceholderText("e.g. Refund approvals")
        self.name_edit.editingFinished.connect(self._commit_name)
        self.id_edit = QLineEdit(page)
        self.id_edit.setObjectName("flow_id")
        self.id_edit.setToolTip("Versions, runs and triggers are kept under the id; it does not change on rename "
                                "once you set it")
        self.id_edit.editingFinished.connect(self._commit_id)
        self.id_note = QLabel(page)
        self.id_note.setObjectName("fieldNote")
        self.id_note.setWordWrap(True)
        id_box = QWidget(page)
        id_column = QVBoxLayout(id_box)
        id_column.setContentsMargins(0, 0, 0, 0)
        id_column.setSpacing(2)
        id_column.addWidget(self.id_edit)
        id_column.addWidget(self.id_note)
        self.description_edit = CommitOnLeaveTextEdit(page)
        self.description_edit.setObjectName("flow_description")
        self.description_edit.setTabChangesFocus(True)
        self.description_edit.setPlaceholderText("What the flow does, for whoever opens it next")
        self.description_edit.setFixedHeight(56)
        self.description_edit.left.connect(self._commit_description)
        self.enabled_check = QCheckBox("Enabled: runs may start", page)
        self.enabled_check.setObjectName("flow_enabled")
        self.enabled_check.setToolTip("A disabled flow refuses new runs, from Run and from its triggers")
        self.enabled_check.clicked.connect(self._commit_enabled)
        basics.addRow("Name", self.name_edit)
        basics.addRow("ID", id_box)
        basics.addRow("Description", self.description_edit)
        basics.addRow("", self.enabled_check)
        column.addLayout(basics)

        inputs_box = QGroupBox("Inputs", page)
        inputs_column = QVBoxLayout(inputs_box)
        self.inputs = InputsEditor(inputs_box)
        inputs_column.addWidget(self.inputs)
        column.addWidget(inputs_box)

        limits_box = QGroupBox("Limits", page)
        limits = fit_form(QFormLayout(limits_box))
        self.settings_editors: dict[str, DurationEditor] = {}
        for key in SETTING_KEYS:
            editor = DurationEditor(FieldSpec(key, SETTING_LABELS[key], "duration", False, DEFAULT_LIMITS[key]))
            editor.setObjectName(f"setting_{key}")
            editor.line.setPlaceholderText(f"{DEFAULT_LIMITS[key]} (the default)")
            editor.setToolTip(SETTING_TIPS[key])
            editor.committed.connect(lambda value, k=key: self._commit_setting(k, value))
            self.settings_editors[key] = editor
            label = QLabel(SETTING_LABELS[key], limits_box)
            label.setToolTip(SETTING_TIPS[key])
            limits.addRow(label, editor)
        column.addWidget(limits_box)
        column.addStretch(1)
        self.setWidget(page)
        self.refresh()

    # ----- wiring ------------------------------------------------------------------

    def set_document(self, document: FlowDocument | None) -> None:
        if document is self.document:
            return
        if self.document is not None:
            try:
                self.document.header_changed.disconnect(self.refresh)
            except (RuntimeError, TypeError):
                pass
        self.document = document
        if document is not None:
            document.header_changed.connect(self.refresh)
        self.inputs.set_document(document)
        self.refresh()

    def focus_name(self) -> None:
        self.name_edit.setFocus()
        self.name_edit.selectAll()

    # ----- showing -----------------------------------------------------------------

    def refresh(self) -> None:
        document = self.document
        self.page.setEnabled(document is not None)
        if document is None:
            self.header.setText("<b>No flow open</b>: New flow (Ctrl+N) or Open (Ctrl+O)")
            return
        flow = document.flow_ref()
        self.header.setText(f"<b>Flow</b> &nbsp;<span style='color:gray'>{flow.id}</span>")
        for widget, text in ((self.name_edit, flow.name), (self.id_edit, flow.id)):
            if widget.text() != text:
                widget.setText(text)
        if self.description_edit.toPlainText() != flow.description:
            self.description_edit.setPlainText(flow.description)
        self.enabled_check.setChecked(flow.enabled)
        for key, editor in self.settings_editors.items():
            editor.show_value(getattr(flow.settings, key))
        self.inputs.refresh()
        self._show_id_note()

    def _show_id_note(self, problem: str | None = None) -> None:
        document = self.document
        text = problem or ""
        if document is not None and problem is None:
            flow_id = document.flow_ref().id
            history = document.history_id
            if document.id_follows_name:
                text = "Made from the name until you change it."
            elif flow_id in self.taken_ids().published and flow_id != history:
                text = f"A published flow has the id {flow_id}: Publish asks before adding to its versions."
            elif history is not None and flow_id != history:
                text = f"Publishing under a new id starts a new history; the versions of {history} stay there."
        self.id_note.setText(text)
        self.id_note.setProperty("problem", problem is not None)
        self.id_note.style().unpolish(self.id_note)
        self.id_note.style().polish(self.id_note)
        self.id_note.setVisible(bool(text))

    @property
    def id_problem(self) -> str | None:
        return self.id_note.text() if self.id_note.property("problem") and self.id_note.text() else None

    # ----- committing (always through the document's commands) ---------------------

    def _commit_name(self) -> None:
        if self.document is not None and self.name_edit.text().strip() != self.document.flow_ref().name.strip():
            self.document.rename_flow(self.name_edit.text().strip(), self.taken_ids().all())
            self._show_id_note()

    def _commit_id(self) -> None:
        document = self.document
        if document is None:
            return
        wanted = self.id_edit.text().strip()
        if wanted == document.flow_ref().id:
            self._show_id_note()
            return
        problem = flow_id_problem(wanted)
        owner = self.taken_ids().open.get(wanted)
        if problem is None and owner is not None:
            problem = f"the open flow {owner!r} has the id {wanted!r}; give this flow its own"
        if problem is not None:
            self._show_id_note(f"Not changed: {problem}")
            return
        document.set_flow_id(wanted)
        self._show_id_note()

    def _commit_description(self) -> None:
        if self.document is None:
            return
        text = self.description_edit.toPlainText()
        if text.strip() != self.document.flow_ref().description.strip():
            self.document.set_description(text.strip())

    def _commit_enabled(self, checked: bool) -> None:
        if self.document is not None:
            self.document.set_enabled(bool(checked))

    def _commit_setting(self, key: str, value: object) -> None:
        if self.document is not None and (value is None or isinstance(value, str | int | float)):
            self.document.set_setting(key, value)
