"""The run details window of a run whose cancel waits for the worker holding it: its status says the cancel was
asked, and Cancel cannot be pressed again."""

from __future__ import annotations

from pytestqt.qtbot import QtBot

from app.run_details import RunDetails
from engine.read_models import Run


def test_a_requested_cancel_shows_and_disables_cancel(qtbot: QtBot) -> None:
    details = RunDetails()
    qtbot.addWidget(details)
    running = Run(id="r1", flow_id="slow", version=1, status="running", current_node="call",
                  started_at="2026-12-07T10:00:00+00:00")
    details.show_run(running)
    assert "● running</span>" in details.header.text() and details.cancel_button.isEnabled()
    details.show_run(running.model_copy(update={"cancel_requested": True}))
    assert "● running (cancel requested)</span>" in details.header.text()
    assert not details.cancel_button.isEnabled()
    assert details.cancel_button.toolTip().startswith("Cancel requested: the run stops at its next step boundary")
