"""Provider settings: a named provider, its pool of connections and its model price table."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

NAME_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$"


class ModelPrice(BaseModel):
    """USD per 1M tokens (which is exactly micro-dollars per token)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    prompt_per_1m: Decimal = Field(ge=0, allow_inf_nan=False)
    completion_per_1m: Decimal = Field(ge=0, allow_inf_nan=False)


class ConnectionConfig(BaseModel):
    """One endpoint/key of a provider, with how many calls it may carry at once."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=NAME_PATTERN)
    base_url: str = Field(min_length=1, description="up to and including /v1, e.g. http://127.0.0.1:8765/v1")
    api_key: str = ""
    """The key in plain text in providers.json: works, but less safe than `api_key_ref`."""
    api_key_ref: str = ""
    """The name of a secret (`engine.secrets`: keyring or the data folder's 0600 file) holding the key."""
    capacity: int = Field(default=4, ge=1, le=10_000)


class ProviderConfig(BaseModel):
    """A provider (e.g. `local`, `openai`): its connections pool and the price of each model."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=NAME_PATTERN)
    connections: tuple[ConnectionConfig, ...] = Field(min_length=1)
    prices: dict[str, ModelPrice] = Field(default_factory=dict)
    timeout_seconds: float = Field(default=60.0, gt=0)
    default_max_tokens: int = Field(default=1024, ge=1, description="max_tokens assumed for estimates when unset")
    managed_by: str = ""
    """Who wrote this entry and may rewrite it (the app's bundled simulator: `app-simulator`); empty: the user."""

    @model_validator(mode="after")
    def _unique_connection_names(self) -> ProviderConfig:
        names = [c.name for c in self.connections]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"connection names repeat ({', '.join(duplicates)}); give each connection its own name")
        return self

    @property
    def capacity(self) -> int:
        """Calls the whole pool may carry at once."""
        return sum(c.capacity for c in self.connections)

    def connection(self, name: str) -> ConnectionConfig:
        for candidate in self.connections:
            if candidate.name == name:
                return candidate
        known = ", ".join(c.name for c in self.connections)
        raise KeyError(f"provider {self.name!r} has no connection {name!r}; its connections are {known}")

    def price(self, model: str) -> ModelPrice:
        try:
            return self.prices[model]
        except KeyError:
            raise UnknownModelPrice(
                f"provider {self.name!r} has no price for model {model!r}; "
                f"add it under prices (USD per 1M prompt and completion tokens)"
            ) from None


class UnknownModelPrice(KeyError):
    """A call to a model the provider's price table does not list (its cost could not be charged)."""

    def __str__(self) -> str:
        return str(self.args[0])


class ProviderConfigError(ValueError):
    """Provider settings that do not validate; the message lists each problem."""


def provider_from_data(data: dict[str, Any]) -> ProviderConfig:
    """A validated `ProviderConfig`; raises `ProviderConfigError` naming each bad field."""
    try:
        return ProviderConfig.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'provider'}: {e['msg']}" for e in exc.errors())
        name = data.get("name", "?") if isinstance(data, dict) else "?"
        raise ProviderConfigError(f"provider {name!r}: {problems}") from None


def simulator_provider(base_url: str, name: str = "local", capacity: int = 8,
                       api_key: str = "sim-key") -> ProviderConfig:
    """Settings for the bundled provider simulator, priced like a small hosted model."""
    return ProviderConfig(
        name=name,
        connections=(ConnectionConfig(name="main", base_url=base_url, api_key=api_key, capacity=capacity),),
        prices={model: price for model, price in SIMULATOR_PRICES.items()},
    )


SIMULATOR_PRICES: dict[str, ModelPrice] = {
    "sim-small": ModelPrice(prompt_per_1m=Decimal("0.50"), completion_per_1m=Decimal("1.50")),
    "sim-large": ModelPrice(prompt_per_1m=Decimal("5.00"), completion_per_1m=Decimal("15.00")),
}
"""Prices the demo gives the simulator's models (USD per 1M tokens)."""
