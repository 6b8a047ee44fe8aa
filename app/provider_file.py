"""The Settings dialog's providers written where the engine reads them: `providers.json` in the data folder.

Keys are never written there: each connection names its secret (`api_key_ref`), which the
engine looks up through `engine.secrets` when it builds the provider's adapter. Entries the
app did not write from Settings (hand-written ones, the bundled simulator's) are kept unless
Settings names a provider the same way.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

from app.settings import ProviderSetting
from engine.providers.config import ConnectionConfig, ModelPrice, ProviderConfig, provider_from_data
from engine.providers.registry import PROVIDERS_FILE, load_providers, save_providers
from engine.secrets import provider_secret_name

SIMULATOR_MANAGER = "app-simulator"
"""`managed_by` of the `local` entry the app writes for its bundled provider simulator."""
SETTINGS_MANAGER = "app-settings"
"""`managed_by` of entries written from the Settings dialog (rewritten, or removed, at each save)."""


def provider_config(setting: ProviderSetting, has_key: bool) -> ProviderConfig:
    """The engine's settings for one provider row; raises `ProviderConfigError` naming a bad field."""
    prices = {model: ModelPrice(prompt_per_1m=Decimal(str(price.get("input", 0))),
                                completion_per_1m=Decimal(str(price.get("output", 0))))
              for model, price in setting.prices.items()}
    connection = ConnectionConfig(name="main", base_url=_v1(setting.base_url), capacity=setting.capacity,
                                  api_key_ref=provider_secret_name(setting.name) if has_key else "")
    return provider_from_data({"name": setting.name, "connections": [connection.model_dump()], "prices": prices,
                               "managed_by": SETTINGS_MANAGER})


def _v1(base_url: str) -> str:
    """The adapter wants the URL up to and including /v1; people often paste the host alone."""
    url = base_url.rstrip("/")
    return url if url.endswith("/v1") else f"{url}/v1"


def existing_providers(data_dir: Path) -> list[ProviderConfig]:
    path = data_dir / PROVIDERS_FILE
    return load_providers(path) if path.exists() else []


def write_settings_providers(data_dir: Path, settings: list[ProviderSetting], keys_present: set[str]) -> Path:
    """Write the dialog's providers (and the app's simulator entry, unless replaced) to providers.json.

    `keys_present`: names of providers whose API key is stored as a secret. With no providers and no
    file yet nothing is written (the engine's default, the simulator as `local`, stays in force)."""
    path = data_dir / PROVIDERS_FILE
    if not settings and not path.exists():
        return path
    chosen = [provider_config(s, s.name in keys_present) for s in settings]
    named = {p.name for p in chosen}
    # Entries written by hand (no managed_by) and the simulator's stay unless Settings names them.
    kept = [p for p in existing_providers(data_dir) if p.managed_by != SETTINGS_MANAGER and p.name not in named]
    save_providers(path, [*kept, *chosen])
    return path


def write_simulator_provider(data_dir: Path, provider: ProviderConfig) -> Path:
    """Put the app's simulator entry (`managed_by` set) into providers.json, replacing an older one of its name."""
    managed = provider.model_copy(update={"managed_by": SIMULATOR_MANAGER})
    others = [p for p in existing_providers(data_dir) if p.name != provider.name]
    path = data_dir / PROVIDERS_FILE
    save_providers(path, [managed, *others])
    return path


def simulator_entry_wanted(data_dir: Path, name: str = "local") -> bool:
    """True when the app may run its simulator for `name`: no providers.json yet, the app wrote that entry, or
    the file has no `name` and the app wrote all of it (Settings providers beside the demo's `local`).

    A providers.json written by hand without `name`, or any file with a `name` of the user's, is left alone."""
    path = data_dir / PROVIDERS_FILE
    if not path.exists():
        return True
    try:
        providers = load_providers(path)
    except ValueError:
        return False  # the engine will say what is wrong with the file; do not overwrite it
    entry = next((p for p in providers if p.name == name), None)
    if entry is None:
        return all(p.managed_by for p in providers)
    return entry.managed_by == SIMULATOR_MANAGER
