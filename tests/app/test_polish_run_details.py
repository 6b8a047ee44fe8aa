"""The run details window uses its room: at its default size every step of a short run and every bar of its
timeline show, with room left for what the selected step was given and produced; made small, the selected
step stays in view; the header breaks between phrases, never inside one (a date and its time, `at <node>`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from PySide6.QtGui import QTextDocument
from PySide6.QtWidgets import QApplication, QLabel

from app.panels.rows import local_time
from app.panels.timeline import ROW_HEIGHT
from app.run_details import RunDetails
from engine.read_models import Run, Step

START = datetime(2026, 12, 7, 20, 8, 7, tzinfo=UTC)
NODES = (("hook", "trigger.webhook", 0.0, 0.01), ("reserve", "budget.reserve", 0.1, 0.13),
         ("classify", "ai.model", 0.2, 0.64), ("route", "router", 1.0, 1.003), ("approve", "approval", 1.1, 16.0),
         ("refund", "http.request", 16.1, 16.3), ("done", "terminal", 17.0, 17.003))


def _at(seconds: float) -> str:
    return (START + timedelta(seconds=seconds)).isoformat()


def triage_run() -> Run:
    steps = [Step(step=node, node=node, type=kind, status="succeeded", attempts=1,
                  duration_ms=min(end - start, 0.5) * 1000, started_at=_at(start), finished_at=_at(end),
                  given={"output": "refund"}, output={})
             for node, kind, start, end in NODES]
    steps += [Step(step=node, node=node, status="skipped") for node in ("followup", "note", "declined")]
    return Run(id="01a2521eeb958fb4bbe5b38f6c90c65e", flow_id="ticket-triage", version=1, status="succeeded",
               current_node="done", started_at=_at(0), finished_at=_at(17), cost_micros=15, tokens_in=24,
               tokens_out=2, state={}, steps=steps)


def shown(qtbot, width: int | None = None, height: int | None = None) -> RunDetails:
    details = RunDetails()
    qtbot.addWidget(details)
    details.show_run(triage_run())
    if width is not None and height is not None:
        details.resize(width, height)
    details.show()
    qtbot.waitExposed(details)
    for _ in range(3):
        QApplication.processEvents()
    qtbot.wait(50)
    return details


def rows_in_view(details: RunDetails) -> list[int]:
    table = details.steps
    view = table.viewport().rect()
    return [row for row in range(table.rowCount())
            if view.contains(table.visualRect(table.model().index(row, 0)))]


def header_lines(label: QLabel) -> list[str]:
    """The header's text as the label lays it out, one string per line (non-breaking spaces as spaces)."""
    document = QTextDocument()
    document.setDocumentMargin(0)
    document.setDefaultFont(label.font())
    document.setHtml(label.text())
    document.setTextWidth(label.contentsRect().width())
    document.size()  # lays the text out
    lines = []
    block = document.begin()
    while block.isValid():
        layout = block.layout()
        for index in range(layout.lineCount()):
            line = layout.lineAt(index)
            text = block.text()[line.textStart():line.textStart() + line.textLength()]
            lines.append(text.replace("\u00a0", " ").replace("\u2028", "").strip())
        block = block.next()
    return lines


def test_default_size_shows_every_step_and_bar(qtbot) -> None:
    details = shown(qtbot)
    assert rows_in_view(details) == list(range(details.steps.rowCount()))
    bars = len(details.timeline.bars)
    assert bars == 7 and details.timeline_area.viewport().height() >= ROW_HEIGHT * (bars + 1)  # the axis, each bar
    # What the selected step was given and produced keeps room for several lines.
    lines = details.step_given.viewport().height() // details.step_given.fontMetrics().lineSpacing()
    assert lines >= 4


def test_small_window_keeps_the_selected_step_in_view(qtbot) -> None:
    details = shown(qtbot, 700, 500)
    selected = details.steps.selectionModel().selectedRows()
    assert [index.row() for index in selected] == [6]  # done: the latest step that started
    in_view = rows_in_view(details)
    assert 6 in in_view
    assert len(in_view) >= 4
    timeline_rows = details.timeline_area.viewport().height() // ROW_HEIGHT
    assert timeline_rows >= 4  # the time axis and three bars


@pytest.mark.parametrize("size", [None, (700, 500)], ids=["default-size", "700x500"])
def test_header_breaks_between_phrases(qtbot, size: tuple[int, int] | None) -> None:
    details = shown(qtbot, *(size or (None, None)))
    lines = header_lines(details.header)
    phrases = ["ticket-triage v1", "● succeeded", f"started {local_time(START)}",
               f"finished {local_time(START + timedelta(seconds=17))[11:]}", "took 17s", "at done",
               "run 01a2521eeb958fb4bbe5b38f6c90c65e"]
    for phrase in phrases:
        assert any(phrase in line for line in lines), (phrase, lines)
    assert len(lines) == 2, lines  # the run's status line whole (finished the day it started: its time), its id
