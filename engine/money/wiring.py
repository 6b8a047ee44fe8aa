"""The money and provider services a process's workers use: ledger, model caller, pools, run state.

`EngineServices.start()` installs one `MoneyServices` for the process (workers of one engine share
it); the `budget.reserve` and `ai.model` bodies read it with `current()`.
"""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass, field
from pathlib import Path

import redis
import sqlalchemy as sa

from engine.clock import Clock
from engine.concurrency.pool import ProviderPool
from engine.concurrency.telemetry import RedisTelemetrySink
from engine.flow import Flow
from engine.money.ledger import BudgetLedger
from engine.money.run_state import RunMoneyState
from engine.providers.model_call import ModelCaller
from engine.providers.registry import ProviderRegistry, providers_in
from engine.publish import get_version
from engine.secrets import lookup_secret
from engine.transport.keys import Keyspace


@dataclass
class MoneyServices:
    client: redis.Redis
    keys: Keyspace
    sql: sa.Engine
    clock: Clock
    ledger: BudgetLedger
    registry: ProviderRegistry
    pools: dict[str, ProviderPool]
    caller: ModelCaller
    state: RunMoneyState
    _flows: dict[tuple[str, int], Flow] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def flow(self, flow_id: str, version: int) -> Flow:
        """A published flow version (immutable, so cached)."""
        with self._lock:
            found = self._flows.get((flow_id, version))
        if found is None:
            _published, found = get_version(self.sql, flow_id, version)
            with self._lock:
                self._flows[(flow_id, version)] = found
        return found

    def close(self) -> None:
        self.registry.close()


def build_money_services(client: redis.Redis, keys: Keyspace, sql: sa.Engine, clock: Clock,
                         data_dir: Path, telemetry_client: redis.Redis | None = None) -> MoneyServices:
    """Services for the providers of `data_dir/providers.json` (default: `local`, the simulator).

    `telemetry_client` should give up fast (`fail_soft_client`): telemetry must never hold a call up."""
    ledger = BudgetLedger(client, keys, clock)
    sink = RedisTelemetrySink(telemetry_client or client, keys, clock=clock)
    registry = ProviderRegistry(providers_in(data_dir), telemetry=sink, clock=clock,
                                secrets=functools.partial(lookup_secret, data_dir))
    pools = {config.name: ProviderPool(client, keys, config, clock=clock) for config in registry.configs()}
    caller = ModelCaller(registry, pools, ledger, clock)
    return MoneyServices(client, keys, sql, clock, ledger, registry, pools, caller, RunMoneyState(client, keys))


_installed: dict[str, MoneyServices] = {}
"""By key prefix: engines on different prefixes in one process each find their own."""
_last: MoneyServices | None = None
_installed_lock = threading.Lock()


def install(services: MoneyServices) -> None:
    """Make `services` the money services of its key prefix in this process."""
    global _last
    with _installed_lock:
        _installed[services.keys.prefix] = services
        _last = services


def uninstall(services: MoneyServices) -> None:
    """Remove `services` if they are still the installed ones (a later engine's stay)."""
    global _last
    with _installed_lock:
        if _installed.get(services.keys.prefix) is services:
            del _installed[services.keys.prefix]
        if _last is services:
            _last = next(iter(_installed.values()), None)


def current(prefix: str | None = None) -> MoneyServices | None:
    """The services of key prefix `prefix` (None: the latest installed)."""
    with _installed_lock:
        return _installed.get(prefix) if prefix is not None else _last
