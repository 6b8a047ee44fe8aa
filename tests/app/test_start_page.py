"""The empty canvas area of a later start: what to do first, until a flow is open (real widgets, offscreen)."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QMessageBox

from app.gui import create_application, create_main_window
from app.settings import AppSettings
from app.window import MainWindow


def test_a_later_start_with_nothing_to_reopen_says_what_to_do(qtbot, window: MainWindow) -> None:
    page = window.start_page
    assert window.tabs.count() == 0
    assert page.isVisible() and not window.tabs.isVisible()
    assert page.new_button.text() == "New flow" and page.new_button.isVisible()
    assert page.example_button.text() == "Open example" and page.example_button.isVisible()
    assert not page.recent_title.isVisible()  # no recent files yet

    qtbot.mouseClick(page.new_button, Qt.MouseButton.LeftButton)
    assert window.tabs.count() == 1 and window.tabs.isVisible() and not page.isVisible()

    window.close_tab(0)
    assert page.isVisible()
    examples = page.example_menu.actions()
    assert examples[0].text() == "ticket-triage"  # the example a first start opens, then the others
    assert len(examples) > 1
    examples[0].trigger()
    document = window.document
    assert document is not None and document.flow_ref().id == "ticket-triage"
    assert not page.isVisible()


def test_the_start_page_lists_recent_files_that_still_exist(qtbot, app_settings: AppSettings, triage_path: Path,
                                                            tmp_path: Path, no_engine_env: None) -> None:
    app_settings.first_start_done = True
    app_settings.add_recent_file(tmp_path / "gone.flow.json")
    app_settings.add_recent_file(triage_path)
    window = create_main_window(create_application(), app_settings, start_engine=False)
    qtbot.addWidget(window)
    window.ask_to_save = lambda _document: QMessageBox.StandardButton.Discard
    window.show()
    qtbot.waitExposed(window)
    page = window.start_page
    assert page.isVisible() and page.recent_title.isVisible()
    assert [button.toolTip() for button in page.recent_buttons] == [str(triage_path.resolve())]
    assert page.recent_buttons[0].text().startswith("ticket-triage.flow.json")
    qtbot.mouseClick(page.recent_buttons[0], Qt.MouseButton.LeftButton)
    document = window.document
    assert document is not None and Path(str(document.path)).resolve() == triage_path.resolve()
    assert not page.isVisible()


def test_a_first_start_opens_the_example_instead(qtbot, app_settings: AppSettings, no_engine_env: None) -> None:
    window = create_main_window(create_application(), app_settings, start_engine=False)
    qtbot.addWidget(window)
    window.ask_to_save = lambda _document: QMessageBox.StandardButton.Discard
    window.show()
    qtbot.waitExposed(window)
    assert window.tabs.count() == 1 and window.tabs.isVisible()
    assert not window.start_page.isVisible()
