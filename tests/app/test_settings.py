"""Settings persist in QSettings; secrets go to the keyring or a 0600 file and are only shown masked."""

from __future__ import annotations

import stat
from pathlib import Path

from PySide6.QtCore import QSettings

from app.engine_process import EngineProcess
from app.gui import engine_config
from app.settings import (
    AppSettings,
    BudgetSetting,
    ProviderSetting,
    SecretStore,
    keyring_available,
    mask_secret,
    provider_secret_name,
)
from app.settings_dialog import SettingsDialog, SettingsError, parse_price_table
from engine.settings import LockgateSettings
from tests.app.cells import cell


def reopen(settings: AppSettings) -> AppSettings:
    settings.sync()
    return AppSettings(QSettings(settings.qsettings.fileName(), QSettings.Format.IniFormat))


def test_values_survive_a_restart(app_settings: AppSettings, tmp_path: Path) -> None:
    app_settings.theme = "dark"
    app_settings.redis_url = " redis://127.0.0.1:6379/3 "
    app_settings.db_url = "postgresql+psycopg://root@127.0.0.1:5432/test"
    app_settings.add_recent_file(tmp_path / "a.flow.json")
    app_settings.add_recent_file(tmp_path / "b.flow.json")
    app_settings.add_recent_file(tmp_path / "a.flow.json")
    app_settings.set_providers([ProviderSetting("local", "http://127.0.0.1:8011", {"sim-small": {"input": 0.5}})])
    app_settings.set_budgets([BudgetSetting("default", 25.0, "day")])
    app_settings.save_window_state(b"geometry-bytes", b"state-bytes")

    again = reopen(app_settings)
    assert again.theme == "dark"
    assert again.redis_url == "redis://127.0.0.1:6379/3"
    assert again.engine_config().db_url == "postgresql+psycopg://root@127.0.0.1:5432/test"
    assert again.recent_files() == [str((tmp_path / name).resolve()) for name in ("a.flow.json", "b.flow.json")]
    assert again.providers()[0].prices == {"sim-small": {"input": 0.5}}
    assert again.budgets() == [BudgetSetting("default", 25.0, "day")]
    assert again.window_state() == (b"geometry-bytes", b"state-bytes")
    assert again.data_dir == tmp_path / "data"


def test_empty_urls_mean_embedded_redis_and_sqlite(app_settings: AppSettings, tmp_path: Path) -> None:
    config = app_settings.engine_config()
    assert config.redis_url is None
    assert config.sql_url == f"sqlite:///{tmp_path / 'data' / 'lockgate.db'}"


def test_mask_shows_a_prefix_and_the_last_four() -> None:
    assert mask_secret("sk-live-0123456789abcd") == "sk-…abcd"
    assert mask_secret("lgk-zzzzzzzzzzzz9876") == "lg…9876"
    assert "secret" not in mask_secret("secret12")
    assert mask_secret("") == ""


def test_file_store_is_private_and_round_trips(tmp_path: Path) -> None:
    store = SecretStore(tmp_path / "data", use_keyring=False)
    store.set(provider_secret_name("local"), "sk-test-1234567890wxyz")
    mode = stat.S_IMODE(store.file_path.stat().st_mode)
    assert mode == 0o600
    assert SecretStore(tmp_path / "data", use_keyring=False).get(provider_secret_name("local")) == (
        "sk-test-1234567890wxyz"
    )
    assert store.masked(provider_secret_name("local")) == "sk-…wxyz"
    store.delete(provider_secret_name("local"))
    assert store.get(provider_secret_name("local")) is None
    assert "0600" in store.where


def test_store_uses_keyring_only_when_a_backend_exists(tmp_path: Path) -> None:
    assert SecretStore(tmp_path).uses_keyring == keyring_available()


def test_dialog_saves_providers_budgets_and_masked_secrets(qtbot, app_settings: AppSettings) -> None:
    store = SecretStore(app_settings.data_dir, use_keyring=False)
    dialog = SettingsDialog(app_settings, store=store)
    qtbot.addWidget(dialog)
    assert "0600" in dialog.secrets_note.text()
    dialog.redis_edit.setText("redis://127.0.0.1:6379/0")
    dialog._add_provider_row(None)
    table = dialog.providers_table
    cell(table, 0, 0).setText("local")
    cell(table, 0, 1).setText("http://127.0.0.1:8011")
    cell(table, 0, 3).setText('{"sim-small": {"input": 0.5, "output": 1.5}}')
    dialog.set_provider_key(0, "sk-local-secretvalue9999")
    assert cell(table, 0, 2).text() == "sk-…9999"
    dialog._add_budget_row(None)
    # Without a running engine, approval keys cannot be made (the engine keeps them) and the tab says so.
    assert not any(button.isEnabled() for button in dialog.key_buttons)
    assert "start the engine" in dialog.keys_note.text()
    dialog.save()

    assert store.get(provider_secret_name("local")) == "sk-local-secretvalue9999"
    again = reopen(app_settings)
    assert again.redis_url == "redis://127.0.0.1:6379/0"
    assert [p.name for p in again.providers()] == ["local"]
    assert again.budgets()[0].name == "default"

    # Reopened, the dialog shows the keys masked and never in full.
    second = SettingsDialog(again, store=store)
    qtbot.addWidget(second)
    shown = [cell(second.providers_table, 0, c).text() for c in range(4)]
    assert "sk-local-secretvalue9999" not in shown
    assert "sk-…9999" in shown


def test_dialog_refuses_bad_rows_with_a_fix(qtbot, app_settings: AppSettings) -> None:
    dialog = SettingsDialog(app_settings, store=SecretStore(app_settings.data_dir, use_keyring=False))
    qtbot.addWidget(dialog)
    dialog._add_provider_row(None)
    cell(dialog.providers_table, 0, 0).setText("local")
    cell(dialog.providers_table, 0, 1).setText("127.0.0.1:8011")
    try:
        dialog.collect()
    except SettingsError as exc:
        assert "must start with http://" in str(exc)
    else:
        raise AssertionError("a base URL without a scheme was accepted")
    try:
        parse_price_table("{not json", "local")
    except SettingsError as exc:
        assert "not JSON" in str(exc)
    else:
        raise AssertionError("a broken price table was accepted")


def test_the_app_keeps_to_the_key_namespace_and_journal_it_is_given(app_settings: AppSettings, tmp_path: Path) -> None:
    # A shared Redis: the app's engine (and its child, through EngineProcess's environment) writes only under
    # LOCKGATE_KEY_PREFIX, as every other process of the deployment does.
    given = LockgateSettings(data_dir=tmp_path / "data", key_prefix="team-a", event_journal=500)
    config = engine_config(app_settings, given)
    assert (config.key_prefix, config.event_journal) == ("team-a", 500)
    child = EngineProcess(config, "redis://127.0.0.1:6379/0", workers=1)
    assert child.environment()["LOCKGATE_KEY_PREFIX"] == "team-a"
