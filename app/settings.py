"""What the app remembers between starts: engine locations, theme, recent files, providers, budgets, secrets.

Plain values live in QSettings; secrets (provider API keys, approval API keys)
live in the system keyring, or, when the machine has no keyring backend, in a
0600 file in the data folder.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from PySide6.QtCore import QSettings

from engine.config import EngineConfig, default_data_dir

ORGANIZATION = "Lockgate"
APPLICATION = "Lockgate"
KEYRING_SERVICE = "lockgate"
SECRETS_FILE_NAME = "secrets.json"
MAX_RECENT_FILES = 10

ThemeMode = Literal["system", "light", "dark"]
THEME_MODES: tuple[ThemeMode, ...] = ("system", "light", "dark")


def mask_secret(secret: str) -> str:
    """`sk-live-1234abcd` -> `sk-…abcd`: enough to recognise a key, never enough to use it."""
    if not secret:
        return ""
    if len(secret) <= 8:
        return "…" + secret[-2:]
    prefix = secret[:3] if secret[2] == "-" else secret[:2]
    return f"{prefix}…{secret[-4:]}"


@dataclass
class ProviderSetting:
    """One AI provider the engine may call; its API key is a secret stored apart."""

    name: str
    base_url: str
    prices: dict[str, dict[str, float]] = field(default_factory=dict)
    """model -> {"input": USD per 1M tokens, "output": USD per 1M tokens}."""


@dataclass
class BudgetSetting:
    """A spending limit in USD per period."""

    name: str
    limit_usd: float
    period: Literal["day", "week", "month"] = "month"


def keyring_available() -> bool:
    """True when the system has a usable keyring backend (not the 'fail' or 'null' one)."""
    try:
        import keyring
        from keyring.backends import fail

        backend = keyring.get_keyring()
    except Exception:
        return False
    if isinstance(backend, fail.Keyring):
        return False
    return float(getattr(backend, "priority", 0) or 0) > 0


class SecretStore:
    """Secrets by name: the system keyring where present, else a 0600 JSON file in the data folder."""

    def __init__(self, data_dir: Path, use_keyring: bool | None = None) -> None:
        self.data_dir = data_dir
        self.uses_keyring = keyring_available() if use_keyring is None else use_keyring

    @property
    def file_path(self) -> Path:
        return self.data_dir / SECRETS_FILE_NAME

    @property
    def where(self) -> str:
        """A sentence for the Settings dialog saying where secrets go."""
        if self.uses_keyring:
            return "Secrets are stored in the system keyring."
        return (
            f"No system keyring is available: secrets are stored in {self.file_path} "
            "(readable only by you, permissions 0600)."
        )

    def get(self, name: str) -> str | None:
        if self.uses_keyring:
            import keyring

            return keyring.get_password(KEYRING_SERVICE, name)
        return self._read_file().get(name)

    def set(self, name: str, secret: str) -> None:
        if self.uses_keyring:
            import keyring

            keyring.set_password(KEYRING_SERVICE, name, secret)
            return
        secrets = self._read_file()
        secrets[name] = secret
        self._write_file(secrets)

    def delete(self, name: str) -> None:
        if self.uses_keyring:
            import keyring
            from keyring.errors import PasswordDeleteError

            try:
                keyring.delete_password(KEYRING_SERVICE, name)
            except PasswordDeleteError:
                pass
            return
        secrets = self._read_file()
        if secrets.pop(name, None) is not None:
            self._write_file(secrets)

    def masked(self, name: str) -> str:
        """The secret as the UI may show it."""
        return mask_secret(self.get(name) or "")

    def _read_file(self) -> dict[str, str]:
        try:
            data = json.loads(self.file_path.read_text("utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise OSError(
                f"secrets file {self.file_path} cannot be read ({exc}); fix or delete it and enter the keys again"
            ) from None
        return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}

    def _write_file(self, secrets: dict[str, str]) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        temporary = self.file_path.with_suffix(".tmp")
        # Created 0600 from the start so the secret is never briefly world-readable.
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, stat.S_IRUSR | stat.S_IWUSR)
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            json.dump(secrets, handle, indent=2, sort_keys=True)
        os.chmod(temporary, stat.S_IRUSR | stat.S_IWUSR)
        os.replace(temporary, self.file_path)


def provider_secret_name(provider: str) -> str:
    return f"provider:{provider}:api_key"


def approval_key_secret_name(key_name: str) -> str:
    return f"approval-key:{key_name}"


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

    @property
    def first_start_done(self) -> bool:
        return self._str("app/first_start_done") == "1"

    @first_start_done.setter
    def first_start_done(self, done: bool) -> None:
        self.qsettings.setValue("app/first_start_done", "1" if done else "0")

    # -- window
    def window_state(self) -> tuple[bytes | None, bytes | None]:
        """(geometry, dock/toolbar state) saved at the last quit."""
        return self._bytes("window/geometry"), self._bytes("window/state")

    def save_window_state(self, geometry: bytes, state: bytes) -> None:
        self.qsettings.setValue("window/geometry", geometry)
        self.qsettings.setValue("window/state", state)

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
