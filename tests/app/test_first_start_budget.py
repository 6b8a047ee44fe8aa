"""A fresh install starts with the budget its first-start example spends from, so that example runs as its hint
says; a data folder already in use, or budgets already set, are left as they are."""

from __future__ import annotations

from pathlib import Path

from app.examples import STARTER_BUDGET
from app.gui import engine_config, give_starter_budget
from app.settings import AppSettings, BudgetSetting
from engine.settings import load_settings


def test_a_fresh_install_gets_the_starter_budget(app_settings: AppSettings, no_engine_env: None) -> None:
    assert app_settings.budgets() == [] and not app_settings.first_start_done
    config = engine_config(app_settings, load_settings())
    assert give_starter_budget(app_settings, config)
    assert app_settings.budgets() == [BudgetSetting(STARTER_BUDGET[0], STARTER_BUDGET[1], "month")]
    assert not give_starter_budget(app_settings, config)  # given once


def test_a_data_folder_in_use_keeps_its_budgets(app_settings: AppSettings, no_engine_env: None, tmp_path: Path) -> None:
    used = tmp_path / "data"
    used.mkdir()
    (used / "lockgate.db").write_bytes(b"")  # a store another lockgate (the CLI) made
    assert not give_starter_budget(app_settings, engine_config(app_settings, load_settings()))
    assert app_settings.budgets() == []
    mine = [BudgetSetting("team", 40.0, "week")]
    app_settings.set_budgets(mine)
    (used / "lockgate.db").unlink()
    assert not give_starter_budget(app_settings, engine_config(app_settings, load_settings()))
    assert app_settings.budgets() == mine
