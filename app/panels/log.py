"""The Log panel: what the app and the engine report, newest last."""

from __future__ import annotations

import logging
from datetime import datetime

from PySide6.QtGui import QFont
from PySide6.QtWidgets import QPlainTextEdit, QVBoxLayout, QWidget

MAX_LOG_LINES = 5000
log = logging.getLogger("lockgate.app")


class LogPanel(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.text = QPlainTextEdit(self)
        self.text.setObjectName("logText")
        self.text.setReadOnly(True)
        self.text.setMaximumBlockCount(MAX_LOG_LINES)
        font = QFont("monospace")
        font.setStyleHint(QFont.StyleHint.Monospace)
        self.text.setFont(font)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.text)

    def append(self, message: str) -> None:
        """Add one line, stamped with the local time; the app's log file gets it too."""
        self.text.appendPlainText(f"{datetime.now():%H:%M:%S}  {message}")
        log.info("%s", message)

    def append_lines(self, lines: list[str]) -> None:
        """Add lines that carry their own time (log records), in one edit."""
        self.text.appendPlainText("\n".join(lines))

    def lines(self) -> list[str]:
        return self.text.toPlainText().splitlines()
