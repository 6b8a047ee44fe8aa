"""The cap key: read with its static fallback, moved by the control loop's tick and cut on a 429."""

from __future__ import annotations

import redis

from engine.concurrency.settings import AimdSettings
from engine.transport.keys import Keyspace

_CUT = """
-- KEYS: cap, control. ARGV: now, factor, min, static, ttl_ms, cooldown
local now = tonumber(ARGV[1])
redis.call('HSET', KEYS[2], 'last_429_at', ARGV[1])
local last_cut = tonumber(redis.call('HGET', KEYS[2], 'last_cut_at') or '0')
local cur = tonumber(redis.call('GET', KEYS[1]) or ARGV[4])
if now - last_cut < tonumber(ARGV[6]) then return {cur, 0} end
local new = math.max(tonumber(ARGV[3]), math.floor(cur * tonumber(ARGV[2])))
redis.call('SET', KEYS[1], new, 'PX', ARGV[5])
redis.call('HSET', KEYS[2], 'last_cut_at', ARGV[1], 'cap', new)
return {new, 1}
"""

_TICK = """
-- KEYS: cap, control. ARGV: now, target, increase, factor, min, static, ttl_ms
local target = tonumber(ARGV[2])
local minimum = tonumber(ARGV[5])
local cur = tonumber(redis.call('GET', KEYS[1]) or ARGV[6])
local last_tick = tonumber(redis.call('HGET', KEYS[2], 'last_tick_at') or '0')
local last_429 = tonumber(redis.call('HGET', KEYS[2], 'last_429_at') or '0')
local new, action
if last_429 > last_tick then
  new, action = math.min(cur, math.max(target, minimum)), 'hold_after_429'
elseif cur > target then
  new, action = math.max(target, math.floor(cur * tonumber(ARGV[4]))), 'decrease'
elseif cur < target then
  new, action = math.min(target, cur + tonumber(ARGV[3])), 'increase'
else
  new, action = cur, 'hold'
end
new = math.max(minimum, new)
redis.call('SET', KEYS[1], new, 'PX', ARGV[7])
redis.call('HSET', KEYS[2], 'last_tick_at', ARGV[1], 'target', target, 'cap', new)
return {new, action}
"""


class CapKey:
    """The global cap on concurrent model calls as a Redis key with a TTL."""

    def __init__(self, client: redis.Redis, keys: Keyspace, settings: AimdSettings) -> None:
        self._redis = client
        self._keys = keys
        self._settings = settings
        self._cut = client.register_script(_CUT)
        self._tick = client.register_script(_TICK)

    def current(self) -> tuple[int, bool]:
        """(cap in force, whether it came from the key); the static setting when the key expired."""
        raw = self._redis.get(self._keys.concurrency_cap)
        if raw is None:
            return self._settings.static_cap, False
        return int(float(raw)), True

    def cut_for_429(self, now: float) -> tuple[int, bool]:
        """Multiplicative cut at once (at most one per cooldown); (cap after, whether it cut)."""
        s = self._settings
        cap, applied = self._cut(keys=[self._keys.concurrency_cap, self._keys.concurrency_control],
                                 args=[repr(now), s.decrease_factor, s.min_cap, s.static_cap,
                                       int(s.cap_ttl_seconds * 1000), s.cut_cooldown_seconds])
        return int(cap), bool(applied)

    def move_toward(self, target: int, now: float) -> tuple[int, str]:
        """One AIMD step toward `target`; (new cap, action taken)."""
        s = self._settings
        cap, action = self._tick(keys=[self._keys.concurrency_cap, self._keys.concurrency_control],
                                 args=[repr(now), target, s.increase, s.decrease_factor, s.min_cap, s.static_cap,
                                       int(s.cap_ttl_seconds * 1000)])
        return int(cap), action.decode() if isinstance(action, bytes) else str(action)
