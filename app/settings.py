"""What the app remembers between starts: engine locations, theme, recent files, providers, budgets, secrets.

Plain values live in QSettings; secrets (provider API keys, approval API keys)
live in the system keyring, or, when the machine has no keyring backend, in a
0600 file in the data folder.
"""

from __future__ import annotations

import getpass
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from PySide6.QtCore import QSettings

from engine.config import EngineConfig, default_data_dir
from engine.secrets import (  # noqa: F401  (the app's names for them)
    KEYRING_SERVICE,
    SECRETS_FILE_NAME,
    SecretStore,
    approval_key_secret_name,
    keyring_available,
    mask_secret,
    provider_secret_name,
)

ORGANIZATION = "Lockgate"
APPLICATION = "Lockgate"
MAX_RECENT_FILES = 10

ThemeMode = Literal["system", "light", "dark"]
THEME_MODES: tuple[ThemeMode, ...] = ("system", "light", "dark")


@dataclass
class ProviderSetting:
    """One AI provider the engine may call; its API key is a secret stored apart."""

    name: str
    base_url: str
    prices: dict[str, dict[str, float]] = field(default_factory=dict)
    """model -> {"input": USD per 1M tokens, "output": USD per 1M tokens}."""
    capacity: int = 4
    """Calls the provider's connection pool may carry at once."""


@dataclass
class BudgetSetting:
    """A spending limit in USD per period."""

    name: str
    limit_usd: float
    period: Literal["day", "week", "month"] = "month"


