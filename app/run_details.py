"""One run opened from the Runs panel, in a resizable window: status, cost and tokens, its inputs (secrets
masked) and result, a timeline, each step with what it was given and what it produced, the state container,
errors, and a Cancel button. Times are local and readable, never epoch seconds."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QColor, QFont, QResizeEvent, QShowEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QHBoxLayout,
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

from app.live import run_row, step_ports, step_status_text
from app.panels.rows import local_time, tokens_text, usd
from app.panels.tables import compact_rows, fit_columns
from app.panels.timeline import ROW_HEIGHT, TimelineWidget
from app.readable import readable_json, short_run_id
from app.theme import status_colour
from engine.read_models import Run, RunSummary, Step
from engine.runtime.transitions import TERMINAL as TERMINAL_STATUSES

STEP_COLUMNS = ("Node", "Type", "Status", "Attempts", "Started", "Duration", "Tokens", "Ports", "Error")
STATUS_COLUMN = STEP_COLUMNS.index("Status")
ERROR_COLUMN = len(STEP_COLUMNS) - 1
STEP_SAMPLES = {0: "classify_ticket", 1: "trigger.schedule", 2: "succeeded", 4: "2026-12-31 23:59:59",
                5: "12,345 ms", 6: "1,234 in · 56 out", 7: "approved"}
"""Typical cells the step columns are sized for; the error takes the room left."""
MASK = "***"
TABS_SHARE = 0.2
TABS_LEAST = 140
"""The step's Given / Produced tabs keep at least this share of the panes' height, and this many pixels;
the timeline and the steps table get what they need of the rest (the table before the timeline when short)."""
TIMELINE_LEAST = ROW_HEIGHT * 4
"""When the timeline and the steps table do not both fit, the table gets its rows and the timeline the rest, but
at least this much (its time axis and three bars; it scrolls to the selected step's bar)."""


class _PaneSplitter(QSplitter):
    """A splitter that says when it has been resized (after its panes are)."""

    resized = Signal()

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self.resized.emit()


class RunDetails(QDialog):
    """`cancel_requested(run_id)` when the user presses Cancel; `show_run(run)` refreshes it."""

    cancel_requested = Signal(str)
    open_run_requested = Signal(str)
    save_test_requested = Signal(str)
    """(run id): the user pressed Save as test… on a finished run."""
    """A parent or child run's link was clicked: show that run."""
    rerun_requested = Signal(str, str)
    """(run id, node): Rerun from here on the selected step of a finished run."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Run")
        self.setWindowFlag(Qt.WindowType.WindowMaximizeButtonHint, True)
        self.setSizeGripEnabled(True)
        self.resize(980, 680)
        self.run: Run | None = None
        self.secret_inputs: frozenset[str] = frozenset()
        """Inputs the flow declares secret: masked here even if a value reached the record."""
        self.header = QLabel(self)
        self.header.setObjectName("runHeader")
        self.header.setWordWrap(True)
        self.header.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)  # the run id to copy
        self.cancel_button = QPushButton("Cancel run", self)
        self.cancel_button.setObjectName("cancelRunButton")
        self.cancel_button.clicked.connect(self._cancel)
        self.rerun_button = QPushButton("Rerun from here…", self)
        self.rerun_button.setObjectName("rerunFromHereButton")
        self.rerun_button.clicked.connect(self._rerun)
        self.save_test_button = QPushButton("Save as test…", self)
        self.save_test_button.setObjectName("saveTestButton")
        self.save_test_button.clicked.connect(self._save_test)
        self.related = QLabel(self)
        self.related.setObjectName("runRelated")
        self.related.setTextFormat(Qt.TextFormat.RichText)
        self.related.setWordWrap(True)
        self.related.linkActivated.connect(self._open_linked)
        self.related.linkHovered.connect(lambda link: _tip_run_link(self.related, link))
        self.related.hide()
        top = QHBoxLayout()  # under the header, which has the window's width: it breaks only between phrases
        top.addWidget(self.related, 1)
        top.addStretch(0)
        top.addWidget(self.rerun_button)
        top.addWidget(self.save_test_button)
        top.addWidget(self.cancel_button)

        self.steps = QTableWidget(0, len(STEP_COLUMNS))
        self.steps.setObjectName("runSteps")
        self.steps.setHorizontalHeaderLabels(list(STEP_COLUMNS))
        self.steps.verticalHeader().hide()
        self.steps.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.steps.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.steps.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.steps.setWordWrap(False)
        compact_rows(self.steps)
        fit_columns(self.steps, STEP_SAMPLES, stretch=ERROR_COLUMN)
        self.steps.itemSelectionChanged.connect(self._show_selected_step)
        self.step_given = _json_view("stepGiven")
        self.step_output = _json_view("stepOutput")
        self.step_label = QLabel("Pick a step to see what it was given and what it produced.")
        self.step_label.setObjectName("stepLabel")
        self.step_label.setWordWrap(True)
        self.step_label.linkActivated.connect(self._open_linked)
        self.step_label.linkHovered.connect(lambda link: _tip_run_link(self.step_label, link))
        given_box, output_box = QWidget(), QWidget()
        for box, title, view in ((given_box, "Given", self.step_given), (output_box, "Produced", self.step_output)):
            box_layout = QVBoxLayout(box)
            box_layout.setContentsMargins(0, 0, 0, 0)
            box_layout.addWidget(QLabel(f"<b>{title}</b>"))
            box_layout.addWidget(view)
        step_split = QSplitter(Qt.Orientation.Horizontal)
        step_split.addWidget(given_box)
        step_split.addWidget(output_box)
        step_page = QWidget()
        step_layout = QVBoxLayout(step_page)
        step_layout.setContentsMargins(4, 4, 4, 4)
        step_layout.addWidget(self.step_label)
        step_layout.addWidget(step_split, 1)
        self.inputs_text = _json_view("runInputs")
        self.result_text = _json_view("runResult")
        self.state_text = _json_view("runState")
        self.errors_text = _json_view("runErrors")
        self.tabs = QTabWidget()
        self.tabs.setObjectName("runDetailTabs")
        self.tabs.addTab(step_page, "Step")
        self.tabs.addTab(self.inputs_text, "Inputs")
        self.tabs.addTab(self.result_text, "Result")
        self.tabs.addTab(self.state_text, "State (secrets redacted)")
        self.tabs.addTab(self.errors_text, "Errors")
        tabs = self.tabs
        self.timeline = TimelineWidget()
        self.timeline_area = QScrollArea()
        self.timeline_area.setObjectName("runTimelineArea")
        self.timeline_area.setWidgetResizable(True)
        self.timeline_area.setWidget(self.timeline)
        self.panes = _PaneSplitter(Qt.Orientation.Vertical)
        self.panes.setObjectName("runPanes")
        self.panes.addWidget(self.timeline_area)
        self.panes.addWidget(self.steps)
        self.panes.addWidget(tabs)
        self.panes.setChildrenCollapsible(False)
        for index, stretch in enumerate((2, 3, 2)):  # a taller window goes mostly to the steps
            self.panes.setStretchFactor(index, stretch)
        self.panes_moved = False
        """The user dragged a pane's edge: their sizes are kept (no longer fitted to the run)."""
        self.panes.splitterMoved.connect(self._panes_moved)
        self.panes.resized.connect(self._panes_resized)
        layout = QVBoxLayout(self)
        layout.setSpacing(4)
        layout.addWidget(self.header)
        layout.addLayout(top)
        layout.addWidget(self.panes, 1)

    def show_run(self, run: Run, secret_inputs: frozenset[str] | None = None) -> None:
        if secret_inputs is not None:
            self.secret_inputs = secret_inputs
        same_run = self.run is not None and self.run.id == run.id
        kept_step = self._selected_step_key() if same_run else None
        self.run = run
        row = run_row(run)
        colour = status_colour(row.status)
        self.setWindowTitle(f"Run {short_run_id(row.run_id)} — {row.flow_id} v{row.version}")
        where = row.where(_now())
        spent = " · ".join(part for part in (
            f"cost {usd(row.cost_usd)}" if row.cost_usd is not None else "",
            f"tokens {tokens_text(row.tokens_in, row.tokens_out)}",
        ) if part)
        asked = " (cancel requested)" if run.cancel_requested else ""
        self.header.setText(_phrases(
            f"<b>{_html(row.flow_id)}</b> v{row.version}",
            f"<span style='color:{colour}'>● {row.status}{asked}</span>",
            f"started {local_time(row.started_at)}",
            f"finished {_finished(row.started_at, row.finished_at)}" if row.finished_at else "",
            f"took {row.duration(_now())}",
            f"at <b>{_html(where)}</b>" if where else "",
        ) + "<br>" + _phrases(f"run {row.run_id}", spent))
        related = related_runs_html(run)
        self.related.setText(related)
        self.related.setVisible(bool(related))
        steps = run.steps
        self.timeline.set_run(run, _now().timestamp())
        self.steps.blockSignals(True)
        refit = not same_run or self.steps.rowCount() != len(steps)
        self.steps.setRowCount(len(steps))
        for index, step in enumerate(steps):
            reused = bool(step.reused_from)
            cells = (  # a reused step ran in the run it was taken from: no attempt or start of its own here
                step.node or "", step.type or "", step_status_text(step),
                "" if reused else str(step.attempts or ""), "" if reused else _local(step.started_at),
                _milliseconds(step.duration_ms),
                _step_tokens(step), ", ".join(step_ports(step)), step.error or "",
            )
            for column, text in enumerate(cells):
                item = QTableWidgetItem(str(text))
                if column == ERROR_COLUMN and text:
                    item.setToolTip(str(text))
                if column == STATUS_COLUMN:
                    item.setForeground(QColor(status_colour(step.status)))
                self.steps.setItem(index, column, item)
        self.steps.blockSignals(False)
        self.inputs_text.setPlainText(_dump(self._masked(run.inputs)) if isinstance(run.inputs, dict) and run.inputs
                                      else "This run was given no inputs.")
        self.result_text.setPlainText(_dump(run.result) if run.result is not None else (
            "No result yet: the run has not finished." if row.status not in TERMINAL_STATUSES else "No result."))
        self.state_text.setPlainText(_dump(run.state or {}))
        errors = [f"run: {run.error_type or 'error'}: {run.error}"] if run.error else []
        errors += [f"{s.node}: {s.error_type or 'error'}: {s.error}" for s in steps if s.error]
        self.errors_text.setPlainText("\n".join(errors) if errors else "No errors.")
        self.cancel_button.setEnabled(row.status not in TERMINAL_STATUSES and not run.cancel_requested)
        self.cancel_button.setToolTip("" if self.cancel_button.isEnabled() else (
            "Cancel requested: the run stops at its next step boundary (a running script within about a second)."
            if run.cancel_requested else f"The run has {row.status}."))
        self.save_test_button.setEnabled(row.status in TERMINAL_STATUSES)
        self.save_test_button.setToolTip(
            "Save this run as a flow test: its inputs, the answers of its model, HTTP, script and approval steps, "
            "and what it did, replayed by Flow ▸ Run tests and `lockgate test`"
            if self.save_test_button.isEnabled() else "A test is saved from a finished run.")
        if refit:
            self._fit_panes()
        self._select_step(kept_step if kept_step is not None else _interesting_step(steps), reveal=not same_run)

    def _masked(self, inputs: dict[str, object]) -> dict[str, object]:
        return {name: (MASK if name in self.secret_inputs else value) for name, value in inputs.items()}

    def _selected_step_key(self) -> str | None:
        rows = self.steps.selectionModel().selectedRows()
        steps = self._steps()
        return steps[rows[0].row()].step if rows and rows[0].row() < len(steps) else None

    def _steps(self) -> list[Step]:
        return self.run.steps if self.run is not None else []

    def _select_step(self, key: str | None, reveal: bool = True) -> None:
        """Select step `key`; `reveal` scrolls the table and the timeline to it (not on the refresh of the run
        shown, which would take a user's scrolling away from them each second)."""
        for index, step in enumerate(self._steps()):
            if key is not None and step.step == key:
                self.steps.blockSignals(True)
                self.steps.selectRow(index)
                self.steps.blockSignals(False)
                self._show_selected_step(reveal)
                return
        self._show_selected_step(reveal)

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        QTimer.singleShot(0, self._reveal_selected_step)  # the panes have their first sizes only now

    def _panes_moved(self) -> None:
        self.panes_moved = True

    def _panes_resized(self) -> None:
        self._fit_panes()
        self._reveal_selected_step()

    def _fit_panes(self) -> None:
        """Give the timeline and the steps table the height their rows need, the Given / Produced tabs at least
        `TABS_SHARE` (and `TABS_LEAST` px); when both do not fit, the table comes first and the timeline keeps
        `TIMELINE_LEAST`. Not once the user has dragged a pane's edge."""
        panes = self.panes
        total = panes.height() - panes.handleWidth() * (panes.count() - 1)
        if self.panes_moved or total <= 0:
            return
        # Its time axis and a row a bar (its size hint adds a spare row below the last).
        timeline_need = ROW_HEIGHT * (max(len(self.timeline.bars), 1) + 1) + 2 * self.timeline_area.frameWidth()
        steps_need = self._steps_height()
        room = max(0, total - max(TABS_LEAST, round(total * TABS_SHARE)))
        if timeline_need + steps_need <= room:
            timeline, steps = timeline_need, steps_need
        else:
            timeline = max(room - steps_need, min(timeline_need, TIMELINE_LEAST + 2 * self.timeline_area.frameWidth()))
            steps = room - timeline
        panes.setSizes([timeline, steps, total - timeline - steps])

    def _steps_height(self) -> int:
        """The steps table's height with every row shown whole (and its horizontal scroll bar, when its columns
        are wider than the window)."""
        table = self.steps
        frame = 2 * table.frameWidth()
        height = table.horizontalHeader().sizeHint().height() + frame
        height += table.verticalHeader().defaultSectionSize() * table.rowCount()
        header = table.horizontalHeader()  # the error column stretches: the others' widths say if they fit
        columns = sum(header.sectionSize(c) for c in range(header.count()) if c != ERROR_COLUMN)
        if columns + header.minimumSectionSize() > table.width() - frame:
            height += table.horizontalScrollBar().sizeHint().height()
        return height

    def _reveal_selected_step(self) -> None:
        """Scroll the selected step's row, and its bar on the timeline, into view."""
        rows = self.steps.selectionModel().selectedRows()
        steps = self._steps()
        if not rows or rows[0].row() >= len(steps):
            return
        self.steps.scrollTo(rows[0], QAbstractItemView.ScrollHint.EnsureVisible)
        node = steps[rows[0].row()].node
        bar = next((index for index, bar in enumerate(self.timeline.bars) if bar.node == node), None)
        if bar is not None:
            self.timeline_area.ensureVisible(0, ROW_HEIGHT * (bar + 1) + ROW_HEIGHT // 2, 0, ROW_HEIGHT // 2)

    def rerun_node(self) -> str | None:
        """The node Rerun from here would start at: the selected step's, if the run finished and the step is
        not one item of a foreach."""
        key = self._selected_step_key()
        if self.run is None or self.run.status not in TERMINAL_STATUSES or key is None or "[" in key:
            return None
        return key

    def _show_selected_step(self, reveal: bool = True) -> None:
        if reveal:
            self._reveal_selected_step()
        node = self.rerun_node()
        self.rerun_button.setEnabled(node is not None)
        self.rerun_button.setToolTip(f"A new run that reuses the steps before {node} and executes {node} and "
                                     "what follows" if node else "Pick a step of a finished run to rerun from it")
        steps = self._steps()
        rows = self.steps.selectionModel().selectedRows()
        if not rows or rows[0].row() >= len(steps):
            self.step_label.setText("Pick a step to see what it was given and what it produced.")
            self.step_given.setPlainText("")
            self.step_output.setPlainText("")
            return
        step = steps[rows[0].row()]
        error = f" — <span style='color:{status_colour('failed')}'>{_html(str(step.error))}</span>" if (
            step.error) else ""
        self.step_label.setText(f"<b>{_html(step.step or step.node)}</b> "
                                f"({_html(step.type or '')}): {step_status_text(step)}{error}")
        given, output = step.given, step.output
        reused_from = step.reused_from
        if reused_from:
            self.step_label.setText(self.step_label.text() + f" — taken from run <a href='{RUN_LINK}{reused_from}'>"
                                    f"{_html(short_run_id(reused_from))}</a>, not executed again")
        self.step_given.setPlainText(_dump(given) if given is not None else (
            f"Not executed in this run: reused from run {reused_from}, as it was recorded there."
            if reused_from else "Nothing recorded."))
        self.step_output.setPlainText(_dump(output) if output is not None else (
            "Nothing yet." if step.status in ("running", "suspended", "pending") else "Nothing."))

    def _open_linked(self, link: str) -> None:
        if link.startswith(RUN_LINK):
            self.open_run_requested.emit(link[len(RUN_LINK):])

    def _rerun(self) -> None:
        node = self.rerun_node()
        if self.run is not None and node is not None:
            self.rerun_requested.emit(self.run.id, node)
    def _save_test(self) -> None:
        if self.run is not None:
            self.save_test_requested.emit(self.run.id)

    def _cancel(self) -> None:
        if self.run is not None:
            self.cancel_requested.emit(self.run.id)


RUN_LINK = "run:"
"""Links of the parent and child runs: `run:<id>`."""


def _tip_run_link(label: QLabel, link: str) -> None:
    """A run link shows its run's short id; hovering it shows the whole id."""
    label.setToolTip(f"Run {link.removeprefix(RUN_LINK)}" if link.startswith(RUN_LINK) else "")


def related_runs_html(run: RunSummary) -> str:
    """`called by run 1a2b3c4d · rerun of run … from node … · child runs: 5e6f7a8b, …` with a link to open
    each; '' when none."""
    parts = []
    parent = run.parent_run_id
    if parent:
        parts.append(f"called by run <a href='{RUN_LINK}{parent}'>{short_run_id(parent)}</a>")
    rerun_of = run.rerun_of
    if rerun_of:
        parts.append(f"rerun of run <a href='{RUN_LINK}{rerun_of}'>{short_run_id(rerun_of)}</a> from node "
                     f"<b>{_html(run.from_node or '')}</b>")
    children = run.child_run_ids
    if children:
        links = ", ".join(f"<a href='{RUN_LINK}{child}'>{short_run_id(child)}</a>" for child in children)
        parts.append(f"child run{'s' if len(children) != 1 else ''}: {links}")
    return " &nbsp;·&nbsp; ".join(parts)


def _phrases(*parts: str) -> str:
    """The header's phrases, each kept on one line, with a break allowed between them: a narrow window moves a
    whole `started 2026-12-07 20:08:07` or `at done` to the next line."""
    return "&nbsp;&nbsp; ".join(f"<span style='white-space:nowrap'>{part}</span>" for part in parts if part)


def _finished(started: datetime | None, finished: datetime) -> str:
    """When a run finished: its time alone on the day it started, else its date and time."""
    whole = local_time(finished)
    return whole[len("2026-12-31 "):] if started is not None and local_time(started)[:10] == whole[:10] else whole


def _step_tokens(step: Step) -> str:
    tokens_in, tokens_out = step.tokens_in, step.tokens_out
    if tokens_in is None and tokens_out is None:
        return ""
    return tokens_text(tokens_in, tokens_out) if tokens_in or tokens_out else "0"


def _milliseconds(value: float | None) -> str:
    if value is None:
        return ""
    return f"{value:.2f} ms" if value < 10 else f"{value:,.0f} ms"


def _now() -> datetime:
    return datetime.now(UTC)


def _json_view(name: str) -> QPlainTextEdit:
    mono = QFont("monospace")
    mono.setStyleHint(QFont.StyleHint.Monospace)
    view = QPlainTextEdit()
    view.setObjectName(name)
    view.setReadOnly(True)
    view.setFont(mono)
    view.setMinimumHeight(view.fontMetrics().lineSpacing() * 2 + 2 * view.frameWidth())  # the tables first
    return view


def _dump(value: object) -> str:
    return json.dumps(readable_json(value), indent=2, sort_keys=True, default=str, ensure_ascii=False)


def _local(value: str | None) -> str:
    if not value:
        return ""
    moment = datetime.fromisoformat(value)
    return local_time(moment if moment.tzinfo else moment.replace(tzinfo=UTC))


def _html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _interesting_step(steps: list[Step]) -> str | None:
    """The step to show first: the first that failed, else the latest that started."""
    failed = next((s for s in steps if s.status == "failed"), None)
    if failed is not None:
        return failed.step
    started = [s for s in steps if s.started_at]
    return started[-1].step if started else None
