"""One run opened from the Runs panel: its cost and tokens, steps, state container, errors and a Cancel button."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFont
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from app.live import run_row
from app.panels.rows import STATUS_COLOURS, local_time, tokens_text, usd
from app.panels.timeline import TimelineWidget
from engine.runtime.transitions import TERMINAL as TERMINAL_STATUSES

STEP_COLUMNS = ("Node", "Type", "Status", "Attempts", "Duration", "Tokens", "Ports", "Error")
ERROR_COLUMN = len(STEP_COLUMNS) - 1


class RunDetails(QDialog):
    """`cancel_requested(run_id)` when the user presses Cancel; `show_run(run)` refreshes it."""

    cancel_requested = Signal(str)
    open_run_requested = Signal(str)
    """A parent or child run's link was clicked: show that run."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Run")
        self.resize(860, 520)
        self.run: dict[str, Any] | None = None
        self.header = QLabel(self)
        self.header.setObjectName("runHeader")
        self.header.setWordWrap(True)
        self.cancel_button = QPushButton("Cancel run", self)
        self.cancel_button.setObjectName("cancelRunButton")
        self.cancel_button.clicked.connect(self._cancel)
        self.related = QLabel(self)
        self.related.setObjectName("runRelated")
        self.related.setTextFormat(Qt.TextFormat.RichText)
        self.related.setWordWrap(True)
        self.related.linkActivated.connect(self._open_linked)
        self.related.hide()
        top = QHBoxLayout()
        top.addWidget(self.header, 1)
        top.addWidget(self.cancel_button)

        self.steps = QTableWidget(0, len(STEP_COLUMNS))
        self.steps.setObjectName("runSteps")
        self.steps.setHorizontalHeaderLabels(list(STEP_COLUMNS))
        self.steps.verticalHeader().hide()
        self.steps.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.steps.horizontalHeader().setSectionResizeMode(ERROR_COLUMN, QHeaderView.ResizeMode.Stretch)
        mono = QFont("monospace")
        mono.setStyleHint(QFont.StyleHint.Monospace)
        self.state_text = QPlainTextEdit()
        self.state_text.setObjectName("runState")
        self.state_text.setReadOnly(True)
        self.state_text.setFont(mono)
        self.errors_text = QPlainTextEdit()
        self.errors_text.setObjectName("runErrors")
        self.errors_text.setReadOnly(True)
        self.errors_text.setFont(mono)
        tabs = QTabWidget()
        tabs.addTab(self.state_text, "State (secrets redacted)")
        tabs.addTab(self.errors_text, "Errors")
        self.timeline = TimelineWidget()
        scroller = QScrollArea()
        scroller.setWidgetResizable(True)
        scroller.setWidget(self.timeline)
        splitter = QSplitter(Qt.Orientation.Vertical)
        splitter.addWidget(scroller)
        splitter.addWidget(self.steps)
        splitter.addWidget(tabs)
        splitter.setSizes([170, 190, 160])
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addWidget(self.related)
        layout.addWidget(splitter)

    def show_run(self, run: dict[str, Any]) -> None:
        self.run = run
        row = run_row(run)
        colour = STATUS_COLOURS.get(row.status, "#888888")
        self.setWindowTitle(f"Run {row.run_id[:8]} — {row.flow_id} v{row.version}")
        where = row.where(_now())
        spent = " · ".join(part for part in (
            f"cost {usd(row.cost_usd)}" if row.cost_usd else "",
            f"tokens {tokens_text(row.tokens_in, row.tokens_out)}" if row.tokens_in or row.tokens_out else "",
        ) if part)
        self.header.setText(
            f"<b>{row.flow_id}</b> v{row.version} &nbsp; <span style='color:{colour}'>● {row.status}</span>"
            f" &nbsp; started {local_time(row.started_at)} &nbsp; {row.duration(_now())}"
            + (f" &nbsp; at <b>{where}</b>" if where else "")
            + (f" &nbsp; {spent}" if spent else "")
        )
        related = related_runs_html(run)
        self.related.setText(related)
        self.related.setVisible(bool(related))
        steps = run.get("steps", [])
        self.timeline.set_run(run, _now().timestamp())
        self.steps.setRowCount(len(steps))
        for index, step in enumerate(steps):
            duration = step.get("duration_ms")
            cells = (
                step.get("node") or "", step.get("type") or "", step.get("status") or "",
                str(step.get("attempts") or ""), _milliseconds(duration), _step_tokens(step),
                ", ".join(step.get("ports") or []), step.get("error") or "",
            )
            for column, text in enumerate(cells):
                item = QTableWidgetItem(str(text))
                if column == ERROR_COLUMN and text:
                    item.setToolTip(str(text))
                self.steps.setItem(index, column, item)
        self.state_text.setPlainText(json.dumps(run.get("state") or {}, indent=2, sort_keys=True, default=str))
        errors = [f"run: {run['error_type'] or 'error'}: {run['error']}"] if run.get("error") else []
        errors += [f"{s.get('node')}: {s.get('error_type') or 'error'}: {s.get('error')}" for s in steps
                   if s.get("error")]
        self.errors_text.setPlainText("\n".join(errors) if errors else "No errors.")
        self.cancel_button.setEnabled(row.status not in TERMINAL_STATUSES)

    def _open_linked(self, link: str) -> None:
        if link.startswith(RUN_LINK):
            self.open_run_requested.emit(link[len(RUN_LINK):])

    def _cancel(self) -> None:
        if self.run is not None:
            self.cancel_requested.emit(str(self.run["id"]))


RUN_LINK = "run:"
"""Links of the parent and child runs: `run:<id>`."""


def related_runs_html(run: dict[str, Any]) -> str:
    """`called by run 1a2b3c4d · child runs: 5e6f7a8b, …` with a link to open each (flow.call); '' when none."""
    parts = []
    parent = run.get("parent_run_id")
    if isinstance(parent, str) and parent:
        parts.append(f"called by run <a href='{RUN_LINK}{parent}'>{parent[:8]}</a>")
    children = [child for child in run.get("child_run_ids") or [] if isinstance(child, str)]
    if children:
        links = ", ".join(f"<a href='{RUN_LINK}{child}'>{child[:8]}</a>" for child in children)
        parts.append(f"child run{'s' if len(children) != 1 else ''}: {links}")
    return " &nbsp;·&nbsp; ".join(parts)


def _step_tokens(step: dict[str, Any]) -> str:
    tokens_in, tokens_out = step.get("tokens_in"), step.get("tokens_out")
    if tokens_in is None and tokens_out is None:
        return ""
    return tokens_text(tokens_in, tokens_out) if tokens_in or tokens_out else "0"


def _milliseconds(value: Any) -> str:
    if not isinstance(value, int | float):
        return ""
    return f"{value:.2f} ms" if value < 10 else f"{value:,.0f} ms"


def _now() -> datetime:
    return datetime.now(UTC)
