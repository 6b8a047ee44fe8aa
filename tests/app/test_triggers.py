"""The Triggers dock and the canvas's trigger notices on the real embedded engine (machine Redis, SQLite file):
enabling a schedule from the dock makes the engine fire it, a webhook's URL shows with its token masked, and a
signed delivery to a disabled webhook shows in the counters, the Log and the node's tooltip."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QPushButton

from app.examples import example_bytes
from app.panels.triggers import COPY_COLUMN, TOGGLE_COLUMN, WHERE_COLUMN
from app.trigger_rows import TriggerNode, TriggerStatus, mask_token, next_fire_time, trigger_rows
from app.window import MainWindow
from canvas.document import FlowDocument
from engine.flow import Flow, load_flow_text
from engine.triggers.settings import TriggerSetting
from engine.triggers.webhooks import handle_webhook, signature_of

WAIT_MS = 15_000


@pytest.fixture
def window(open_engine_window: Callable[..., MainWindow]) -> MainWindow:
    return open_engine_window(serve_workers=False)


def schedule_flow(enabled: bool = True) -> Flow:
    data: dict[str, Any] = {
        "format": "lockgate.flow/1", "id": "tick", "name": "Tick", "enabled": enabled,
        "nodes": [
            {"id": "clock", "type": "trigger.schedule", "title": "Every second", "position": [0, 0],
             "config": {"every": "1s"}},
            {"id": "done", "type": "terminal", "title": "Done", "position": [240, 0], "config": {}},
        ],
        "edges": [{"from": "clock", "to": "done"}],
    }
    import orjson

    return load_flow_text(orjson.dumps(data))


def publish_open(qtbot, window: MainWindow, flow: Flow) -> None:
    window.add_document(FlowDocument.from_flow(flow))
    assert window.engine is not None
    with qtbot.waitSignal(window.engine.published, timeout=WAIT_MS):
        window.engine.publish()


def wait_for_row(qtbot, window: MainWindow, node_id: str, check: Any) -> None:
    qtbot.waitUntil(lambda: (row := window.triggers.row_of(node_id)) is not None and check(row), timeout=WAIT_MS)


def click_toggle(qtbot, window: MainWindow, node_id: str, text: str) -> None:
    # The row's cell widget, not findChild: a button the table replaced lives on until its deleteLater runs.
    index = next(i for i, row in enumerate(window.triggers.rows) if row.node_id == node_id)
    button = window.triggers.table.cellWidget(index, TOGGLE_COLUMN)
    assert isinstance(button, QPushButton) and button.objectName() == f"toggle_{node_id}"
    assert button.text() == text
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)


def click_copy(qtbot, window: MainWindow, node_id: str) -> None:
    index = next(i for i, row in enumerate(window.triggers.rows) if row.node_id == node_id)
    button = window.triggers.table.cellWidget(index, COPY_COLUMN)  # not findChild: see click_toggle
    assert isinstance(button, QPushButton) and button.objectName() == f"copy_{node_id}"
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)


def test_enabling_a_schedule_from_the_dock_makes_the_engine_fire_it(qtbot, window: MainWindow) -> None:
    publish_open(qtbot, window, schedule_flow())
    wait_for_row(qtbot, window, "clock", lambda row: row.state == "disabled")
    editor = window.tabs.current_editor()
    assert editor is not None
    label, tip = editor.view.node_notice("clock")
    assert label == "disabled" and "schedule disabled — enable it in Triggers" in tip
    assert "no fire while disabled" in window.triggers.cell_text("clock", WHERE_COLUMN)

    click_toggle(qtbot, window, "clock", "Enable")
    wait_for_row(qtbot, window, "clock", lambda row: row.state == "enabled" and row.next_fire is not None)
    assert window.triggers.cell_text("clock", WHERE_COLUMN).startswith("next ")
    assert editor.view.node_notice("clock") == ("", "")
    # The engine's scheduler (a thread of the app's engine, ticking each second) starts runs through this trigger.
    wait_for_row(qtbot, window, "clock", lambda row: row.fired >= 1 and row.last_fire is not None)
    assert any("Schedule \"clock\" of tick enabled" in line for line in window.log.lines())

    click_toggle(qtbot, window, "clock", "Disable")
    wait_for_row(qtbot, window, "clock", lambda row: row.state == "disabled")


def test_a_disabled_flow_marks_its_schedule_and_logs_fires_that_started_nothing(qtbot, window: MainWindow) -> None:
    publish_open(qtbot, window, schedule_flow(enabled=False))
    wait_for_row(qtbot, window, "clock", lambda row: row.state == "flow disabled")
    editor = window.tabs.current_editor()
    assert editor is not None
    assert editor.view.node_notice("clock")[0] == "flow disabled"
    assert window.findChild(QPushButton, "toggle_clock") is None  # the flow, not the trigger, is the fix

    # A schedule enabled before the flow was disabled keeps firing into the void: the app must say so.
    assert window.bridge is not None and window.bridge.services is not None
    from engine.triggers.settings import set_enabled

    services = window.bridge.services
    set_enabled(services.handles.client, services.keys, schedule_flow(enabled=False), "trigger.schedule", True,
                 services.clock.now())
    wait_for_row(qtbot, window, "clock", lambda row: row.disabled_hits >= 1)
    qtbot.waitUntil(lambda: any('Schedule "clock" of tick fired' in line and "started nothing" in line
                                for line in window.log.lines()), timeout=WAIT_MS)
    qtbot.waitUntil(lambda: "last hit" in editor.view.node_notice("clock")[1], timeout=WAIT_MS)
    assert window.triggers.row_of("clock").fired == 0  # type: ignore[union-attr]


def test_webhook_url_is_masked_and_a_signed_post_to_a_disabled_webhook_shows(qtbot, window: MainWindow) -> None:
    publish_open(qtbot, window, load_flow_text(example_bytes("ticket-triage.flow.json")))
    wait_for_row(qtbot, window, "hook", lambda row: row.state == "disabled" and not row.token)
    assert "enable it to get one" in window.triggers.cell_text("hook", WHERE_COLUMN)

    click_toggle(qtbot, window, "hook", "Enable")
    wait_for_row(qtbot, window, "hook", lambda row: row.state == "enabled" and row.token.startswith("whk_"))
    row = window.triggers.row_of("hook")
    assert row is not None
    shown = window.triggers.cell_text("hook", WHERE_COLUMN)
    assert row.token not in shown and shown.endswith(mask_token(row.token)) and "/webhooks/" in shown
    click_copy(qtbot, window, "hook")
    assert QGuiApplication.clipboard().text() == row.url and row.url.endswith(row.token)

    click_toggle(qtbot, window, "hook", "Disable")
    wait_for_row(qtbot, window, "hook", lambda r: r.state == "disabled" and r.token == row.token)
    editor = window.tabs.current_editor()
    assert editor is not None and editor.view.node_notice("hook")[0] == "disabled"

    services = window.bridge.services  # type: ignore[union-attr]
    body = b'{"ticket": {"subject": "Refund", "body": "please"}}'
    answer = handle_webhook(services.handles, services.create_run, row.token,
                            {"X-Hub-Signature-256": signature_of(body, row.token), "X-Delivery-Id": "d-1"}, body)
    assert answer.status == 409 and answer.body["error"]["code"] == "webhook_disabled"
    handle_webhook(services.handles, services.create_run, row.token, {}, body)  # unsigned: refused, counted
    wait_for_row(qtbot, window, "hook", lambda r: r.disabled_hits == 1)
    assert window.triggers.cell_text("hook", 8) == "1"
    qtbot.waitUntil(lambda: "unsigned 1" in window.triggers.refusals.text(), timeout=WAIT_MS)
    qtbot.waitUntil(lambda: "last hit" in editor.view.node_notice("hook")[1], timeout=WAIT_MS)
    assert any('Webhook "hook" of ticket-triage was hit once and started nothing' in line
               for line in window.log.lines())


def test_rows_next_fire_and_mask_without_an_engine() -> None:
    assert mask_token("whk_abcdefghijklmnopqrstuvwxyz") == "whk_••••••••wxyz"
    assert next_fire_time({"every": "10m"}, after=1000.0, now=1000.0) == 1600.0
    assert next_fire_time({"every": "10m"}, after=1000.0, now=2300.0) == 2800.0
    # 09:00 UTC every day; now is 1970-01-01 10:00 UTC → the next day's 09:00.
    assert next_fire_time({"cron": "0 9 * * *"}, after=0.0, now=36000.0) == 86400.0 + 32400.0
    status = TriggerStatus(
        "f", 3, True,
        [TriggerNode("s", "trigger.schedule", "S", {"every": "1m"}), TriggerNode("m", "trigger.manual", "M", {})],
        {"s": TriggerSetting("f", "s", "trigger.schedule", False)}, {"f/s:disabled": 2, "f/s:refused": 1},
        {"m": 4}, now=100.0)
    schedule, manual = trigger_rows(status, "http://x")
    assert (schedule.state, schedule.enabled, schedule.disabled_hits, schedule.refused) == ("disabled", False, 2, 1)
    assert schedule.notice() == ("disabled", "schedule disabled — enable it in Triggers")
    assert (manual.state, manual.enabled, manual.fired, manual.notice()) == ("on with the flow", True, 4, ("", ""))


def test_a_poll_that_changes_a_count_keeps_the_row_buttons_under_the_mouse(qtbot) -> None:
    from dataclasses import replace

    from app.panels.triggers import TriggersPanel
    from app.trigger_rows import TriggerRow

    panel = TriggersPanel()
    qtbot.addWidget(panel)
    url = "http://127.0.0.1:8321/webhooks/whk_abc"
    hook = TriggerRow("hook", "trigger.webhook", "Hook", switchable=True, enabled=True, state="enabled", url=url,
                      token="whk_abc")
    panel.set_triggers("tickets", 1, True, [hook], {})
    copy, toggle = panel.table.cellWidget(0, COPY_COLUMN), panel.table.cellWidget(0, TOGGLE_COLUMN)
    panel.set_triggers("tickets", 1, True, [replace(hook, fired=3)], {})
    assert panel.table.cellWidget(0, COPY_COLUMN) is copy and panel.table.cellWidget(0, TOGGLE_COLUMN) is toggle
    assert panel.table.item(0, 7).text() == "3"
    qtbot.mouseClick(copy, Qt.MouseButton.LeftButton)
    assert QGuiApplication.clipboard().text() == url

    panel.set_triggers("tickets", 1, True, [replace(hook, state="disabled", enabled=False, url=url + "x")], {})
    assert panel.table.cellWidget(0, COPY_COLUMN) is not copy and panel.table.cellWidget(0, TOGGLE_COLUMN) is not toggle
    assert isinstance(toggle := panel.table.cellWidget(0, TOGGLE_COLUMN), QPushButton) and toggle.text() == "Enable"


def test_the_refusal_counts_wrap_so_the_dock_does_not_widen_the_window(qtbot) -> None:
    from app.panels.triggers import TriggersPanel
    from app.trigger_rows import TriggerRow

    panel = TriggersPanel()
    qtbot.addWidget(panel)
    hook = TriggerRow("hook", "trigger.webhook", "Hook", switchable=True, enabled=True, state="enabled",
                      url="http://127.0.0.1:8321/webhooks/whk_abc", token="whk_abc")
    panel.set_triggers("tickets", 1, True, [hook],
                       {"webhook_unsigned": 12, "webhook_bad_signature": 3, "webhook_unknown_token": 1})
    # A bottom dock beside the canvas in a 1100 px window is about 500 px wide.
    assert panel.minimumSizeHint().width() <= 400
    assert "unsigned 12" in panel.refusals.text() and "unknown token 1" in panel.refusals.text()


def test_a_webhook_url_cut_to_one_line_keeps_its_end_and_shows_whole_in_its_tooltip(qtbot) -> None:
    from app.panels.triggers import WHERE_COLUMN, TriggersPanel
    from app.trigger_rows import TriggerRow

    panel = TriggersPanel()
    qtbot.addWidget(panel)
    hook = TriggerRow("hook", "trigger.webhook", "Hook", switchable=True, enabled=True, state="enabled",
                      url="http://127.0.0.1:8321/webhooks/whk_abcdefgh12345678", token="whk_abcdefgh12345678")
    panel.set_triggers("tickets", 1, True, [hook], {})
    item = panel.table.item(0, WHERE_COLUMN)
    assert item is not None and item.toolTip() == item.text() and item.text().endswith("5678")
    assert panel.table.textElideMode() == Qt.TextElideMode.ElideMiddle and not panel.table.wordWrap()
