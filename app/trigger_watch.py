"""Keeps the Triggers panel and the canvas's trigger notices current for the flow in the open tab.

Reads go through the bridge (engine thread) every few seconds while the engine runs, one at a time. A
trigger that starts nothing (disabled, or its flow disabled) gets a notice on its node; when its "started
nothing" counter grows, the Log says so and the node's tooltip says when: no silent void.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, QTimer, Signal

from app.bridge import EngineBridge
from app.trigger_rows import TriggerRow, TriggerStatus, trigger_rows, webhook_refusals

if TYPE_CHECKING:
    from app.window import MainWindow
    from engine.triggers.settings import TriggerSetting

POLL_MS = 2000


class TriggerWatch(QObject):
    refreshed = Signal(str)
    """(flow id) after the panel and the canvas show a fresh read."""

    def __init__(self, window: MainWindow, bridge: EngineBridge) -> None:
        super().__init__(window)
        self.window = window
        self.bridge = bridge
        self.clock: Callable[[], float] = time.time
        self.base_url = ""
        self._timer = QTimer(self)
        self._timer.setInterval(POLL_MS)
        self._timer.timeout.connect(self.refresh)
        self._reading = False
        self._again = False
        self.hits_seen: dict[tuple[str, str], int] = {}
        """Last "started nothing" count seen per (flow, node); the first read is the baseline."""
        self.last_hit_at: dict[tuple[str, str], float] = {}
        bridge.state_changed.connect(self._state_changed)
        window.triggers.enable_requested.connect(self.set_enabled)
        window.tabs.current_document_changed.connect(lambda _document: self.refresh())
        self._state_changed(bridge.state)

    def _state_changed(self, state: str) -> None:
        if state == "running":
            self._timer.start()
            self.refresh()
        else:
            self._timer.stop()
            self.window.triggers.set_unavailable(
                f"The engine is not running ({state}), so triggers cannot be read or switched.")

    def current_flow_id(self) -> str | None:
        document = self.window.document
        return document.flow_ref().id if document is not None else None

    def refresh(self) -> None:
        """Read the current flow's triggers now (or right after the read in flight)."""
        flow_id = self.current_flow_id()
        if not self.bridge.available:
            return
        if flow_id is None:
            self.window.triggers.set_unavailable("Open a flow to see its triggers.")
            return
        if self._reading:
            self._again = True
            return
        self._reading = True
        self.bridge.trigger_status(flow_id, self._read)

    def _read(self, status: TriggerStatus | None, error: BaseException | None) -> None:
        self._reading = False
        if self._again:
            self._again = False
            self.refresh()
            return
        if error is not None or status is None:
            self.window.triggers.set_unavailable(f"Triggers cannot be read: {error}")
            return
        self.show(status)

    def show(self, status: TriggerStatus) -> None:
        if status.flow_id != self.current_flow_id():
            return  # the tab changed while reading; that tab's own read follows
        if status.version is None:
            self.window.triggers.set_unavailable(
                f"{status.flow_id} is not published: publish it (Ctrl+Shift+P), then enable its webhooks and "
                "schedules here.")
            self._mark_canvas(status.flow_id, [])
            self.refreshed.emit(status.flow_id)
            return
        rows = trigger_rows(status, self.base_url or self.bridge.webhook_base_url)
        self._note_hits(status.flow_id, rows)
        self.window.triggers.set_triggers(status.flow_id, status.version, status.flow_enabled, rows,
                                          webhook_refusals(status.counters))
        self._mark_canvas(status.flow_id, rows)
        self.refreshed.emit(status.flow_id)

    def _note_hits(self, flow_id: str, rows: list[TriggerRow]) -> None:
        for row in rows:
            key = (flow_id, row.node_id)
            before = self.hits_seen.get(key)
            self.hits_seen[key] = row.disabled_hits
            if before is not None and row.disabled_hits > before:
                self.last_hit_at[key] = self.clock()
                new = row.disabled_hits - before
                what = "fired" if row.type == "trigger.schedule" else "was hit"
                why = "its flow is disabled" if row.state == "flow disabled" else f"the {row.kind} trigger is disabled"
                self.window.log.append(f'{row.kind.capitalize()} "{row.node_id}" of {flow_id} {what} '
                                       f"{'once' if new == 1 else f'{new} times'} and started nothing: {why} "
                                       "(enable it in Triggers)")

    def _mark_canvas(self, flow_id: str, rows: list[TriggerRow]) -> None:
        editor = self.window.tabs.current_editor()
        if editor is None or editor.document.flow_ref().id != flow_id:
            return
        notices: dict[str, tuple[str, str]] = {}
        for row in rows:
            label, tip = row.notice()
            hit_at = self.last_hit_at.get((flow_id, row.node_id))
            if hit_at is not None and row.disabled_hits:
                tip = (f"{tip or f'{row.kind} trigger'}; last hit {datetime.fromtimestamp(hit_at):%H:%M:%S} "
                       f"started nothing ({row.disabled_hits} in all)")
                label = label or "hit while disabled"
            if label:
                notices[row.node_id] = (label, tip)
        editor.view.set_node_notices(notices)

    def set_enabled(self, node_id: str, trigger_type: str, enabled: bool) -> None:
        flow_id = self.current_flow_id()
        if flow_id is None:
            return
        kind = trigger_type.removeprefix("trigger.")

        def done(settings: list[TriggerSetting] | None, error: BaseException | None) -> None:
            if error is not None:
                self._say(f'{kind.capitalize()} "{node_id}" of {flow_id} not {"enabled" if enabled else "disabled"}: '
                          f"{error}")
            else:
                self._say(f'{kind.capitalize()} "{node_id}" of {flow_id} {"enabled" if enabled else "disabled"}')
            self.refresh()

        self.bridge.set_trigger_enabled(flow_id, node_id, trigger_type, enabled, done)

    def _say(self, message: str) -> None:
        self.window.statusBar().showMessage(message, 8000)
        self.window.log.append(message)
