"""The budget ledger: atomic holds against per-period USD budgets, in Redis with Lua.

Money is integer micro-dollars. A hold goes `placed` → `charged` | `released`, exactly once; every
result carries what the matching `hold_placed` / `hold_charged` / `hold_released` event needs. A
period roll-over zeroes `spent` (holds still placed stay held and are charged to the new period).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

import redis

from engine.clock import Clock, SystemClock
from engine.money.amounts import MICROS_PER_USD, AmountError, format_usd, usd_to_micros
from engine.money.periods import PERIODS, period_starts
from engine.transport.keys import Keyspace

BUDGET_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$")
HOLD_ID = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:-]{0,63}$")
"""64 characters at most: the `holds.id` column's width."""
DEFAULT_PERIOD = "month"
"""A new budget's period when `set_budget` is given none."""
MAX_LIMIT_MICROS = 1_000_000_000 * MICROS_PER_USD
"""$1e9: keeps every sum exact in Lua's doubles (below 2^53)."""

HoldStateName = Literal["placed", "charged", "released"]


class BudgetError(ValueError):
    """A budget or hold request the ledger cannot accept; the message says what to change."""


class UnknownBudget(BudgetError):
    pass


class UnknownHold(BudgetError):
    pass


class HoldConflict(BudgetError):
    """A hold id reused for a different reservation, or a hold that is no longer placed."""


@dataclass(frozen=True)
class BudgetState:
    name: str
    limit_micros: int
    period: str
    period_start: int
    spent_micros: int
    held_micros: int

    @property
    def remaining_micros(self) -> int:
        return max(0, self.limit_micros - self.spent_micros - self.held_micros)

    @property
    def exhausted(self) -> bool:
        return self.remaining_micros == 0


@dataclass(frozen=True)
class Reserved:
    """A placed hold (or the same hold again, `replayed`, when a step re-runs): a `hold_placed` event."""

    hold_id: str
    budget: str
    amount_micros: int
    placed_at: float
    expires_at: float
    run_id: str
    node_id: str
    budget_after: BudgetState
    replayed: bool = False


@dataclass(frozen=True)
class Refused:
    """No hold: the budget's remaining amount is below the request."""

    hold_id: str
    budget: str
    amount_micros: int
    remaining_micros: int
    reason: Literal["budget_exhausted", "insufficient_budget"]

    @property
    def message(self) -> str:
        return (f"budget {self.budget!r} has {format_usd(self.remaining_micros)} left, "
                f"below the {format_usd(self.amount_micros)} requested; raise its limit or wait for the next period")


@dataclass(frozen=True)
class Settled:
    """A hold's one transition out of `placed` (or, `applied=False`, the transition it already had).

    `charged_micros` is the real cost (may exceed the hold: `overspend_micros`); `released_micros` is
    the part of the hold returned to the budget.
    """

    hold_id: str
    budget: str
    state: HoldStateName
    amount_micros: int
    charged_micros: int
    released_micros: int
    settled_at: float
    run_id: str
    node_id: str
    applied: bool
    reason: str = ""

    @property
    def overspend_micros(self) -> int:
        return max(0, self.charged_micros - self.amount_micros)


@dataclass(frozen=True)
class HoldState:
    hold_id: str
    budget: str
    state: HoldStateName
    amount_micros: int
    placed_at: float
    expires_at: float
    run_id: str
    node_id: str
    charged_micros: int
    late_charged_micros: int | None
    settled_at: float | None
    reason: str


_ROLL = """
local function roll(bkey, starts)
  local period = redis.call('HGET', bkey, 'period')
  local start = tonumber(starts[period])
  if start and start > tonumber(redis.call('HGET', bkey, 'period_start') or '0') then
    redis.call('HSET', bkey, 'period_start', start, 'spent', 0)
  end
end
local function budget_row(bkey)
  return redis.call('HMGET', bkey, 'limit', 'period', 'period_start', 'spent', 'held')
end
"""

