"""The money and provider services a process's workers use: ledger, model caller, pools, run state.

`EngineServices.start()` installs one `MoneyServices` for the process (workers of one engine share
it); the `budget.reserve` and `ai.model` bodies read it with `current()`.
"""

from __future__ import annotations

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
    registry = ProviderRegistry(providers_in(data_dir), telemetry=sink, clock=clock)
    pools = {config.name: ProviderPool(client, keys, config, clock=clock) for config in registry.configs()}
    caller = ModelCaller(registry, pools, ledger, clock)
    return MoneyServices(client, keys, sql, clock, ledger, registry, pools, caller, RunMoneyState(client, keys))


_current: MoneyServices | None = None
_current_lock = threading.Lock()


def install(services: MoneyServices | None) -> None:
    """Make `services` the process's money services (None: remove them)."""
    global _current
    with _current_lock:
        _current = services


def uninstall(services: MoneyServices) -> None:
    """Remove `services` if they are still the installed ones (a later engine's stay)."""
    global _current
    with _current_lock:
        if _current is services:
            _current = None


def current() -> MoneyServices | None:
    return _current
