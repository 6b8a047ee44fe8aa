"""Ctrl-C in the app's terminal and SIGTERM close the main window as its close button does (the app ignored
Ctrl-C, and SIGTERM ended it without closing): unsaved flows are asked about; the process exits 0."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from PySide6.QtWidgets import QMessageBox

from app.stop_on_signals import WindowCloser
from app.window import MainWindow

READY = "Ctrl-C or SIGTERM closes the window"


@pytest.mark.parametrize("sent", [signal.SIGINT, signal.SIGTERM])
def test_a_stop_signal_closes_the_app_and_it_exits_0(tmp_path: Path, sent: signal.Signals) -> None:
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", LOCKGATE_NO_ENGINE="1",
               XDG_CONFIG_HOME=str(tmp_path / "config"), LOCKGATE_DATA_DIR=str(tmp_path / "data"),
               LOCKGATE_LOG_DIR=str(tmp_path / "log"), LOCKGATE_LOG_LEVEL="info")
    log = tmp_path / "log" / "app.log"
    process = subprocess.Popen([sys.executable, "-m", "app"], env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not (log.exists() and READY in log.read_text()):
            assert process.poll() is None and time.monotonic() < deadline, "the app did not open its window"
            time.sleep(0.1)
        process.send_signal(sent)
        assert process.wait(30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert f"{sent.name}: closing the window" in log.read_text()


def test_a_signal_asks_about_unsaved_flows_and_a_later_one_asks_again(qtbot, window: MainWindow) -> None:
    window.new_flow().rename_flow("Unsaved")
    answers = [QMessageBox.StandardButton.Cancel, QMessageBox.StandardButton.Discard]
    asked: list[str] = []

    def answer(document) -> QMessageBox.StandardButton:
        asked.append(document.header().name)
        return answers[len(asked) - 1]

    window.ask_to_save = answer
    closer = WindowCloser(window).install()
    try:
        os.kill(os.getpid(), signal.SIGINT)
        qtbot.waitUntil(lambda: asked == ["Unsaved"], timeout=5000)
        qtbot.wait(100)
        assert window.isVisible()  # kept open: the person cancelled
        os.kill(os.getpid(), signal.SIGINT)  # not a "second signal": the first was answered
        qtbot.waitUntil(lambda: not window.isVisible(), timeout=5000)
    finally:
        closer.restore()
    assert asked == ["Unsaved", "Unsaved"]
