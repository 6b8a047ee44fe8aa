"""What the window says and remembers: the tabs open at the last quit come back, file dialogs start in the last
folder, Problems says when no flow is open and shows a problem's whole text, the engine's start is said once,
and the first-start hint shows only with its example."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication, QFileDialog, QMessageBox

from app.examples import FIRST_START_HINT, example_bytes
from app.gui import create_application, create_main_window
from app.settings import AppSettings
from app.window import MainWindow, engine_state_text
from tests.app.conftest import make_bridge


def _window(qtbot, settings: AppSettings) -> MainWindow:
    window = create_main_window(create_application(), settings, start_engine=False)
    qtbot.addWidget(window)
    window.ask_to_save = lambda _document: QMessageBox.StandardButton.Discard
    window.show()
    return window


def test_restart_reopens_the_tabs_that_were_open(qtbot, tmp_path: Path, app_settings: AppSettings,
                                                 no_engine_env: None) -> None:
    app_settings.first_start_done = True
    folder = tmp_path / "flows"
    folder.mkdir()
    triage, hello = folder / "triage.flow.json", folder / "hello.flow.json"
    triage.write_bytes(example_bytes("ticket-triage.flow.json"))
    hello.write_bytes(example_bytes("hello.flow.json"))
    first = _window(qtbot, app_settings)
    first.open_file(triage)
    first.open_file(hello)
    first.new_flow()  # never saved: nothing to reopen
    first.tabs.setCurrentIndex(1)
    first.close()
    assert not first.isVisible()

    again = _window(qtbot, app_settings)
    assert [Path(str(d.path)) for d in again.tabs.documents()] == [triage.resolve(), hello.resolve()]
    assert again.document is not None and Path(str(again.document.path)) == hello.resolve()
    again.close()

    hello.unlink()  # gone since: the others still open
    third = _window(qtbot, app_settings)
    assert [Path(str(d.path)) for d in third.tabs.documents()] == [triage.resolve()]


def test_file_dialogs_start_in_the_last_folder(qtbot, tmp_path: Path, app_settings: AppSettings,
                                              no_engine_env: None) -> None:
    app_settings.first_start_done = True
    folder = tmp_path / "somewhere" / "flows"
    folder.mkdir(parents=True)
    path = folder / "triage.flow.json"
    path.write_bytes(example_bytes("ticket-triage.flow.json"))
    window = _window(qtbot, app_settings)
    window.open_file(path)
    assert Path(app_settings.last_folder) == folder.resolve()
    later = _window(qtbot, app_settings)
    seen: list[str] = []

    def answer() -> None:
        dialog = QApplication.activeModalWidget()
        if not isinstance(dialog, QFileDialog):
            QTimer.singleShot(50, answer)
            return
        seen.append(dialog.directory().absolutePath())
        dialog.reject()

    QTimer.singleShot(50, answer)
    assert later._open_path_dialog() is None
    QTimer.singleShot(50, answer)
    later.new_flow()
    assert later.document is not None
    assert later._save_path_dialog(later.document) is None
    assert [Path(p) for p in seen] == [folder.resolve(), folder.resolve()]


def test_problems_says_when_no_flow_is_open_and_shows_the_whole_message(qtbot, app_settings: AppSettings,
                                                                       no_engine_env: None) -> None:
    app_settings.first_start_done = True
    window = _window(qtbot, app_settings)
    summary = window.problems.summary.text()
    assert "No flow is open" in summary and "can be published" not in summary
    document = window.new_flow()
    document.add_node("approval", (200, 0))  # no trigger, no timeout: problems with fixes in their text
    document.validate_now()
    diagnostics = window.problems.diagnostics
    assert diagnostics
    detail = window.problems.detail
    assert detail.isVisible() and detail.wordWrap()
    assert diagnostics[0].message in detail.text()
    window.problems.table.selectRow(len(diagnostics) - 1)
    assert diagnostics[-1].message in detail.text() and diagnostics[-1].code in detail.text()
    window.close_tab(window.tabs.currentIndex())
    assert "No flow is open" in window.problems.summary.text()
    assert not detail.isVisible()


def test_the_engine_starting_is_said_once(qtbot, tmp_path: Path, redis_url: str, key_prefix: str,
                                          app_settings: AppSettings) -> None:
    app_settings.first_start_done = True
    bridge = make_bridge(tmp_path, redis_url, key_prefix)
    window = MainWindow(app_settings, bridge)
    qtbot.addWidget(window)
    try:
        bridge.start()
        text = window.runs.stack.message.text()
        assert bridge.state == "starting" or "starting" in text
        assert text.count("starting") == 1 and text.startswith("The engine is starting")
        qtbot.waitUntil(lambda: bridge.state in ("running", "failed"), timeout=30_000)
    finally:
        bridge.stop()
    assert engine_state_text("failed", "Redis at redis://x refused the connection") == (
        "The engine is failed: Redis at redis://x refused the connection.")
    assert engine_state_text("stopped", "the engine is stopped.") == "The engine is stopped."


def test_the_first_start_hint_shows_only_with_the_example(qtbot, app_settings: AppSettings,
                                                          no_engine_env: None) -> None:
    window = _window(qtbot, app_settings)  # first start: opens the example with the hint
    assert window.hint_label.text() == FIRST_START_HINT and window.hint_label.isVisible()
    example = window.document
    window.new_flow()
    assert not window.hint_label.isVisible()
    window.tabs.setCurrentIndex(window.tabs.index_of(example))
    assert window.hint_label.isVisible()
    window.close_tab(window.tabs.currentIndex())
    assert not window.hint_label.isVisible()
