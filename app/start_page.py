"""What the canvas area shows while no flow is open: start a new flow, open an example, a file or a recent one.

The window shows it in place of the canvas tabs whenever the last tab closes (and on a start that reopens
nothing), and hides it once a flow is open.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFont
from PySide6.QtWidgets import QHBoxLayout, QLabel, QMenu, QPushButton, QScrollArea, QVBoxLayout, QWidget

RECENT_SHOWN = 5
"""Recent files listed here (File ▸ Open Recent lists them all)."""


class StartPage(QScrollArea):
    """Emits what the user picked; the window opens it. `examples` are the bundled examples' file names, the
    first one the example a first start opens."""

    new_requested = Signal()
    open_requested = Signal()
    example_requested = Signal(str)
    recent_requested = Signal(str)

    def __init__(self, examples: list[str], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("startPage")
        self.setWidgetResizable(True)
        self.setFrameShape(QScrollArea.Shape.NoFrame)
        page = QWidget(self)
        title = QLabel("No flow is open", page)
        title.setObjectName("startTitle")
        font = QFont(title.font())
        font.setPointSizeF(font.pointSizeF() * 1.5)
        font.setBold(True)
        title.setFont(font)
        title.setAlignment(Qt.AlignmentFlag.AlignCenter)
        hint = QLabel("Start a new flow, or open an example to see a flow that runs, waits and asks for approval.",
                      page)
        hint.setObjectName("emptyHint")
        hint.setWordWrap(True)
        hint.setAlignment(Qt.AlignmentFlag.AlignCenter)

        self.new_button = QPushButton("New flow", page)
        self.new_button.setObjectName("startNewFlow")
        self.new_button.setToolTip("An empty flow in a new tab (Ctrl+N)")
        self.new_button.setDefault(True)
        self.new_button.clicked.connect(self.new_requested.emit)
        self.example_button = QPushButton("Open example", page)
        self.example_button.setObjectName("startOpenExample")
        self.example_button.setToolTip("A bundled example flow, unsaved, that runs offline")
        self.example_menu = QMenu(self.example_button)
        for name in examples:
            action = self.example_menu.addAction(name.removesuffix(".flow.json"))
            action.triggered.connect(lambda _checked=False, n=name: self.example_requested.emit(n))
        self.example_button.setMenu(self.example_menu)
        self.open_button = QPushButton("Open…", page)
        self.open_button.setObjectName("startOpen")
        self.open_button.setToolTip("Open a *.flow.json file (Ctrl+O)")
        self.open_button.clicked.connect(self.open_requested.emit)
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        for button in (self.new_button, self.example_button, self.open_button):
            buttons.addWidget(button)
        buttons.addStretch(1)

        self.recent_title = QLabel("<b>Open recent</b>", page)
        self.recent_list = QVBoxLayout()
        self.recent_buttons: list[QPushButton] = []
        layout = QVBoxLayout(page)
        layout.addStretch(1)
        layout.addWidget(title)
        layout.addWidget(hint)
        layout.addSpacing(8)
        layout.addLayout(buttons)
        layout.addSpacing(12)
        layout.addWidget(self.recent_title, 0, Qt.AlignmentFlag.AlignHCenter)
        layout.addLayout(self.recent_list)
        layout.addStretch(2)
        self.setWidget(page)
        self.show_recent([])

    def show_recent(self, paths: list[str]) -> None:
        """List the recent flow files that still exist (the newest first); the list hides when none do."""
        for button in self.recent_buttons:
            self.recent_list.removeWidget(button)
            button.deleteLater()
        self.recent_buttons = []
        for path in [p for p in paths if Path(p).is_file()][:RECENT_SHOWN]:
            button = QPushButton(f"{Path(path).name}  —  {_folder_text(Path(path).parent)}", self.widget())
            button.setObjectName("startRecentFile")
            button.setFlat(True)
            button.setToolTip(path)
            button.clicked.connect(lambda _checked=False, p=path: self.recent_requested.emit(p))
            self.recent_list.addWidget(button, 0, Qt.AlignmentFlag.AlignHCenter)
            self.recent_buttons.append(button)
        self.recent_title.setVisible(bool(self.recent_buttons))


def _folder_text(folder: Path) -> str:
    """`~/flows` for a folder in the home folder; the full path otherwise."""
    try:
        return str(Path("~") / folder.relative_to(Path.home()))
    except ValueError:
        return str(folder)
