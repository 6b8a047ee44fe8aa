"""Settings ▸ Providers with none set says what is used instead (the bundled simulator as `local`, or the
providers written by hand in providers.json) and how to add one; the hint goes once a row is added."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QPushButton

from app.settings import AppSettings, ProviderSetting, SecretStore
from app.settings_dialog import SettingsDialog
from engine.providers.config import provider_from_data
from engine.providers.registry import PROVIDERS_FILE, save_providers


def providers_dialog(qtbot, settings: AppSettings) -> SettingsDialog:
    dialog = SettingsDialog(settings, store=SecretStore(settings.data_dir, use_keyring=False))
    qtbot.addWidget(dialog)
    dialog.show()
    dialog.show_tab("Providers")
    qtbot.waitExposed(dialog)
    QApplication.processEvents()
    return dialog


def button(dialog: SettingsDialog, text: str) -> QPushButton:
    page = dialog.tabs.currentWidget()
    return next(b for b in page.findChildren(QPushButton) if b.text() == text)


def test_empty_providers_say_the_simulator_is_used_and_how_to_add_one(qtbot, app_settings: AppSettings) -> None:
    dialog = providers_dialog(qtbot, app_settings)
    hint = dialog.providers_hint
    assert hint.isVisible()
    viewport = dialog.providers_table.viewport()
    assert hint.geometry() == viewport.rect() and viewport.height() > hint.heightForWidth(viewport.width())
    text = hint.text()
    assert "<b>local</b>" in text and "simulator" in text and "<b>Add</b>" in text and "base URL" in text

    qtbot.mouseClick(button(dialog, "Add"), Qt.MouseButton.LeftButton)
    assert dialog.providers_table.rowCount() == 1 and not hint.isVisible()
    dialog.providers_table.selectRow(0)
    qtbot.mouseClick(button(dialog, "Remove"), Qt.MouseButton.LeftButton)
    assert dialog.providers_table.rowCount() == 0 and hint.isVisible()


def test_no_hint_when_providers_are_set(qtbot, app_settings: AppSettings) -> None:
    app_settings.set_providers([ProviderSetting("openai", "https://api.openai.com/v1")])
    dialog = providers_dialog(qtbot, app_settings)
    assert dialog.providers_table.rowCount() == 1 and not dialog.providers_hint.isVisible()


def test_a_hand_written_providers_file_is_named_instead_of_the_simulator(qtbot, app_settings: AppSettings) -> None:
    app_settings.data_dir.mkdir(parents=True, exist_ok=True)
    path = app_settings.data_dir / PROVIDERS_FILE
    save_providers(path, [provider_from_data({"name": "work", "connections": [
        {"name": "main", "base_url": "http://127.0.0.1:9/v1", "api_key": "k"}]})])
    dialog = providers_dialog(qtbot, app_settings)
    text = dialog.providers_hint.text()
    assert dialog.providers_hint.isVisible()
    assert "<b>work</b>" in text and str(path) in text and "simulator" not in text
