"""The providers a Lockgate install knows: loaded from `providers.json`, with one adapter per connection."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

from engine.clock import Clock
from engine.providers.base import TelemetrySink
from engine.providers.config import (
    ConnectionConfig,
    ProviderConfig,
    ProviderConfigError,
    provider_from_data,
    simulator_provider,
)
from engine.providers.openai_compat import OpenAICompatAdapter

PROVIDERS_FILE = "providers.json"
SIMULATOR_DEFAULT_URL = "http://127.0.0.1:8765/v1"
"""Where `lockgate provider-sim` listens by default; the demo's `local` provider points there."""


SecretLookup = Callable[[str], "str | None"]
"""A secret by name (`engine.secrets.lookup_secret` bound to a data folder)."""


class MissingProviderKey(LookupError):
    """A connection's `api_key_ref` names a secret that is stored nowhere."""

    def __str__(self) -> str:
        return str(self.args[0])


class UnknownProvider(KeyError):
    def __str__(self) -> str:
        return str(self.args[0])


def default_providers() -> list[ProviderConfig]:
    """With no providers file: the `local` provider on the bundled simulator's default port."""
    return [simulator_provider(SIMULATOR_DEFAULT_URL)]


def load_providers(path: Path) -> list[ProviderConfig]:
    """Providers from a JSON file `{"providers": [...]}`; errors name the file and the bad field."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ProviderConfigError(f"{path}: cannot read providers ({exc}); fix the file or remove it") from None
    entries = data.get("providers") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise ProviderConfigError(f'{path}: expected {{"providers": [...]}} at the top level')
    try:
        providers = [provider_from_data(entry) for entry in entries]
    except ProviderConfigError as exc:
        raise ProviderConfigError(f"{path}: {exc}") from None
    names = [p.name for p in providers]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ProviderConfigError(f"{path}: provider names repeat ({', '.join(duplicates)}); give each its own name")
    return providers


def save_providers(path: Path, providers: Iterable[ProviderConfig]) -> None:
    """Write `{"providers": [...]}` atomically (readers never see half a file); unset defaults are left out."""
    data = {"providers": [p.model_dump(mode="json", exclude_defaults=True) for p in providers]}
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    os.replace(temporary, path)


def providers_in(data_dir: Path) -> list[ProviderConfig]:
    """`data_dir/providers.json` when it exists, else the simulator default."""
    path = data_dir / PROVIDERS_FILE
    return load_providers(path) if path.exists() else default_providers()


class ProviderRegistry:
    """Provider settings by name and a cached adapter per (provider, connection)."""

    def __init__(self, providers: Iterable[ProviderConfig], telemetry: TelemetrySink | None = None,
                 clock: Clock | None = None, secrets: SecretLookup | None = None) -> None:
        self._providers = {p.name: p for p in providers}
        self._secrets = secrets
        self._telemetry = telemetry
        self._clock = clock
        self._adapters: dict[tuple[str, str], OpenAICompatAdapter] = {}
        self._lock = threading.Lock()

    def configs(self) -> list[ProviderConfig]:
        return [self._providers[name] for name in self.names()]

    def names(self) -> list[str]:
        return sorted(self._providers)

    def get(self, name: str) -> ProviderConfig:
        try:
            return self._providers[name]
        except KeyError:
            raise UnknownProvider(
                f"provider {name!r} is not configured (configured: {', '.join(self.names()) or 'none'}); "
                f"add it to {PROVIDERS_FILE} in the data folder") from None

    def adapter(self, provider: str, connection: str | None = None) -> OpenAICompatAdapter:
        """The adapter of one connection (the first when None); one per connection, reused across calls."""
        config = self.get(provider)
        name = connection or config.connections[0].name
        with self._lock:
            adapter = self._adapters.get((provider, name))
            if adapter is None:
                adapter = OpenAICompatAdapter(self._with_key(config, name), name, telemetry=self._telemetry,
                                              clock=self._clock)
                self._adapters[(provider, name)] = adapter
            return adapter

    def _with_key(self, config: ProviderConfig, connection: str) -> ProviderConfig:
        """`config` with the connection's `api_key_ref` resolved into its key (read when the adapter is built)."""
        chosen = config.connection(connection)
        if not chosen.api_key_ref:
            return config
        key = self._secrets(chosen.api_key_ref) if self._secrets is not None else None
        if not key:
            raise MissingProviderKey(
                f"provider {config.name!r}, connection {chosen.name!r}: its API key {chosen.api_key_ref!r} is not in "
                "the keyring or the data folder's secrets file; enter the key in Settings > Providers")
        resolved: tuple[ConnectionConfig, ...] = tuple(
            c.model_copy(update={"api_key": key}) if c.name == connection else c for c in config.connections)
        return config.model_copy(update={"connections": resolved})

    def close(self) -> None:
        with self._lock:
            adapters, self._adapters = list(self._adapters.values()), {}
        for adapter in adapters:
            adapter.close()
