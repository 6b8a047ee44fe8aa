"""The properties panel: editors generated from the selected node's typed config model, or the flow panel
when no node is selected.

Every change goes through the document's edit methods (undoable commands); the
panel redraws from the document's notifications, so undo updates it too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFormLayout,
    QGroupBox,
    QLabel,
    QLineEdit,
    QSpinBox,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from app.field_kinds import NODE_HINTS, FieldSpec, config_fields
from app.panels.code_editor import CodeEditor
from app.panels.field_editors import (
    DurationEditor,
    FieldEditor,
    FlowRefEditor,
    NodeRefEditor,
    TemplateEditor,
    editor_for,
)
from app.panels.fit_width import FitWidthScrollArea, fit_form, narrow_combo
from app.panels.flow_panel import FlowPanel
from app.panels.template_completion import completion_words
from app.panels.template_preview import context_for
from engine.catalog import CATALOG

if TYPE_CHECKING:
    from canvas.document import FlowDocument
    from engine.read_models import Run

IDEMPOTENT_CHOICES: tuple[tuple[str, bool | None], ...] = (
    ("As the node type says", None),
    ("Yes: may run again after a crash", True),
    ("No: fail the run instead of repeating", False),
)
RETRY_DEFAULTS: dict[str, Any] = {"max_attempts": 3, "backoff": "exponential", "base_delay": "1s", "max_interval": "5m"}


class PropertiesPanel(QWidget):
    """Shows and edits one node of one document, or (nothing selected) the flow itself."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("propertiesPanel")
        self.document: FlowDocument | None = None
        self.node_id: str | None = None
        self.editors: dict[str, FieldEditor] = {}
        self._built_for: tuple[str, str] | None = None
        self.preview_run: Run | None = None
        """The selected run (its inputs and state): template fields preview their value against it."""
        self.published_flow_ids: Callable[[], frozenset[str]] = frozenset
        """The engine's published flow ids (a `flow.call`'s flow picker offers them); the window sets it."""

        # Editors shrink to the dock's width (and the dock cannot get narrower than they can): nothing hides
        # under the vertical scroll bar or past the dock's edge.
        self.scroll_area = FitWidthScrollArea(self)
        self.flow_panel = FlowPanel(self)
        self.pages = QStackedWidget(self)
        self.pages.addWidget(self.flow_panel)
        self.pages.addWidget(self.scroll_area)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.addWidget(self.pages)

    # ----- wiring ------------------------------------------------------------------

    def set_document(self, document: FlowDocument | None) -> None:
        if self.document is document:
            return
        if self.document is not None:
            for signal in (self.document.node_changed, self.document.node_removed):
                try:
                    signal.disconnect(self._on_node_event)
                except (RuntimeError, TypeError):
                    pass
            try:
                self.document.flow_changed.disconnect(self._refresh_references)
            except (RuntimeError, TypeError):
                pass
        self.document = document
        if document is not None:
            document.node_changed.connect(self._on_node_event)
            document.node_removed.connect(self._on_node_event)
            document.flow_changed.connect(self._refresh_references)
        self.flow_panel.set_document(document)
        self.show_node(None)

    def set_preview_run(self, run: Run | None) -> None:
        """Preview template fields against `run` (None: against the inputs' defaults)."""
        self.preview_run = run
        if self.document is None:
            return
        preview = context_for(self.document.flow_ref(), run)
        for editor in self.editors.values():
            if isinstance(editor, TemplateEditor):
                editor.set_preview_context(preview)

    def showing_flow(self) -> bool:
        """True while the flow panel (not a node) is shown."""
        return self.pages.currentWidget() is self.flow_panel

    def show_node(self, node_id: str | None) -> None:
        """Edit `node_id` of the current document (None: show the empty hint)."""
        self.node_id = node_id
        node = self.document.node(node_id) if self.document is not None and node_id else None
        if node is None:
            self.node_id = None
            self.pages.setCurrentWidget(self.flow_panel)
            return
        if self._built_for != (node.id, node.type):
            self._build(node.id, node.type)
        self.pages.setCurrentWidget(self.scroll_area)
        self._refresh()

    def show_selection(self, node_ids: list[str]) -> None:
        """The canvas selection: one node is edited, none or many show the flow panel."""
        self.show_node(node_ids[0] if len(node_ids) == 1 else None)

    def _on_node_event(self, node_id: str) -> None:
        if node_id == self.node_id:
            self.show_node(node_id)

    def _refresh_references(self) -> None:
        if self.node_id is not None:
            self._refresh()

    # ----- building ----------------------------------------------------------------

    def _build(self, node_id: str, type_name: str) -> None:
        self._built_for = (node_id, type_name)
        self.editors = {}
        page = QWidget()
        page.setObjectName("propertiesPage")
        column = QVBoxLayout(page)
        column.setContentsMargins(8, 8, 8, 8)
        column.setSpacing(10)

        spec = CATALOG.get(type_name)
        header = QLabel(f"<b>{spec.title if spec else type_name}</b> &nbsp;<span style='color:gray'>{type_name}</span>")
        header.setObjectName("propertiesHeader")
        header.setWordWrap(True)
        column.addWidget(header)

        basics = fit_form(QFormLayout())
        self.id_label = QLabel(node_id)
        self.id_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.id_label.setToolTip("The node id: templates and references use it; it never changes once published")
        self.title_edit = QLineEdit()
        self.title_edit.setObjectName("field_title")
        self.title_edit.setPlaceholderText(spec.title if spec else "")
        self.title_edit.editingFinished.connect(self._commit_title)
        basics.addRow("ID", self.id_label)
        basics.addRow("Title", self.title_edit)
        column.addLayout(basics)

        fields = config_fields(type_name)
        if spec is None:
            column.addWidget(QLabel(f"Unknown node type {type_name!r}: its config cannot be edited here."))
        elif fields:
            config_box = QGroupBox("Configuration")
            form = fit_form(QFormLayout(config_box))
            for field in fields:
                editor = editor_for(field)
                editor.committed.connect(lambda value, key=field.key: self._commit_config(key, value))
                self.editors[field.key] = editor
                if field.kind == "bool":
                    form.addRow("", editor)
                else:
                    label = QLabel(field.label + (" *" if field.required else ""))
                    label.setToolTip("Required" if field.required else f"Optional (default {field.default!r})")
                    form.addRow(label, editor)
            column.addWidget(config_box)
        hint = NODE_HINTS.get(type_name)
        if hint is not None:
            hint_label = QLabel(hint.format(node=node_id))
            hint_label.setObjectName("nodeHint")
            hint_label.setWordWrap(True)
            hint_label.setTextFormat(Qt.TextFormat.PlainText)
            hint_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            column.addWidget(hint_label)

        column.addWidget(self._build_behaviour())
        column.addStretch(1)
        self.scroll_area.setWidget(page)

    def _build_behaviour(self) -> QGroupBox:
        box = QGroupBox("On failure")
        form = fit_form(QFormLayout(box))
        self.retry_check = QCheckBox("Retry the step")
        self.retry_check.setObjectName("field_retry")
        self.retry_check.clicked.connect(self._commit_retry)
        self.retry_attempts = QSpinBox()
        self.retry_attempts.setObjectName("field_retry_max_attempts")
        self.retry_attempts.setRange(1, 100)
        self.retry_attempts.setKeyboardTracking(False)
        self.retry_attempts.valueChanged.connect(self._commit_retry)
        self.retry_backoff = narrow_combo(QComboBox())
        self.retry_backoff.setObjectName("field_retry_backoff")
        self.retry_backoff.addItems(["exponential", "linear"])
        self.retry_backoff.activated.connect(self._commit_retry)
        self.retry_delay = DurationEditor(FieldSpec("base_delay", "Base delay", "duration", True, "1s"))
        self.retry_delay.setObjectName("field_retry_base_delay")
        self.retry_delay.committed.connect(self._commit_retry)
        self.retry_max_interval = DurationEditor(FieldSpec("max_interval", "Longest wait", "duration", True, "5m"))
        self.retry_max_interval.setObjectName("field_retry_max_interval")
        self.retry_max_interval.setToolTip("No wait between attempts grows past this")
        self.retry_max_interval.committed.connect(self._commit_retry)
        self.continue_check = QCheckBox("Continue the run when this step fails")
        self.continue_check.setObjectName("field_continue_on_fail")
        self.continue_check.clicked.connect(
            lambda checked: self._commit_node_field("continue_on_fail", bool(checked))
        )
        self.idempotent_combo = narrow_combo(QComboBox())
        self.idempotent_combo.setObjectName("field_idempotent")
        for text, value in IDEMPOTENT_CHOICES:
            self.idempotent_combo.addItem(text, value)
        self.idempotent_combo.activated.connect(
            lambda _i: self._commit_node_field("idempotent", self.idempotent_combo.currentData())
        )
        form.addRow(self.retry_check)  # the checks span the form: a narrow dock never wraps them alone
        form.addRow("Attempts", self.retry_attempts)
        form.addRow("Backoff", self.retry_backoff)
        form.addRow("Base delay", self.retry_delay)
        form.addRow("Longest wait", self.retry_max_interval)
        form.addRow(self.continue_check)
        form.addRow("Idempotent", self.idempotent_combo)
        return box

    # ----- showing -----------------------------------------------------------------

    def _refresh(self) -> None:
        assert self.document is not None and self.node_id is not None
        node = self.document.node(self.node_id)
        if node is None:
            return
        if self.title_edit.text() != node.title:
            self.title_edit.setText(node.title)
        words = completion_words(self.document.flow_ref(), node.id)
        preview = context_for(self.document.flow_ref(), self.preview_run)
        for key, editor in self.editors.items():
            if isinstance(editor, TemplateEditor):
                editor.set_completions(words)
                editor.set_preview_context(preview)
            if isinstance(editor, FlowRefEditor):
                editor.set_candidates(sorted(self.published_flow_ids() - {self.document.flow_ref().id}))
            if isinstance(editor, NodeRefEditor):
                ref_type = editor.spec.ref_type
                editor.set_candidates(
                    [(n.id, n.title) for n in self.document.flow_ref().nodes if n.type == ref_type]
                )
            if isinstance(editor, CodeEditor) and editor.spec.language_key:
                editor.set_language(node.config.get(editor.spec.language_key))
            editor.show_value(node.config.get(key))
        retry = node.retry
        widgets = (self.retry_check, self.retry_attempts, self.retry_backoff, self.continue_check,
                   self.idempotent_combo)
        for widget in widgets:
            widget.blockSignals(True)
        try:
            self.retry_check.setChecked(retry is not None)
            self.retry_attempts.setValue(retry.max_attempts if retry else RETRY_DEFAULTS["max_attempts"])
            self.retry_backoff.setCurrentText(retry.backoff if retry else RETRY_DEFAULTS["backoff"])
            self.continue_check.setChecked(node.continue_on_fail)
            self.idempotent_combo.setCurrentIndex(max(self.idempotent_combo.findData(node.idempotent), 0))
        finally:
            for widget in widgets:
                widget.blockSignals(False)
        self.retry_delay.show_value(retry.base_delay if retry else RETRY_DEFAULTS["base_delay"])
        self.retry_max_interval.show_value(retry.max_interval if retry else RETRY_DEFAULTS["max_interval"])
        for retry_widget in (self.retry_attempts, self.retry_backoff, self.retry_delay, self.retry_max_interval):
            retry_widget.setEnabled(retry is not None)

    # ----- committing (always through the document's commands) ---------------------

    def _commit_title(self) -> None:
        if self.document is not None and self.node_id is not None:
            self.document.rename_node(self.node_id, self.title_edit.text().strip())

    def _commit_config(self, key: str, value: Any) -> None:
        if self.document is not None and self.node_id is not None:
            self.document.set_config_field(self.node_id, key, value)

    def _commit_node_field(self, field: str, value: Any) -> None:
        if self.document is None or self.node_id is None:
            return
        node = self.document.node(self.node_id)
        if node is not None and getattr(node, field) != value:
            self.document.set_node_field(self.node_id, field, value)

    def _commit_retry(self, *_args: object) -> None:
        if self.document is None or self.node_id is None:
            return
        node = self.document.node(self.node_id)
        if node is None:
            return
        if not self.retry_check.isChecked():
            if node.retry is not None:
                self.document.set_node_field(self.node_id, "retry", None)
            return
        retry = {
            "max_attempts": self.retry_attempts.value(),
            "backoff": self.retry_backoff.currentText(),
            "base_delay": self.retry_delay.line.text().strip() or RETRY_DEFAULTS["base_delay"],
            "max_interval": self.retry_max_interval.line.text().strip() or RETRY_DEFAULTS["max_interval"],
        }
        # Only what differs from the defaults is written, so the file stays minimal.
        retry = {k: v for k, v in retry.items() if v != RETRY_DEFAULTS[k]}
        current = node.retry.model_dump(exclude_unset=True) if node.retry is not None else None
        if current != retry:
            self.document.set_node_field(self.node_id, "retry", retry)
