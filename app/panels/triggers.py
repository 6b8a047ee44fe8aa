"""The Triggers panel: one row per trigger node of the current flow's published version, with enable/disable,
the webhook URL (token masked, copy button), the next and last schedule fire, and what each trigger started
or refused."""

from __future__ import annotations

from datetime import UTC, datetime

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHeaderView,
    QLabel,
    QPushButton,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.panels.empty_state import EmptyStateStack
from app.panels.rows import local_time
from app.panels.tables import read_only_table
from app.trigger_rows import TriggerRow, mask_token

COLUMNS = ("Trigger", "Type", "State", "", "Where / next fire", "", "Last fire", "Fired", "Started nothing",
           "Refused", "Loop-guarded")
TOGGLE_COLUMN, WHERE_COLUMN, COPY_COLUMN = 3, 4, 5
HEADER_TIPS = {
    "Fired": "Runs this trigger started",
    "Started nothing": "Fires or deliveries that started no run because the flow or the trigger was disabled",
    "Refused": "Fires whose run was refused (inputs a schedule cannot give, a budget) or a schedule that "
               "cannot be computed",
    "Loop-guarded": "Event fires stopped by the loop guard (a run's own events, or a chain of more than 5 flows)",
}


def _time(epoch: float | None) -> str:
    return local_time(datetime.fromtimestamp(epoch, UTC)) if epoch is not None else ""


