"""The Changes panel: what the draft changed against a published version, one row per node, the selected
row's fields before and after. Up/Down (or F8 / Shift+F8 anywhere) step through the changes."""

from __future__ import annotations

import json

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from canvas.diff_overlay import status_color
from engine.flow_diff import FieldChange, FlowDiff, NodeChange

NODE_ROLE = Qt.ItemDataRole.UserRole


def _value(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2) if isinstance(value, (dict, list)) else json.dumps(
        value, ensure_ascii=False)


def field_lines(change: FieldChange) -> list[str]:
    """A field change as a person reads it: the path, then was/now."""
    if change.kind == "added":
        return [f"{change.path}  (added)", f"  now: {_value(change.after)}"]
    if change.kind == "removed":
        return [f"{change.path}  (removed)", f"  was: {_value(change.before)}"]
    return [change.path, f"  was: {_value(change.before)}", f"  now: {_value(change.after)}"]


def _counts(diff: FlowDiff) -> str:
    parts = []
    for status in ("added", "removed", "changed", "moved"):
        count = sum(1 for node in diff.nodes if node.status == status)
        if count:
            parts.append(f"{count} {status}")
    if diff.edges:
        parts.append(f"{len(diff.edges)} wire{'s' if len(diff.edges) != 1 else ''}")
    if diff.flow_fields:
        parts.append(f"{len(diff.flow_fields)} flow setting{'s' if len(diff.flow_fields) != 1 else ''}")
    return ", ".join(parts) if parts else "no changes"


class ChangesPanel(QWidget):
    """`node_chosen(node_id)` when a row is selected; `stop_requested` from its Stop comparing button."""

    node_chosen = Signal(str)
    stop_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.summary = QLabel("Compare the draft with a published version: Flow ▸ Compare with version…")
        self.summary.setWordWrap(True)
        self.list = QListWidget()
        self.list.setObjectName("changesList")
        self.detail = QPlainTextEdit()
        self.detail.setObjectName("changeDetail")
        self.detail.setReadOnly(True)
        self.detail.setPlaceholderText("Select a change to see its fields before and after")
        self.previous_button = QPushButton("Previous")
        self.next_button = QPushButton("Next")
        self.stop_button = QPushButton("Stop comparing")
        steps = QHBoxLayout()
        for button in (self.previous_button, self.next_button):
            steps.addWidget(button)
        steps.addStretch(1)
        layout = QVBoxLayout(self)
        layout.addWidget(self.summary)
        layout.addWidget(self.list, 2)
        layout.addWidget(self.detail, 3)
        layout.addLayout(steps)
        layout.addWidget(self.stop_button)
        self.diff = FlowDiff()
        self.changes: list[NodeChange] = []
        self.list.currentRowChanged.connect(self._row_changed)
        self.previous_button.clicked.connect(lambda: self.step(-1))
        self.next_button.clicked.connect(lambda: self.step(1))
        self.stop_button.clicked.connect(self.stop_requested)
        self.show_diff(None, FlowDiff(), [])

    def show_diff(self, label: str | None, diff: FlowDiff, changes: list[NodeChange]) -> None:
        """Fill the panel; `label` None means nothing is being compared. Keeps the selected node if still listed."""
        kept = self.current_node()
        self.diff = diff
        self.changes = changes
        self.list.blockSignals(True)
        self.list.clear()
        for change in changes:
            item = QListWidgetItem(f"{change.status.capitalize()}: {change.title or change.node_id}")
            item.setData(NODE_ROLE, change.node_id)
            item.setForeground(QColor(status_color(change.status)))
            fields = f"; {len(change.fields)} field(s) changed" if change.status == "changed" else ""
            item.setToolTip(f"{change.node_id} ({change.type}){fields}")
            self.list.addItem(item)
        self.list.blockSignals(False)
        comparing = label is not None
        for widget in (self.previous_button, self.next_button, self.stop_button):
            widget.setEnabled(comparing and (widget is self.stop_button or bool(changes)))
        if not comparing:
            self.summary.setText("Compare the draft with a published version: Flow ▸ Compare with version…")
            self.detail.setPlainText("")
            return
        self.summary.setText(f"Draft compared with {label}: {_counts(diff)}")
        rows = [c.node_id for c in changes]
        if kept in rows:
            self.list.setCurrentRow(rows.index(kept))
        else:
            self.detail.setPlainText(self._flow_text())

    def _flow_text(self) -> str:
        lines: list[str] = []
        if self.diff.flow_fields:
            lines.append("Flow settings:")
            for change in self.diff.flow_fields:
                lines += ["  " + line for line in field_lines(change)]
        for edge in self.diff.edges:
            port = f" [{edge.port}]" if edge.port else ""
            lines.append(f"wire {edge.status}: {edge.from_}{port} → {edge.to}")
        return "\n".join(lines)

    def current_node(self) -> str | None:
        item = self.list.currentItem()
        return str(item.data(NODE_ROLE)) if item is not None else None

    def step(self, delta: int) -> None:
        """Select the next (`delta` 1) or previous (-1) change, wrapping around."""
        if not self.changes:
            return
        row = self.list.currentRow()
        row = (0 if delta > 0 else len(self.changes) - 1) if row < 0 else (row + delta) % len(self.changes)
        self.list.setCurrentRow(row)

    def _row_changed(self, row: int) -> None:
        if not 0 <= row < len(self.changes):
            return
        change = self.changes[row]
        lines = [f"{change.node_id} ({change.type}): {change.status}"]
        if change.status == "added":
            lines.append("New in the draft.")
        elif change.status == "removed":
            lines.append("In the compared version, not in the draft (drawn as a red ghost).")
        elif change.status == "moved":
            lines.append("Only its position changed.")
        for field in change.fields:
            lines += field_lines(field)
        self.detail.setPlainText("\n".join(lines))
        self.node_chosen.emit(change.node_id)
