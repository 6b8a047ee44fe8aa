"""The live path's cheap parts: one hand-off per frame from the pub/sub thread (real Redis), and table rows
that change without a model reset."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

import orjson
import redis
from PySide6.QtCore import QModelIndex

from app.live import LiveState, row_at_place, row_of_place
from app.live_subscriber import LiveSubscriber
from app.panels.rows import RunRow
from app.panels.runs import RunsPanel
from engine.runtime.live_change import LiveChange

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def test_a_burst_of_changes_reaches_the_gui_in_few_handoffs_and_none_is_lost(redis_url: str,
                                                                               key_prefix: str) -> None:
    client = redis.Redis.from_url(redis_url, socket_timeout=10)
    channel = f"{key_prefix}:live"
    ready = threading.Event()
    taken: list[LiveChange] = []
    subscriber = LiveSubscriber(client, channel, ready.set, frame_s=0.05).start()
    try:
        publisher = redis.Redis.from_url(redis_url, socket_timeout=5)
        for seq in range(600):
            publisher.publish(channel, orjson.dumps({"run_id": f"r{seq % 50}", "flow_id": "f", "version": 1, "seq": seq,
                                                     "status": "running", "event": "step_started"}))
        takes = 0
        deadline = time.monotonic() + 10
        while len(taken) < 600 and time.monotonic() < deadline:
            if ready.wait(0.5):
                ready.clear()
                # A slow GUI: while it has not taken the batch, no second hand-off is announced.
                time.sleep(0.03)
                taken.extend(subscriber.take())
                takes += 1
        assert [c.seq for c in taken] == list(range(600))  # all of them, in order, typed
        assert subscriber.handoffs < 60  # gathered, not one call per message
        assert subscriber.handoffs == takes  # never announced again before the last batch was taken
        assert subscriber.take() == []
    finally:
        subscriber.stop()


def _row(run_id: str, minutes_ago: int, status: str = "running") -> RunRow:
    return RunRow(run_id, "f", 1, status, NOW - timedelta(minutes=minutes_ago), None, None)


def test_runs_rows_change_in_place_and_new_ones_are_inserted_without_a_reset(qtbot) -> None:
    panel = RunsPanel(now=lambda: NOW)
    qtbot.addWidget(panel)
    panel.set_runs([_row("a", 3), _row("b", 2)])
    resets: list[int] = []
    inserted: list[tuple[int, int]] = []
    changed: list[tuple[int, int]] = []
    model = panel.model
    model.modelReset.connect(lambda: resets.append(1))
    model.rowsInserted.connect(lambda _parent, first, last: inserted.append((first, last)))
    model.dataChanged.connect(lambda top, bottom, _roles=(): changed.append((top.row(), bottom.row())))
    with qtbot.waitSignal(panel.run_selected):
        panel.select_row(1)  # "a" (older, below "b")

    live = LiveState()
    live.apply_change(LiveChange("a", "f", 1, "waiting", 5, "run_parked",
                                 waiting_on={"node": "gate", "reason": "approval"}))
    panel.update_runs([row_at_place(panel.rows["a"], live.runs["a"])])
    assert resets == [] and changed == [(1, 1)]
    assert panel.cell_text(1, 0) == "● waiting" and panel.cell_text(1, 7).startswith("gate: approval")

    live.apply_change(LiveChange("c", "f", 1, "queued", 1, "run_started"))
    panel.update_runs([row_of_place(live.runs["c"], NOW)])
    assert resets == [] and inserted == [(0, 0)]
    assert [panel.cell_text(r, 8) for r in range(3)] == ["c", "b", "a"]
    # The selected run stays selected through both.
    assert [i.row() for i in panel.table.selectionModel().selectedRows()] == [2]

    # A list in another order is a reset (the honest fallback).
    panel.set_runs([_row("a", 1), _row("b", 2)])
    assert resets == [1] and model.rowCount(QModelIndex()) == 2