class TriggersPanel(QWidget):
    enable_requested = Signal(str, str, bool)
    """(node id, trigger type, enable?) from a row's button."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.rows: list[TriggerRow] = []
        self._shown: tuple[object, ...] | None = None
        """What set_triggers last filled the table from; the watch polls every few seconds, mostly unchanged."""
        self.caption = QLabel(self)
        self.caption.setObjectName("triggersCaption")
        self.caption.setWordWrap(True)
        self.refusals = QLabel(self)
        self.refusals.setObjectName("webhookRefusals")
        self.refusals.setWordWrap(True)  # one line would set the dock's, and so the window's, least width
        self.table = read_only_table("triggersTable", COLUMNS)
        for column, name in enumerate(COLUMNS):
            title_item = self.table.horizontalHeaderItem(column)
            if title_item is not None and name in HEADER_TIPS:
                title_item.setToolTip(HEADER_TIPS[name])
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        self.table.setWordWrap(False)  # one line a trigger: a long URL elides instead of wrapping out of sight
        self.table.setTextElideMode(Qt.TextElideMode.ElideMiddle)  # a webhook URL keeps its host and its token's end
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(WHERE_COLUMN, QHeaderView.ResizeMode.Stretch)
        content = QWidget(self)
        inner = QVBoxLayout(content)
        inner.setContentsMargins(6, 4, 6, 4)
        inner.addWidget(self.caption)
        inner.addWidget(self.table, 1)
        inner.addWidget(self.refusals)
        self.stack = EmptyStateStack(content, self)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.stack)
        self.set_unavailable("The engine is not running, so triggers cannot be read.")

    def set_unavailable(self, reason: str) -> None:
        self.rows = []
        self._shown = None
        self.table.setRowCount(0)
        self.stack.show_message(reason)

    def set_triggers(self, flow_id: str, version: int, flow_enabled: bool, rows: list[TriggerRow],
                     refusals: dict[str, int]) -> None:
        shown = (flow_id, version, flow_enabled, rows, refusals)
        if shown == self._shown:
            return  # a poll that read the same: keep the row widgets instead of rebuilding them
        self._shown = shown
        self.rows = rows
        state = "enabled" if flow_enabled else "disabled: none of its triggers starts a run"
        self.caption.setText(f"{flow_id} v{version} (published), flow {state}. Webhooks and schedules start "
                             "disabled until you enable them here.")
        self.refusals.setText("Webhook deliveries refused before reaching a flow (all flows): "
                              f"unsigned {refusals.get('webhook_unsigned', 0)}, "
                              f"mis-signed {refusals.get('webhook_bad_signature', 0)}, "
                              f"unknown token {refusals.get('webhook_unknown_token', 0)}")
        self.table.setRowCount(len(rows))
        for index, row in enumerate(rows):
            self._fill(index, row)
        if not rows:
            self.stack.show_message(f"{flow_id} v{version} has no trigger nodes; add a trigger (manual, webhook, "
                                    "schedule or event) and publish again.")
        else:
            self.stack.show_content()

    def _fill(self, index: int, row: TriggerRow) -> None:
        where = ""
        if row.type == "trigger.webhook":
            where = (f"{row.url.removesuffix(row.token)}{mask_token(row.token)}" if row.token
                     else "no URL yet: enable it to get one")
        elif row.type == "trigger.schedule":
            where = f"next {_time(row.next_fire)}" if row.next_fire is not None else "no fire while disabled"
        cells = {0: row.title, 1: row.kind, 2: row.state, WHERE_COLUMN: where, 6: _time(row.last_fire),
                 7: str(row.fired), 8: str(row.disabled_hits), 9: str(row.refused), 10: str(row.loop_guarded)}
        for column, text in cells.items():
            item = QTableWidgetItem(text)
            if column == 2 and not row.enabled:
                item.setToolTip(row.notice()[1])
            elif column == WHERE_COLUMN:
                item.setToolTip(text)  # a URL one line high is cut in its middle: the whole of it here
            self.table.setItem(index, column, item)
        # A button that would be made again the same is kept: a poll that changed another cell of its row must
        # not take away a button under the mouse (its click would land on a deleted widget).
        if row.switchable and row.state != "flow disabled":
            on = row.state == "enabled"
            if not self._kept(index, TOGGLE_COLUMN, f"toggle_{row.node_id}", f"{row.type} {on}"):
                toggle = self._button(f"toggle_{row.node_id}", "Disable" if on else "Enable", f"{row.type} {on}",
                                      f"{'Disable' if on else 'Enable'} the {row.kind} trigger \"{row.node_id}\"")
                toggle.clicked.connect(lambda _checked=False, r=row, o=on: self.enable_requested.emit(
                    r.node_id, r.type, not o))
                self.table.setCellWidget(index, TOGGLE_COLUMN, toggle)
        else:
            self.table.setCellWidget(index, TOGGLE_COLUMN, QLabel("", self.table))
        if row.url:
            if not self._kept(index, COPY_COLUMN, f"copy_{row.node_id}", row.url):
                copy = self._button(f"copy_{row.node_id}", "Copy URL", row.url,
                                    "Copy the full webhook URL (with its token) to the clipboard; sign deliveries "
                                    "with HMAC-SHA256 keyed by the token")
                copy.clicked.connect(lambda _checked=False, url=row.url: self.copy_url(url))
                self.table.setCellWidget(index, COPY_COLUMN, copy)
        else:
            self.table.setCellWidget(index, COPY_COLUMN, QLabel("", self.table))

    def _kept(self, index: int, column: int, name: str, what: str) -> bool:
        """Whether the cell holds the button `name` made for `what` already."""
        widget = self.table.cellWidget(index, column)
        return isinstance(widget, QPushButton) and widget.objectName() == name and widget.property("made_for") == what

    def _button(self, name: str, text: str, what: str, tip: str) -> QPushButton:
        button = QPushButton(text, self.table)
        button.setObjectName(name)
        button.setProperty("made_for", what)
        button.setToolTip(tip)
        return button

    def copy_url(self, url: str) -> None:
        QGuiApplication.clipboard().setText(url)

    def row_of(self, node_id: str) -> TriggerRow | None:
        return next((row for row in self.rows if row.node_id == node_id), None)

    def cell_text(self, node_id: str, column: int) -> str:
        index = next((i for i, row in enumerate(self.rows) if row.node_id == node_id), -1)
        item = self.table.item(index, column) if index >= 0 else None
        return item.text() if item is not None else ""
