"""App test fixtures: settings in a temp INI file (never the user's), the bundled triage example."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import QSettings

from app.examples import example_bytes
from app.settings import AppSettings


@pytest.fixture
def app_settings(tmp_path: Path) -> AppSettings:
    qsettings = QSettings(str(tmp_path / "lockgate-settings.ini"), QSettings.Format.IniFormat)
    settings = AppSettings(qsettings)
    settings.data_dir = tmp_path / "data"
    return settings


@pytest.fixture
def triage_path(tmp_path: Path) -> Path:
    path = tmp_path / "ticket-triage.flow.json"
    path.write_bytes(example_bytes("ticket-triage.flow.json"))
    return path


@pytest.fixture
def no_engine_env(tmp_path: Path) -> Iterator[None]:
    """Point the app's engine locations at the test's temp folder."""
    saved = {k: os.environ.get(k) for k in ("LOCKGATE_DATA_DIR",)}
    os.environ["LOCKGATE_DATA_DIR"] = str(tmp_path / "data")
    yield
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