_SET_BUDGET = _ROLL + """
-- KEYS: budget, budget index. ARGV: name, limit, period ('': keep the budget's), day, week, month,
-- the period of a new budget when ARGV[3] is ''
local starts = {day = ARGV[4], week = ARGV[5], month = ARGV[6]}
local period = ARGV[3]
if redis.call('EXISTS', KEYS[1]) == 0 then
  if period == '' then period = ARGV[7] end
  redis.call('HSET', KEYS[1], 'limit', ARGV[2], 'period', period, 'period_start', starts[period],
             'spent', 0, 'held', 0)
else
  roll(KEYS[1], starts)
  if period ~= '' and redis.call('HGET', KEYS[1], 'period') ~= period then
    redis.call('HSET', KEYS[1], 'period', period, 'period_start', starts[period])
  end
  redis.call('HSET', KEYS[1], 'limit', ARGV[2])
end
redis.call('SADD', KEYS[2], ARGV[1])
return budget_row(KEYS[1])
"""

_RESERVE = _ROLL + """
-- KEYS: budget, hold, expiring. ARGV: hold_id, amount, expires_at, now, day, week, month, budget, run, node
if redis.call('EXISTS', KEYS[1]) == 0 then return {'unknown_budget'} end
local existing = redis.call('HMGET', KEYS[2], 'state', 'budget', 'amount')
if existing[1] then return {'exists', existing[1], existing[2], existing[3]} end
roll(KEYS[1], {day = ARGV[5], week = ARGV[6], month = ARGV[7]})
local amount = tonumber(ARGV[2])
local row = budget_row(KEYS[1])
local limit, spent, held = tonumber(row[1]), tonumber(row[4]), tonumber(row[5])
if spent + held + amount > limit then return {'refused', row[1], row[4], row[5]} end
if amount > 0 then redis.call('HINCRBY', KEYS[1], 'held', amount) end
redis.call('HSET', KEYS[2], 'budget', ARGV[8], 'amount', ARGV[2], 'state', 'placed', 'placed_at', ARGV[4],
           'expires_at', ARGV[3], 'run_id', ARGV[9], 'node_id', ARGV[10])
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[1])
return {'reserved', unpack(budget_row(KEYS[1]))}
"""

_SETTLE = _ROLL + """
-- KEYS: budget, hold, expiring. ARGV: hold_id, target state, charged, now, day, week, month, reason
local row = redis.call('HMGET', KEYS[2], 'state', 'amount', 'charged', 'settled_at', 'reason')
if not row[1] then return {'unknown_hold'} end
if row[1] ~= 'placed' then return {'settled', row[1], row[2], row[3] or '0', row[4] or '0', row[5] or ''} end
roll(KEYS[1], {day = ARGV[5], week = ARGV[6], month = ARGV[7]})
local amount = tonumber(row[2])
-- HINCRBY refuses Lua's "-0", so a zero hold moves nothing
if amount > 0 then redis.call('HINCRBY', KEYS[1], 'held', -amount) end
local charged = tonumber(ARGV[3])
if charged > 0 then redis.call('HINCRBY', KEYS[1], 'spent', charged) end
redis.call('HSET', KEYS[2], 'state', ARGV[2], 'charged', ARGV[3], 'settled_at', ARGV[4], 'reason', ARGV[8])
redis.call('ZREM', KEYS[3], ARGV[1])
return {'applied', ARGV[2], row[2], ARGV[3], ARGV[4], ARGV[8]}
"""

_CHARGE_LATE = _ROLL + """
-- KEYS: budget, hold. ARGV: cost, now, day, week, month
local row = redis.call('HMGET', KEYS[2], 'state', 'late_charged')
if not row[1] then return {'unknown_hold'} end
if row[1] ~= 'released' then return {'not_released', row[1]} end
if row[2] then return {'already', row[2]} end
roll(KEYS[1], {day = ARGV[3], week = ARGV[4], month = ARGV[5]})
if tonumber(ARGV[1]) > 0 then redis.call('HINCRBY', KEYS[1], 'spent', tonumber(ARGV[1])) end
redis.call('HSET', KEYS[2], 'late_charged', ARGV[1], 'late_charged_at', ARGV[2])
return {'applied', ARGV[1]}
"""

_RESTORE_BUDGET = """
-- KEYS: budget, budget index. ARGV: name, limit, period, period_start, spent, held
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'limit', ARGV[2], 'period', ARGV[3], 'period_start', ARGV[4], 'spent', ARGV[5],
           'held', ARGV[6])
redis.call('SADD', KEYS[2], ARGV[1])
return 1
"""

