"""Countdowns keep ticking from the controller's injected clock: the Runs panel's duration and time left, and
the canvas's "approval · 59m left" under the node a followed run waits at, also after the draft is edited."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

from app.live import waiting_text
from app.panels.rows import RunRow
from app.panels.runs import RunsPanel
from app.window import MainWindow
from canvas.document import FlowDocument
from engine.flow import flow_from_data
from tests.app.test_engine_wiring import APPROVAL_FLOW

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def test_runs_panel_recounts_unfinished_runs_each_tick(qtbot) -> None:
    moment = [NOW]
    panel = RunsPanel(now=lambda: moment[0])
    qtbot.addWidget(panel)
    panel.set_runs([
        RunRow("parked", "f", 1, "waiting", NOW - timedelta(minutes=2), None, None, current_node="ask",
               waiting_reason="approval", waiting_until=NOW + timedelta(minutes=10)),
        RunRow("done", "f", 1, "succeeded", NOW - timedelta(minutes=5), NOW - timedelta(minutes=4), 0.0),
    ])
    rows = {panel.cell_text(r, 8): r for r in range(panel.row_count())}
    assert panel.cell_text(rows["parked"], 4) == "2m"
    assert panel.cell_text(rows["parked"], 7) == "ask: approval (10m left)"
    changed: list[tuple[int, int, int, int]] = []
    panel.model.dataChanged.connect(lambda top, bottom, _roles=(): changed.append(
        (top.row(), top.column(), bottom.row(), bottom.column())))
    moment[0] = NOW + timedelta(seconds=90)
    panel.refresh_times()
    assert changed == [(rows["parked"], 4, rows["parked"], 7)]  # only the unfinished run's time cells
    assert panel.cell_text(rows["parked"], 4) == "3m30s"
    assert panel.cell_text(rows["parked"], 7) == "ask: approval (8m30s left)"
    assert panel.cell_text(rows["done"], 4) == "1m"


def test_the_waiting_countdown_on_the_canvas_ticks_after_the_flow_is_edited(qtbot,
                                                                           engine_window: MainWindow) -> None:
    window = engine_window
    document = FlowDocument.from_flow(flow_from_data(APPROVAL_FLOW))
    window.add_document(document)
    window.actions_by_id["live"].trigger()
    engine = window.engine
    assert engine is not None and engine.live_on
    window.publish()
    qtbot.waitUntil(lambda: "refund-ok v1 published" in window.statusBar().currentMessage(), timeout=10_000)
    window.ask_run_inputs = lambda _flow: {"ticket": "T-7"}
    window.run_flow()
    qtbot.waitUntil(lambda: any(r.status == "waiting" for r in window.runs.rows.values()), timeout=20_000)
    run_id = next(iter(window.runs.rows))
    editor = window.tabs.current_editor()
    assert editor is not None and editor.document is document
    engine.select_run(run_id)

    def label() -> str:
        editor.view.flush_live()
        item = editor.view.node_item("ask")
        return item.live.label_below() if item is not None else ""

    qtbot.waitUntil(lambda: label().startswith("approval · "), timeout=20_000)
    waiting_on = engine.live.runs[run_id].waiting_on
    assert waiting_on is not None

    # Edit the draft: it no longer equals the published version the run is on.
    document.set_config_field("ask", "message", "Refund {{ inputs.ticket }} now?")
    start = time.time()
    engine.clock = lambda: start + 600
    engine.tick()
    expected = waiting_text(waiting_on, start + 600)
    qtbot.waitUntil(lambda: label() == expected, timeout=20_000)
    assert expected in ("approval · 50m left", "approval · 49m59s left")  # ten minutes less than the hour
    assert window.runs.rows[run_id].where(window.runs.now()).endswith(
        f"({expected.removeprefix('approval · ').removesuffix(' left')} left)")
    engine.clock = lambda: start + 1200
    engine.tick()
    later = waiting_text(waiting_on, start + 1200)
    qtbot.waitUntil(lambda: label() == later, timeout=20_000)
    assert later != expected
