"""Call slots: a model call takes one slot under the global cap and one on a pool connection with capacity."""

from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass, field
from typing import Literal

import redis

from engine.clock import Clock, SystemClock
from engine.concurrency.cap import CapKey
from engine.concurrency.settings import AimdSettings
from engine.providers.config import ProviderConfig
from engine.transport.keys import Keyspace

CAPACITY_RETRY_SECONDS = 1.0
"""How soon to try again when the cap or every connection is full (slots free as calls end)."""

_ACQUIRE = """
-- KEYS: cap, global slots, blocked, conn slots... ARGV: now, lease expiry, lease id, static cap, capacities...
local now = tonumber(ARGV[1])
local blocked = tonumber(redis.call('GET', KEYS[3]) or '0')
if blocked > now then return {'rate_limited', tostring(blocked - now)} end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local cap = tonumber(redis.call('GET', KEYS[1]) or ARGV[4])
if redis.call('ZCARD', KEYS[2]) >= cap then return {'cap_reached', tostring(cap)} end
for i = 4, #KEYS do
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now)
  if redis.call('ZCARD', KEYS[i]) < tonumber(ARGV[i + 1]) then
    redis.call('ZADD', KEYS[i], ARGV[2], ARGV[3])
    redis.call('ZADD', KEYS[2], ARGV[2], ARGV[3])
    return {'acquired', tostring(i - 3)}
  end
end
return {'connections_full', ''}
"""

RefusalReason = Literal["rate_limited", "cap_reached", "connections_full"]


@dataclass(frozen=True)
class PoolRefusal:
    """No slot now; the runtime parks the call (`pool_capacity`) for `retry_after_seconds`."""

    provider: str
    reason: RefusalReason
    retry_after_seconds: float


@dataclass
class Lease:
    """One call slot; `release()` it when the call ends (it also lapses after the lease TTL)."""

    provider: str
    connection: str
    lease_id: str
    expires_at: float
    _pool: ProviderPool = field(repr=False)
    _released: bool = field(default=False, repr=False)

    def release(self) -> None:
        if not self._released:
            self._released = True
            self._pool._release(self)

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class ProviderPool:
    """Hands out slots for one provider's connections, under the global cap, atomically in Lua."""

    def __init__(self, client: redis.Redis, keys: Keyspace, provider: ProviderConfig, *,
                 settings: AimdSettings | None = None, clock: Clock | None = None,
                 lease_ttl_seconds: float | None = None) -> None:
        self._redis = client
        self._keys = keys
        self.provider = provider
        self.settings = settings or AimdSettings()
        self._clock: Clock = clock or SystemClock()
        self._cap = CapKey(client, keys, self.settings)
        # A lease outlives the longest call, so only a crashed worker's slot ever lapses.
        self._lease_ttl = lease_ttl_seconds if lease_ttl_seconds is not None else provider.timeout_seconds + 30
        self._acquire = client.register_script(_ACQUIRE)
        self._lock = threading.Lock()

    def acquire(self) -> Lease | PoolRefusal:
        """A slot on the first connection with free capacity, or why there is none."""
        now = self._clock.now()
        lease_id = uuid.uuid4().hex
        connections = self.provider.connections
        keys = [self._keys.concurrency_cap, self._keys.call_slots,
                self._keys.provider_blocked_until(self.provider.name),
                *(self._keys.connection_slots(self.provider.name, c.name) for c in connections)]
        expires_at = now + self._lease_ttl
        outcome, detail = self._acquire(keys=keys, args=[repr(now), repr(expires_at), lease_id,
                                                         self.settings.static_cap,
                                                         *(c.capacity for c in connections)])
        outcome = outcome.decode() if isinstance(outcome, bytes) else str(outcome)
        detail = detail.decode() if isinstance(detail, bytes) else str(detail)
        if outcome == "acquired":
            return Lease(self.provider.name, connections[int(detail) - 1].name, lease_id, expires_at, self)
        if outcome == "rate_limited":
            return PoolRefusal(self.provider.name, "rate_limited", max(0.001, float(detail)))
        return PoolRefusal(self.provider.name, outcome, CAPACITY_RETRY_SECONDS)  # type: ignore[arg-type]

    def try_acquire(self) -> Lease | None:
        """A slot, or None when there is no capacity now (the caller parks with `pool_capacity`)."""
        outcome = self.acquire()
        return outcome if isinstance(outcome, Lease) else None

    def in_flight(self) -> int:
        """Calls holding a slot under the global cap (all providers)."""
        return int(self._redis.zcount(self._keys.call_slots, self._clock.now(), "+inf"))

    def connection_in_flight(self, connection: str) -> int:
        key = self._keys.connection_slots(self.provider.name, connection)
        return int(self._redis.zcount(key, self._clock.now(), "+inf"))

    def current_cap(self) -> tuple[int, bool]:
        """(cap in force, whether the control loop's key set it)."""
        return self._cap.current()

    def _release(self, lease: Lease) -> None:
        pipe = self._redis.pipeline(transaction=True)
        pipe.zrem(self._keys.call_slots, lease.lease_id)
        pipe.zrem(self._keys.connection_slots(lease.provider, lease.connection), lease.lease_id)
        pipe.execute()