_RESTORE_HOLD = """
-- KEYS: hold, expiring. ARGV: hold_id, expires_at, field, value, field, value, ...
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV, 3))
if redis.call('HGET', KEYS[1], 'state') == 'placed' then redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1]) end
return 1
"""


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _state_from_row(name: str, row: list[Any]) -> BudgetState:
    limit, period, start, spent, held = (_text(v) for v in row)
    return BudgetState(name, int(float(limit)), period, int(float(start)), int(float(spent)), int(float(held)))


class BudgetLedger:
    """Budgets and holds in Redis; every operation is one Lua script, so concurrent processes never overdraw."""

    def __init__(self, client: redis.Redis, keys: Keyspace, clock: Clock | None = None) -> None:
        self._redis = client
        self._keys = keys
        self._clock: Clock = clock or SystemClock()
        self._set_budget = client.register_script(_SET_BUDGET)
        self._reserve = client.register_script(_RESERVE)
        self._settle = client.register_script(_SETTLE)
        self._charge_late = client.register_script(_CHARGE_LATE)
        self._restore_budget = client.register_script(_RESTORE_BUDGET)
        self._restore_hold = client.register_script(_RESTORE_HOLD)

    # -- budgets ---------------------------------------------------------------------------------

    def set_budget(self, name: str, limit_usd: Any, period: str | None = None) -> BudgetState:
        """Create a budget or change its limit/period (spent and held are kept). `period` None keeps an existing
        budget's period; a new budget's is then `DEFAULT_PERIOD`."""
        _check_name(name, "budget")
        try:
            limit = usd_to_micros(limit_usd, f"budget {name!r} limit")
        except AmountError as exc:
            raise BudgetError(str(exc)) from None
        if limit > MAX_LIMIT_MICROS:
            raise BudgetError(f"budget {name!r} limit {format_usd(limit)} is above $1,000,000,000; give a smaller one")
        if period is not None and period not in PERIODS:
            raise BudgetError(f"budget {name!r} period {period!r} is not one of {', '.join(PERIODS)}")
        starts = period_starts(self._clock.now())
        row = self._set_budget(keys=[self._keys.budget(name), self._keys.budget_names],
                               args=[name, limit, period or "", starts["day"], starts["week"], starts["month"],
                                     DEFAULT_PERIOD])
        return _state_from_row(name, row)

    def budget(self, name: str) -> BudgetState:
        """The budget as of now (a period that has rolled over shows nothing spent)."""
        row = self._redis.hmget(self._keys.budget(name), "limit", "period", "period_start", "spent", "held")
        if row[0] is None:
            raise UnknownBudget(self._unknown_budget_message(name))
        state = _state_from_row(name, row)
        current_start = period_starts(self._clock.now())[state.period]
        if current_start > state.period_start:
            state = BudgetState(name, state.limit_micros, state.period, current_start, 0, state.held_micros)
        return state

    def budgets(self) -> list[BudgetState]:
        names = sorted(_text(n) for n in self._redis.smembers(self._keys.budget_names))
        return [self.budget(n) for n in names]

    def is_exhausted(self, name: str) -> bool:
        """`create_run()`'s preflight: True when nothing of the budget is left this period."""
        return self.budget(name).exhausted

    # -- holds -----------------------------------------------------------------------------------

    def reserve(self, budget: str, hold_id: str, amount_usd: Any, expires_at: float, *,
                run_id: str = "", node_id: str = "") -> Reserved | Refused:
        """Place a hold of `amount_usd` unless it would take held + spent above the limit."""
        if not isinstance(hold_id, str) or not HOLD_ID.match(hold_id):
            raise BudgetError(f"hold id {hold_id!r} is not usable: use 1-64 letters, digits, '_', '.', ':' or '-'")
        try:
            amount = usd_to_micros(amount_usd, f"hold {hold_id!r} amount")
        except AmountError as exc:
            raise BudgetError(str(exc)) from None
        now = self._clock.now()
        if expires_at <= now:
            raise BudgetError(f"hold {hold_id!r} would expire at {expires_at}, not after now ({now}); "
                              "give a future expiry")
        starts = period_starts(now)
        reply = self._reserve(
            keys=[self._keys.budget(budget), self._keys.hold(hold_id), self._keys.holds_expiring],
            args=[hold_id, amount, repr(float(expires_at)), repr(float(now)), starts["day"], starts["week"],
                  starts["month"], budget, run_id, node_id])
        outcome = _text(reply[0])
        if outcome == "unknown_budget":
            raise UnknownBudget(self._unknown_budget_message(budget))
        if outcome == "exists":
            state, held_budget, held_amount = (_text(v) for v in reply[1:4])
            if state != "placed" or held_budget != budget or int(held_amount) != amount:
                raise HoldConflict(f"hold {hold_id!r} already exists ({state}, {format_usd(int(held_amount))} of "
                                   f"budget {held_budget!r}); use a new hold id for a new reservation")
            hold = self.hold(hold_id)
            return Reserved(hold_id, budget, amount, hold.placed_at, hold.expires_at, hold.run_id, hold.node_id,
                            self.budget(budget), replayed=True)
        if outcome == "refused":
            limit, spent, held = (int(float(_text(v))) for v in reply[1:4])
            remaining = max(0, limit - spent - held)
            return Refused(hold_id, budget, amount, remaining,
                           "budget_exhausted" if remaining == 0 else "insufficient_budget")
        return Reserved(hold_id, budget, amount, now, float(expires_at), run_id, node_id,
                        _state_from_row(budget, list(reply[1:6])))

    def charge(self, hold_id: str, cost_usd: Any = None, *, cost_micros: int | None = None) -> Settled:
        """Charge the call's real cost against the hold and return the rest; exactly once."""
        if cost_micros is None:
            try:
                cost_micros = usd_to_micros(cost_usd, f"hold {hold_id!r} cost")
            except AmountError as exc:
                raise BudgetError(str(exc)) from None
        elif cost_micros < 0:
            raise BudgetError(f"hold {hold_id!r} cost {cost_micros} micro-dollars is negative; costs are zero or more")
        return self._settle_hold(hold_id, "charged", cost_micros, "")

    def release(self, hold_id: str, reason: str = "released") -> Settled:
        """Return the whole hold to its budget; exactly once (a charged hold is never also released)."""
        return self._settle_hold(hold_id, "released", 0, reason)

    def charge_late(self, hold_id: str, cost_micros: int) -> bool:
        """Charge an answer that arrived after its hold was released (a background call past `hold_ttl`).

        The money was spent, so it counts even above the limit; True the first time, False after.
        """
        if cost_micros < 0:
            raise BudgetError(f"hold {hold_id!r} late cost {cost_micros} is negative; costs are zero or more")
        budget = self._budget_of(hold_id)
        starts = period_starts(self._clock.now())
        reply = self._charge_late(keys=[self._keys.budget(budget), self._keys.hold(hold_id)],
                                  args=[cost_micros, repr(self._clock.now()), starts["day"], starts["week"],
                                        starts["month"]])
        outcome = _text(reply[0])
        if outcome == "not_released":
            raise HoldConflict(f"hold {hold_id!r} is {_text(reply[1])}, not released; charge it with charge()")
        return outcome == "applied"

    def sweep_expired(self, limit: int = 500) -> list[Settled]:
        """Release placed holds whose `expires_at` has passed; returns the releases this call applied."""
        now = self._clock.now()
        due = self._redis.zrangebyscore(self._keys.holds_expiring, "-inf", now, start=0, num=limit)
        released = []
        for raw in due:
            try:
                settled = self.release(_text(raw), reason="expired")
            except UnknownHold:
                self._redis.zrem(self._keys.holds_expiring, _text(raw))
                continue
            if settled.applied:
                released.append(settled)
        return released

    def hold(self, hold_id: str) -> HoldState:
        raw = self._redis.hgetall(self._keys.hold(hold_id))
        if not raw:
            raise UnknownHold(f"no hold {hold_id!r}; it was never placed (or its budget was cleared)")
        row = {_text(k): _text(v) for k, v in raw.items()}
        return HoldState(
            hold_id=hold_id, budget=row["budget"], state=row["state"],  # type: ignore[arg-type]
            amount_micros=int(row["amount"]), placed_at=float(row["placed_at"]),
            expires_at=float(row["expires_at"]), run_id=row.get("run_id", ""), node_id=row.get("node_id", ""),
            charged_micros=int(row.get("charged", "0")),
            late_charged_micros=int(row["late_charged"]) if "late_charged" in row else None,
            settled_at=float(row["settled_at"]) if "settled_at" in row else None, reason=row.get("reason", ""))

    def placed_hold_ids(self) -> list[str]:
        """Ids of every hold still placed, soonest expiry first."""
        return [_text(v) for v in self._redis.zrange(self._keys.holds_expiring, 0, -1)]

    # -- restoring from the durable copy -------------------------------------------------------

    def restore_budget(self, state: BudgetState) -> bool:
        """Put a budget back (e.g. from SQL after Redis lost it); never overwrites one Redis still has."""
        if state.period not in PERIODS:
            raise BudgetError(f"budget {state.name!r} period {state.period!r} is not one of {', '.join(PERIODS)}")
        return bool(self._restore_budget(
            keys=[self._keys.budget(state.name), self._keys.budget_names],
            args=[state.name, state.limit_micros, state.period, state.period_start, state.spent_micros,
                  state.held_micros]))

    def restore_hold(self, hold: HoldState) -> bool:
        """Put a hold back; a placed one is swept like any other. Never overwrites one Redis still has."""
        fields: list[Any] = ["budget", hold.budget, "amount", hold.amount_micros, "state", hold.state,
                             "placed_at", repr(hold.placed_at), "expires_at", repr(hold.expires_at),
                             "run_id", hold.run_id, "node_id", hold.node_id, "charged", hold.charged_micros,
                             "reason", hold.reason]
        if hold.settled_at is not None:
            fields += ["settled_at", repr(hold.settled_at)]
        if hold.late_charged_micros is not None:
            fields += ["late_charged", hold.late_charged_micros]
        return bool(self._restore_hold(keys=[self._keys.hold(hold.hold_id), self._keys.holds_expiring],
                                       args=[hold.hold_id, repr(hold.expires_at), *fields]))

    # -- plumbing --------------------------------------------------------------------------------

    def _budget_of(self, hold_id: str) -> str:
        budget = self._redis.hget(self._keys.hold(hold_id), "budget")
        if budget is None:
            raise UnknownHold(f"no hold {hold_id!r}; it was never placed (or its budget was cleared)")
        return _text(budget)

    def _settle_hold(self, hold_id: str, target: HoldStateName, charged: int, reason: str) -> Settled:
        budget = self._budget_of(hold_id)
        now = self._clock.now()
        starts = period_starts(now)
        reply = self._settle(keys=[self._keys.budget(budget), self._keys.hold(hold_id), self._keys.holds_expiring],
                             args=[hold_id, target, charged, repr(now), starts["day"], starts["week"],
                                   starts["month"], reason])
        outcome = _text(reply[0])
        if outcome == "unknown_hold":
            raise UnknownHold(f"no hold {hold_id!r}; it was never placed (or its budget was cleared)")
        state, amount, charged_text, settled_at, settled_reason = (_text(v) for v in reply[1:6])
        amount_micros, charged_micros = int(amount), int(charged_text)
        hold_row = self._redis.hmget(self._keys.hold(hold_id), "run_id", "node_id")
        return Settled(
            hold_id=hold_id, budget=budget, state=state,  # type: ignore[arg-type]
            amount_micros=amount_micros, charged_micros=charged_micros,
            released_micros=max(0, amount_micros - charged_micros), settled_at=float(settled_at),
            run_id=_text(hold_row[0] or b""), node_id=_text(hold_row[1] or b""),
            applied=outcome == "applied", reason=settled_reason)

    def _unknown_budget_message(self, name: str) -> str:
        known = sorted(_text(n) for n in self._redis.smembers(self._keys.budget_names))
        return (f"no budget {name!r} (budgets: {', '.join(known) or 'none'}); "
                f"create it with `lockgate budgets set {name} --limit USD --period month`")


def _check_name(value: str, what: str) -> None:
    if not isinstance(value, str) or not BUDGET_NAME.match(value):
        raise BudgetError(f"{what} {value!r} is not usable: use 1-64 letters, digits, '_', '.' or '-'")