class AppSettings:
    """Typed access to the app's QSettings. Tests pass their own QSettings (an INI file in a temp folder)."""

    def __init__(self, qsettings: QSettings | None = None) -> None:
        self.qsettings = qsettings if qsettings is not None else QSettings(ORGANIZATION, APPLICATION)

    # -- engine locations
    @property
    def data_dir(self) -> Path:
        value = self._str("engine/data_dir")
        return Path(value).expanduser() if value else default_data_dir()

    @data_dir.setter
    def data_dir(self, value: Path | str | None) -> None:
        self.qsettings.setValue("engine/data_dir", str(value) if value else "")

    @property
    def redis_url(self) -> str:
        """Empty: the embedded Redis server."""
        return self._str("engine/redis_url")

    @redis_url.setter
    def redis_url(self, value: str) -> None:
        self.qsettings.setValue("engine/redis_url", value.strip())

    @property
    def db_url(self) -> str:
        """Empty: SQLite in the data folder."""
        return self._str("engine/db_url")

    @db_url.setter
    def db_url(self, value: str) -> None:
        self.qsettings.setValue("engine/db_url", value.strip())

    def engine_config(self) -> EngineConfig:
        """The engine configuration these settings describe."""
        return EngineConfig(data_dir=self.data_dir, redis_url=self.redis_url or None, db_url=self.db_url or None)

    def secret_store(self) -> SecretStore:
        return SecretStore(self.data_dir)

    # -- look and history
    @property
    def theme(self) -> ThemeMode:
        value = self._str("view/theme") or "system"
        return value if value in THEME_MODES else "system"

    @theme.setter
    def theme(self, mode: ThemeMode) -> None:
        if mode not in THEME_MODES:
            raise ValueError(f"theme {mode!r} is not one of {', '.join(THEME_MODES)}")
        self.qsettings.setValue("view/theme", mode)

    def recent_files(self) -> list[str]:
        raw = self._str("files/recent")
        try:
            files = json.loads(raw) if raw else []
        except ValueError:
            return []
        return [str(f) for f in files if isinstance(f, str)]

    def add_recent_file(self, path: Path | str) -> list[str]:
        """Put `path` first in the recent list (once) and return the list."""
        resolved = str(Path(path).resolve())
        files = [resolved, *(f for f in self.recent_files() if f != resolved)][:MAX_RECENT_FILES]
        self.qsettings.setValue("files/recent", json.dumps(files))
        return files

    def clear_recent_files(self) -> None:
        self.qsettings.setValue("files/recent", "[]")

    def open_files(self) -> tuple[list[str], int]:
        """The flow files that were open at the last quit, and the index of the one in front."""
        raw = self._str("files/open")
        try:
            data = json.loads(raw) if raw else {}
        except ValueError:
            return [], 0
        files = data.get("files") if isinstance(data, dict) else None
        current = data.get("current") if isinstance(data, dict) else None
        paths = [str(f) for f in files if isinstance(f, str)] if isinstance(files, list) else []
        return paths, current if isinstance(current, int) and 0 <= current < len(paths) else 0

    def set_open_files(self, paths: list[Path | str], current: int = 0) -> None:
        self.qsettings.setValue("files/open", json.dumps({"files": [str(Path(p).resolve()) for p in paths],
                                                          "current": current}))

    @property
    def last_folder(self) -> str:
        """Where the last flow was opened from or saved to ("" before the first)."""
        return self._str("files/last_folder")

    @last_folder.setter
    def last_folder(self, folder: Path | str) -> None:
        self.qsettings.setValue("files/last_folder", str(folder))

    @property
    def first_start_done(self) -> bool:
        return self._str("app/first_start_done") == "1"

    @first_start_done.setter
    def first_start_done(self, done: bool) -> None:
        self.qsettings.setValue("app/first_start_done", "1" if done else "0")

    # -- who decides approvals in the app
    @property
    def your_name(self) -> str:
        """The name approvals decided in the app are decided as (default: the login name); flows' approver
        lists name it."""
        return self._str("approvals/your_name").strip() or login_name()

    @your_name.setter
    def your_name(self, name: str) -> None:
        self.qsettings.setValue("approvals/your_name", name.strip())

    # -- window
    def window_state(self) -> tuple[bytes | None, bytes | None]:
        """(geometry, dock/toolbar state) saved at the last quit."""
        return self._bytes("window/geometry"), self._bytes("window/state")

    def save_window_state(self, geometry: bytes, state: bytes) -> None:
        self.qsettings.setValue("window/geometry", geometry)
        self.qsettings.setValue("window/state", state)

    @property
    def bottom_dock_share(self) -> float | None:
        """The bottom dock area's share of the window's height at the last quit; None: not saved."""
        raw = self.qsettings.value("window/bottom_share")
        try:
            share = float(raw) if raw is not None else None
        except (TypeError, ValueError):
            return None
        return share if share is not None and 0 < share < 1 else None

    @bottom_dock_share.setter
    def bottom_dock_share(self, share: float | None) -> None:
        if share is None:
            self.qsettings.remove("window/bottom_share")
        else:
            self.qsettings.setValue("window/bottom_share", share)

    # -- providers and budgets (provider keys are secrets, kept apart)
    def providers(self) -> list[ProviderSetting]:
        return [ProviderSetting(**item) for item in self._json_list("engine/providers")]

    def set_providers(self, providers: list[ProviderSetting]) -> None:
        self.qsettings.setValue("engine/providers", json.dumps([asdict(p) for p in providers]))

    def budgets(self) -> list[BudgetSetting]:
        return [BudgetSetting(**item) for item in self._json_list("engine/budgets")]

    def set_budgets(self, budgets: list[BudgetSetting]) -> None:
        self.qsettings.setValue("engine/budgets", json.dumps([asdict(b) for b in budgets]))

    def sync(self) -> None:
        self.qsettings.sync()

    def _str(self, key: str) -> str:
        value = self.qsettings.value(key, "")
        return value if isinstance(value, str) else str(value or "")

    def _bytes(self, key: str) -> bytes | None:
        value = self.qsettings.value(key)
        if value is None:
            return None
        try:
            return bytes(value)
        except TypeError:
            return None

    def _json_list(self, key: str) -> list[Any]:
        raw = self._str(key)
        try:
            items = json.loads(raw) if raw else []
        except ValueError:
            return []
        return items if isinstance(items, list) else []


def login_name() -> str:
    """The operating system's name for the user, or "me" where it has none."""
    try:
        return getpass.getuser() or "me"
    except (OSError, KeyError):
        return "me"
