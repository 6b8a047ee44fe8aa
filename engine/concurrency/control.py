"""The control loop: each tick sets the cap toward min(provider, DB pool, host, ceiling) with AIMD."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass

import redis
import sqlalchemy as sa
from sqlalchemy.pool import NullPool, QueuePool, SingletonThreadPool, StaticPool

from engine.clock import Clock, SystemClock
from engine.concurrency.cap import CapKey
from engine.concurrency.settings import AimdSettings
from engine.concurrency.telemetry import read_telemetry
from engine.providers.config import ProviderConfig
from engine.transport.keys import Keyspace

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CapLimits:
    """The four bounds of the cap; the target is their minimum."""

    provider: int
    db_pool: int
    host: int
    ceiling: int

    @property
    def target(self) -> int:
        return min(self.provider, self.db_pool, self.host, self.ceiling)


@dataclass(frozen=True)
class Tick:
    cap: int
    previous: int
    action: str
    limits: CapLimits
    at: float


def default_host_limit() -> int:
    """Calls one host carries at once: threads waiting on HTTP are cheap, so a multiple of the cores."""
    return 16 * (os.cpu_count() or 1)


def sql_pool_limit(engine: sa.Engine) -> int | None:
    """Connections the engine's SQL pool hands out at once (its size plus the overflow it allows); None when the
    pool sets no bound (no pooling, one connection per thread, unlimited overflow)."""
    pool = engine.pool
    if isinstance(pool, StaticPool):
        return 1
    if isinstance(pool, NullPool | SingletonThreadPool) or not isinstance(pool, QueuePool):
        return None
    overflow = int(getattr(pool, "_max_overflow", 0))  # QueuePool keeps its configured overflow only here
    return None if overflow < 0 else pool.size() + overflow


class ControlLoop:
    """Senses telemetry, decides the target, actuates the cap key. `tick()` once, or `run()` until stopped."""

    def __init__(self, client: redis.Redis, keys: Keyspace, providers: Sequence[ProviderConfig], *,
                 settings: AimdSettings | None = None, clock: Clock | None = None,
                 db_pool_limit: int | None = None, host_limit: int | None = None) -> None:
        self._redis = client
        self._keys = keys
        self._providers = tuple(providers)
        self.settings = settings or AimdSettings()
        self._clock: Clock = clock or SystemClock()
        self._cap = CapKey(client, keys, self.settings)
        self._db_pool_limit = db_pool_limit
        self._host_limit = host_limit if host_limit is not None else default_host_limit()
        self.ticks: list[Tick] = []

    def provider_limit(self, provider: ProviderConfig, now: float) -> int:
        """The pool's capacity, lowered to the requests left in the provider's window while that is known."""
        limit = provider.capacity
        telemetry = read_telemetry(self._redis, self._keys, provider.name)
        observed = telemetry.get("observed_at")
        remaining = telemetry.get("remaining_requests")
        reset = telemetry.get("reset_requests_s")
        if observed is not None and remaining is not None and now - observed <= self.settings.telemetry_fresh_seconds:
            window_open = reset is None or now < observed + reset
            if window_open:
                limit = min(limit, max(self.settings.min_cap, int(remaining)))
        return limit

    def limits(self) -> CapLimits:
        now = self._clock.now()
        provider = (sum(self.provider_limit(p, now) for p in self._providers) if self._providers
                    else self.settings.ceiling)
        return CapLimits(
            provider=provider,
            db_pool=self._db_pool_limit if self._db_pool_limit is not None else self.settings.ceiling,
            host=self._host_limit,
            ceiling=self.settings.ceiling,
        )

    def tick(self) -> Tick:
        now = self._clock.now()
        previous, _ = self._cap.current()
        limits = self.limits()
        cap, action = self._cap.move_toward(limits.target, now)
        tick = Tick(cap=cap, previous=previous, action=action, limits=limits, at=now)
        self.ticks.append(tick)
        del self.ticks[:-1000]
        return tick

    def run(self, stop: threading.Event) -> None:
        """Tick every `settings.tick_seconds` until `stop` is set; a failed tick is logged and retried."""
        while not stop.is_set():
            try:
                self.tick()
            except redis.RedisError as exc:
                log.warning("concurrency control tick failed (%s); workers use the static cap if this lasts", exc)
            stop.wait(self.settings.tick_seconds)

    def start_thread(self, stop: threading.Event) -> threading.Thread:
        thread = threading.Thread(target=self.run, args=(stop,), name="concurrency-control", daemon=True)
        thread.start()
        return thread
