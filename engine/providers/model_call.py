"""One `ai.model` call as the runtime runs it: hold, overspend policy, pool slot, provider call, charge.

The runtime calls `ModelCaller.call` (and `poll` for background calls) and maps the outcome: `Answered`
→ write the answer and continue; `Parked` → park the run with `reason` for `retry_after_seconds`;
`Failed` → fail the step with `error_type`. Every outcome lists its ledger changes (`Reserved`,
`Settled`, `LateCharge`), one `hold_placed` / `hold_released` / `hold_charged` event each, and no
outcome but `Answered`-after-charge or a background `Parked` leaves a hold placed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Literal

from engine.catalog import ModelConfig
from engine.clock import Clock, SystemClock
from engine.concurrency.pool import Lease, ProviderPool
from engine.durations import parse_duration
from engine.money.ledger import BudgetError, BudgetLedger, HoldConflict, Refused, Reserved, Settled, UnknownHold
from engine.money.overspend import check_overspend
from engine.providers.base import (
    BackgroundCall,
    BadResponse,
    ChatRequest,
    ChatResult,
    ConnectionLost,
    ProviderError,
    ProviderTimeout,
    RateLimited,
)
from engine.providers.config import UnknownModelPrice
from engine.providers.registry import ProviderRegistry, UnknownProvider

POLL_MIN_SECONDS = 2.0
POLL_MAX_SECONDS = 30.0

ParkReason = Literal["pool_capacity", "provider_response", "overspend_approval"]


def next_poll_delay(elapsed_seconds: float) -> float:
    """Poll a background call every few seconds at first, backing off to every 30 s at most."""
    return min(POLL_MAX_SECONDS, max(POLL_MIN_SECONDS, elapsed_seconds / 4))


@dataclass(frozen=True)
class HoldRef:
    """The hold a call charges, and how to place it again (a retry after a pool wait places a new one)."""

    budget: str
    amount_usd: Decimal | float | str
    hold_id: str
    ttl_seconds: float = 1800.0


@dataclass(frozen=True)
class LateCharge:
    """An answer charged after its hold was released (background call past `hold_ttl`)."""

    hold_id: str
    budget: str
    cost_micros: int


LedgerChange = Reserved | Settled | LateCharge


@dataclass(frozen=True)
class Answered:
    result: ChatResult
    ledger: tuple[LedgerChange, ...] = ()


@dataclass(frozen=True)
class Parked:
    reason: ParkReason
    retry_after_seconds: float
    detail: str
    ledger: tuple[LedgerChange, ...] = ()
    background: BackgroundCall | None = None


@dataclass(frozen=True)
class Failed:
    error_type: str
    message: str
    ledger: tuple[LedgerChange, ...] = ()
    retryable: bool = False


Outcome = Answered | Parked | Failed


def _error_type(exc: ProviderError) -> str:
    if isinstance(exc, RateLimited):
        return "rate_limited"
    if isinstance(exc, ProviderTimeout):
        return "provider_timeout"
    if isinstance(exc, ConnectionLost):
        return "provider_connection_lost"
    if isinstance(exc, BadResponse):
        return "provider_bad_response"
    return "provider_error"


class ModelCaller:
    """Runs `ai.model` calls against the providers, the call slots and the budget ledger."""

    def __init__(self, registry: ProviderRegistry, pools: Mapping[str, ProviderPool],
                 ledger: BudgetLedger | None, clock: Clock | None = None) -> None:
        self._registry = registry
        self._pools = pools
        self._ledger = ledger
        self._clock: Clock = clock or SystemClock()

    def call(self, node_id: str, config: ModelConfig, request: ChatRequest, *, hold: HoldRef | None = None,
             pool_waits: int = 0, overspend_approved: bool = False) -> Outcome:
        """Make (or start, with `background`) the call; `pool_waits` counts the parks on capacity so far."""
        changes: list[LedgerChange] = []
        try:
            provider = self._registry.get(config.provider)
            pool = self._pools[provider.name]
            estimate = self._registry.adapter(provider.name).estimate_cost_micros(request)
        except (UnknownProvider, UnknownModelPrice) as exc:
            return Failed("unknown_provider" if isinstance(exc, UnknownProvider) else "unknown_model_price",
                          f'node "{node_id}" (ai.model): {exc}')
        except KeyError:
            return Failed("unknown_provider", f'node "{node_id}" (ai.model): no call slots configured for '
                                              f"provider {config.provider!r}; give the caller a pool for it")

        held_micros: int | None = None
        if hold is not None and self._ledger is not None:
            placed = self._ensure_hold(hold, changes)
            if isinstance(placed, Failed):
                return placed
            held_micros = placed

        check = check_overspend(estimate, held_micros, config.overspend, node_id=node_id,
                                approved=overspend_approved)
        if check.action == "fail":
            return Failed("overspend", check.message, self._release(hold, "overspend", changes))
        if check.action == "ask_approval":
            return Parked("overspend_approval", 0.0, check.message, self._release(hold, "overspend_approval", changes))

        slot = pool.acquire()
        if not isinstance(slot, Lease):
            detail = (f'node "{node_id}" (ai.model): provider {provider.name!r} has no capacity now '
                      f"({slot.reason})")
            return self._wait_or_fail(config, pool_waits, slot.retry_after_seconds, detail, "pool_capacity",
                                      hold, changes)
        adapter = self._registry.adapter(provider.name, slot.connection)
        try:
            if config.background:
                call = adapter.start_background(request)
                if call.immediate is None:
                    return Parked("provider_response", next_poll_delay(0), f'node "{node_id}" (ai.model): '
                                  f"background call {call.call_id} started", tuple(changes), background=call)
                result = call.immediate
            else:
                result = adapter.complete(request)
        except RateLimited as exc:
            return self._wait_or_fail(config, pool_waits, exc.retry_after, f'node "{node_id}" (ai.model): {exc}',
                                      "rate_limited", hold, changes)
        except ProviderError as exc:
            return Failed(_error_type(exc), f'node "{node_id}" (ai.model): {exc}',
                          self._release(hold, "call_failed", changes), retryable=exc.retryable)
        finally:
            slot.release()
        return Answered(result, self._charge(hold, result, changes))

    def poll(self, node_id: str, config: ModelConfig, call: BackgroundCall, *, hold: HoldRef | None = None) -> Outcome:
        """Ask for a background call's answer; past `hold_ttl` from the call's start its hold is returned."""
        changes: list[LedgerChange] = []
        now = self._clock.now()
        elapsed = now - call.started_at
        try:
            result = self._registry.adapter(config.provider, call.connection).poll_background(call)
        except ProviderError as exc:
            if exc.retryable:
                return Parked("provider_response", next_poll_delay(elapsed),
                              f'node "{node_id}" (ai.model): poll failed, trying again ({exc})')
            return Failed(_error_type(exc), f'node "{node_id}" (ai.model): {exc}',
                          self._release(hold, "call_failed", changes))
        if result is not None:
            return Answered(result, self._charge(hold, result, changes))
        if elapsed >= parse_duration(config.hold_ttl):
            self._release(hold, "hold_ttl", changes)
        return Parked("provider_response", next_poll_delay(elapsed),
                      f'node "{node_id}" (ai.model): background call {call.call_id} still running', tuple(changes))

    # -- the ledger side ---------------------------------------------------------------------------

    def _ensure_hold(self, hold: HoldRef, changes: list[LedgerChange]) -> int | Failed:
        """The placed hold's amount, placing it first when a retry brought a new hold id."""
        assert self._ledger is not None
        try:
            state = self._ledger.hold(hold.hold_id)
        except UnknownHold:
            state = None
        if state is not None:
            if state.state != "placed":
                return Failed("hold_settled", f"hold {hold.hold_id!r} is already {state.state}; "
                                              "a retry needs a new hold id")
            return state.amount_micros
        try:
            outcome = self._ledger.reserve(hold.budget, hold.hold_id, hold.amount_usd,
                                           self._clock.now() + hold.ttl_seconds)
        except (BudgetError, HoldConflict) as exc:
            return Failed("budget_error", str(exc))
        if isinstance(outcome, Refused):
            return Failed(outcome.reason, outcome.message)
        changes.append(outcome)
        return outcome.amount_micros

    def _release(self, hold: HoldRef | None, reason: str, changes: list[LedgerChange]) -> tuple[LedgerChange, ...]:
        if hold is not None and self._ledger is not None:
            try:
                settled = self._ledger.release(hold.hold_id, reason=reason)
            except UnknownHold:
                return tuple(changes)
            if settled.applied:
                changes.append(settled)
        return tuple(changes)

    def _charge(self, hold: HoldRef | None, result: ChatResult,
                changes: list[LedgerChange]) -> tuple[LedgerChange, ...]:
        if hold is None or self._ledger is None:
            return tuple(changes)
        settled = self._ledger.charge(hold.hold_id, cost_micros=result.cost_micros)
        if settled.applied:
            changes.append(settled)
        elif settled.state == "released" and self._ledger.charge_late(hold.hold_id, result.cost_micros):
            changes.append(LateCharge(hold.hold_id, settled.budget, result.cost_micros))
        return tuple(changes)

    def _wait_or_fail(self, config: ModelConfig, pool_waits: int, retry_after: float, detail: str,
                      error_type: str, hold: HoldRef | None, changes: list[LedgerChange]) -> Outcome:
        released = self._release(hold, "pool_wait" if config.pool_wait else "call_failed", changes)
        if config.pool_wait and pool_waits < config.max_pool_waits:
            return Parked("pool_capacity", max(retry_after, 0.001),
                          f"{detail}; waiting ({pool_waits + 1} of {config.max_pool_waits})", released)
        suffix = f"; gave up after {pool_waits} pool waits" if config.pool_wait else ""
        return Failed(error_type, detail + suffix, released, retryable=True)
