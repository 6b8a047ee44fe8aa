"""A stack showing either a panel's content or one sentence saying why it is empty."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QStackedWidget, QWidget


class EmptyStateStack(QStackedWidget):
    def __init__(self, content: QWidget, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.message = QLabel(self)
        self.message.setObjectName("emptyHint")
        self.message.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.message.setWordWrap(True)
        self.content = content
        self.addWidget(self.message)
        self.addWidget(content)

    def show_message(self, text: str) -> None:
        self.message.setText(text)
        self.setCurrentWidget(self.message)

    def show_content(self) -> None:
        self.setCurrentWidget(self.content)

    @property
    def showing_message(self) -> bool:
        return self.currentWidget() is self.message
