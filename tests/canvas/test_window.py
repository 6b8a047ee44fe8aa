"""`python -m canvas`: the plain window wires palette, editor, undo and save."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from canvas.__main__ import CanvasWindow, main
from canvas.document import FlowDocument

from .conftest import TRIAGE


def test_window_palette_adds_at_centre_and_saves(qtbot: QtBot, triage_path: Path) -> None:
    document = FlowDocument.open(triage_path)
    window = CanvasWindow(document)
    qtbot.addWidget(window)
    window.show()
    window.palette_widget.tree.itemActivated.emit(window.palette_widget.item_for("join"), 0)
    added = document.flow().nodes[-1]
    assert added.type == "join"
    assert "•" in window.windowTitle()
    document.undo_stack.undo()
    window.save()
    assert triage_path.read_bytes() == TRIAGE.read_bytes()
    assert "•" not in window.windowTitle()


def test_main_refuses_a_file_that_is_not_a_flow(
    qapp: QApplication, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "notes.flow.json"
    bad.write_text("[1, 2]")
    assert main([str(bad)]) == 1
    assert "a flow is a JSON object" in capsys.readouterr().err
