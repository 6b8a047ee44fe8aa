"""Moves log records into the Log dock: a GUI-thread timer drains the records' buffer in batches.

Threads that log only append to the buffer (`engine.logs.RecordBuffer`, formatted there); nothing but this
timer, on the GUI thread, touches the widget.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, QTimer

from app.panels.log import LogPanel
from engine.logs import RecordBuffer

FEED_MS = 100
LINES_PER_TICK = 200
"""At most this many lines per tick, so a burst of records cannot hold the GUI thread."""


class LogFeed(QObject):
    def __init__(self, panel: LogPanel, records: RecordBuffer, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.panel = panel
        self.records = records
        self.timer = QTimer(self)
        self.timer.setInterval(FEED_MS)
        self.timer.timeout.connect(self.drain)
        self.timer.start()

    def drain(self) -> int:
        """Append what the buffer holds (up to a tick's worth); returns how many lines were added."""
        drained = self.records.drain(LINES_PER_TICK)
        lines = list(drained.lines)
        if drained.dropped:
            lines.insert(0, f"… {drained.dropped} log record(s) not shown (they came faster than the Log can "
                            "show them); the log file has them")
        if lines:
            self.panel.append_lines(lines)
        return len(lines)
